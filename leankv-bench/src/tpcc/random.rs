//! The random generators of the TPC-C specification (clauses 2.1.6 and 4.3.2): uniform
//! integers, NURand, alphanumeric and numeric strings, last names from syllables, zip codes and
//! the `ORIGINAL` marker in item and stock data.

use super::schema::{concat, Text, NAME_WIDTH};

/// The ten syllables last names are built from (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The run-time constants `C` of NURand, one per `A` (clause 2.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NurandConstants {
    pub last_name: u32,
    pub customer_id: u32,
    pub item_id: u32,
}

impl NurandConstants {
    /// Constants for loading.
    pub fn for_load(rng: &mut fastrand::Rng) -> Self {
        NurandConstants {
            last_name: rng.u32(0..=255),
            customer_id: rng.u32(0..=1023),
            item_id: rng.u32(0..=8191),
        }
    }

    /// Constants for the measured run: the same for ids, and for last names one whose
    /// distance from the load's lies in 65..=119 but is neither 96 nor 112 (clause 2.1.6.1).
    pub fn for_run(load: NurandConstants, rng: &mut fastrand::Rng) -> Self {
        loop {
            let last_name = rng.u32(0..=255);
            let delta = last_name.abs_diff(load.last_name);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                return NurandConstants { last_name, ..load };
            }
        }
    }
}

/// A random source with the specification's generators.
pub struct TpccRandom {
    pub rng: fastrand::Rng,
    pub constants: NurandConstants,
}

impl TpccRandom {
    pub fn new(seed: u64, constants: NurandConstants) -> Self {
        TpccRandom {
            rng: fastrand::Rng::with_seed(seed),
            constants,
        }
    }

    /// Uniform in `low..=high`.
    pub fn uniform(&mut self, low: u32, high: u32) -> u32 {
        self.rng.u32(low..=high)
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
    pub fn nurand(&mut self, a: u32, x: u32, y: u32, c: u32) -> u32 {
        let mixed = self.uniform(0, a) | self.uniform(x, y);
        ((mixed + c) % (y - x + 1)) + x
    }

    /// A customer id, skewed as NURand(1023, 1, 3000).
    pub fn customer_id(&mut self) -> u32 {
        self.nurand(1023, 1, 3000, self.constants.customer_id)
    }

    /// An item id, skewed as NURand(8191, 1, 100000).
    pub fn item_id(&mut self) -> u32 {
        self.nurand(8191, 1, 100_000, self.constants.item_id)
    }

    /// The number behind a last name, skewed as NURand(255, 0, 999).
    pub fn last_name_number(&mut self) -> u32 {
        self.nurand(255, 0, 999, self.constants.last_name)
    }

    /// A random alphanumeric string of `min..=max` characters.
    pub fn astring(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = self.rng.usize(min..=max);
        (0..len)
            .map(|_| ALPHANUMERIC[self.rng.usize(..ALPHANUMERIC.len())])
            .collect()
    }

    /// A random string of `min..=max` digits.
    pub fn nstring(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = self.rng.usize(min..=max);
        (0..len).map(|_| b'0' + self.rng.u8(0..10)).collect()
    }

    /// Four random digits followed by "11111" (clause 4.3.2.7).
    pub fn zip(&mut self) -> Vec<u8> {
        let mut zip = self.nstring(4, 4);
        zip.extend_from_slice(b"11111");
        zip
    }

    /// Item or stock data: 26..=50 characters, 10% of them holding "ORIGINAL" at a random
    /// position (clause 4.3.3.1).
    pub fn data_with_original(&mut self) -> Vec<u8> {
        let mut data = self.astring(26, 50);
        if self.rng.u32(0..10) == 0 {
            let at = self.rng.usize(0..=data.len() - 8);
            data[at..at + 8].copy_from_slice(b"ORIGINAL");
        }
        data
    }

    /// A fixed point amount in cents, uniform in `low..=high` cents.
    pub fn cents(&mut self, low: i64, high: i64) -> i64 {
        self.rng.i64(low..=high)
    }
}

/// The last name for `number` in 0..=999: its three digits pick one syllable each.
pub fn last_name(number: u32) -> Text<NAME_WIDTH> {
    debug_assert!(number < 1000);
    let syllable = |digit: u32| SYLLABLES[digit as usize].as_bytes();
    concat(&[
        syllable(number / 100),
        syllable(number / 10 % 10),
        syllable(number % 10),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random() -> TpccRandom {
        let mut rng = fastrand::Rng::with_seed(7);
        let constants = NurandConstants::for_load(&mut rng);
        TpccRandom::new(11, constants)
    }

    #[test]
    fn last_names_follow_the_syllable_rule() {
        assert_eq!(&*last_name(0), b"BARBARBAR");
        assert_eq!(&*last_name(371), b"PRICALLYOUGHT");
        assert_eq!(&*last_name(999), b"EINGEINGEING");
        assert_eq!(&*last_name(40), b"BARPRESBAR");
        // 1000 distinct names, none longer than the 16 bytes the schema stores.
        let names: std::collections::BTreeSet<_> =
            (0..1000).map(|n| last_name(n).to_vec()).collect();
        assert_eq!(names.len(), 1000);
        assert!(names.iter().all(|name| name.len() <= 16));
    }

    #[test]
    fn nurand_stays_in_bounds_and_is_skewed() {
        let mut random = random();
        let mut counts = vec![0u32; 3001];
        for _ in 0..300_000 {
            let id = random.customer_id();
            assert!((1..=3000).contains(&id), "customer id {id}");
            counts[id as usize] += 1;
        }
        for _ in 0..100_000 {
            assert!((1..=100_000).contains(&random.item_id()));
            assert!(random.last_name_number() <= 999);
        }
        // Uniform would give 100 per id; NURand's OR makes some ids many times likelier.
        let max = *counts.iter().max().unwrap();
        let min = *counts[1..].iter().min().unwrap();
        assert!(max > 4 * min.max(1), "max {max}, min {min}: not skewed");
    }

    #[test]
    fn run_constants_keep_the_required_distance() {
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..200 {
            let load = NurandConstants::for_load(&mut rng);
            let run = NurandConstants::for_run(load, &mut rng);
            let delta = run.last_name.abs_diff(load.last_name);
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
            assert_eq!(
                (run.customer_id, run.item_id),
                (load.customer_id, load.item_id)
            );
        }
    }

    #[test]
    fn strings_have_the_requested_lengths_and_alphabets() {
        let mut random = random();
        let mut originals = 0;
        for _ in 0..2_000 {
            let text = random.astring(8, 16);
            assert!((8..=16).contains(&text.len()));
            assert!(text.iter().all(u8::is_ascii_alphanumeric));
            let digits = random.nstring(16, 16);
            assert!(digits.len() == 16 && digits.iter().all(u8::is_ascii_digit));
            let zip = random.zip();
            assert!(zip.len() == 9 && zip.ends_with(b"11111"));
            let data = random.data_with_original();
            assert!((26..=50).contains(&data.len()));
            originals += usize::from(data.windows(8).any(|w| w == b"ORIGINAL"));
        }
        assert!(
            (100..300).contains(&originals),
            "{originals} of 2000 ORIGINAL"
        );
    }
}
