//! Workload generators: the key space, key distributions (uniform, Zipf) and operation mixes
//! (YCSB presets A–F).
//!
//! Record `i` of a key space of `n` records has the 8-byte big-endian key `scramble(i)`, a
//! bijection on `u64`: keys spread over the whole space, loading in index order inserts at
//! random positions (as YCSB's hashed keys do), and the hot records of a Zipf distribution
//! (small indexes) land on unrelated leaves rather than on a few neighbouring ones.

use std::fmt;
use std::str::FromStr;

/// A bijection on `u64` (the splitmix64 finalizer: each step is invertible).
pub fn scramble(index: u64) -> u64 {
    let mut x = index;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The key of record `index`.
pub fn key(index: u64) -> [u8; 8] {
    scramble(index).to_be_bytes()
}

/// Fills `value` with bytes derived from record `index` and `version`, so that a reader can
/// tell which write it sees and values do not compress to nothing.
pub fn fill_value(value: &mut [u8], index: u64, version: u64) {
    let mut state = scramble(index ^ version.rotate_left(32));
    for chunk in value.chunks_mut(8) {
        state = scramble(state);
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
}

/// The order a load inserts its records in: the lookups are the same either way, the tree is
/// not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadOrder {
    /// Record index order: keys land at random places, as YCSB's hashed keys do, and split
    /// leaves end about two-thirds full.
    #[default]
    Index,
    /// Ascending key order, as a bulk load inserts (and vmcache's loader, whose keys are the
    /// indexes): every leaf is filled before the next begins.
    Key,
}

impl LoadOrder {
    /// The record indexes `0..records` in this order (key order sorts them all first).
    pub fn indexes(self, records: u64) -> Box<dyn Iterator<Item = u64>> {
        match self {
            LoadOrder::Index => Box::new(0..records),
            LoadOrder::Key => {
                let mut indexes: Vec<u64> = (0..records).collect();
                indexes.sort_unstable_by_key(|&index| scramble(index));
                Box::new(indexes.into_iter())
            }
        }
    }

    /// What names a load in this order apart from one in index order.
    pub fn suffix(self) -> &'static str {
        match self {
            LoadOrder::Index => "",
            LoadOrder::Key => "-keyorder",
        }
    }
}

/// How record indexes are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform,
    /// Zipf with exponent θ > 0 over the records (rank 1 is record 0).
    Zipf(f64),
}

impl FromStr for Distribution {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "uniform" {
            return Ok(Distribution::Uniform);
        }
        let theta: f64 = text
            .strip_prefix("zipf:")
            .unwrap_or(text)
            .parse()
            .map_err(|_| format!("{text:?}: expected `uniform`, `zipf:<θ>` or a number θ"))?;
        match theta {
            0.0 => Ok(Distribution::Uniform),
            t if t > 0.0 && t.is_finite() => Ok(Distribution::Zipf(t)),
            _ => Err(format!("Zipf θ must be positive, got {theta}")),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => write!(f, "uniform"),
            Distribution::Zipf(theta) => write!(f, "zipf:{theta}"),
        }
    }
}

impl serde::Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl Distribution {
    /// θ as a number (0 for uniform), for plots and JSON.
    pub fn theta(&self) -> f64 {
        match self {
            Distribution::Uniform => 0.0,
            Distribution::Zipf(theta) => *theta,
        }
    }
}

/// Draws record indexes in `0..records` from a [`Distribution`].
#[derive(Debug, Clone)]
pub struct Sampler {
    records: u64,
    zipf: Option<Zipf>,
}

impl Sampler {
    pub fn new(distribution: Distribution, records: u64) -> Sampler {
        assert!(records > 0, "an empty key space has nothing to sample");
        let zipf = match distribution {
            Distribution::Uniform => None,
            Distribution::Zipf(theta) => Some(Zipf::new(records, theta)),
        };
        Sampler { records, zipf }
    }

    pub fn next(&self, rng: &mut fastrand::Rng) -> u64 {
        match &self.zipf {
            None => rng.u64(..self.records),
            Some(zipf) => zipf.sample(rng) - 1,
        }
    }
}

/// Zipf sampling by rejection-inversion (Hörmann & Derflinger 1996): constant time per sample
/// and no per-record table, for any exponent, including 1.
///
/// Why not `rand_distr::Zipf`: it draws the same law (P(rank k) = k^-θ / H(n, θ); a test below
/// compares the two), but it costs 23-135 ns per sample against 11-24 ns here (10 M samples
/// over 10 M records, θ 0.5-1.25, release build on the 2-core CI machine), and the sample is
/// drawn inside every timed operation: an in-memory lookup takes about 300 ns, so switching
/// would lower in-memory Zipf throughput by up to a third and break comparability with the
/// published results.
#[derive(Debug, Clone)]
struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    fn new(records: u64, exponent: f64) -> Zipf {
        let mut zipf = Zipf {
            n: records as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        zipf.h_integral_x1 = zipf.h_integral(1.5) - 1.0;
        zipf.h_integral_n = zipf.h_integral(zipf.n + 0.5);
        zipf.s = 2.0 - zipf.h_integral_inverse(zipf.h_integral(2.5) - zipf.h(2.0));
        zipf
    }

    /// A rank in `1..=n`.
    fn sample(&self, rng: &mut fastrand::Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.f64() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }
}

/// (e^x − 1) / x, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// ln(1 + x) / x, continuous at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// One operation of a mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Op {
    pub const ALL: [Op; 5] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Scan => "scan",
            Op::ReadModifyWrite => "rmw",
        }
    }
}

/// Fractions of each operation; they sum to 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    pub name: String,
    weights: Vec<(Op, f64)>,
}

impl Mix {
    /// A mix from `(op, weight)` pairs, normalized to sum to 1.
    pub fn new(name: &str, weights: &[(Op, f64)]) -> Result<Mix, String> {
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let valid = |w: f64| w.is_finite() && w >= 0.0;
        if !weights.iter().all(|&(_, w)| valid(w)) || total <= 0.0 {
            return Err(format!(
                "mix {name:?}: weights must be non-negative, not all zero"
            ));
        }
        Ok(Mix {
            name: name.to_string(),
            weights: weights
                .iter()
                .filter(|(_, w)| *w > 0.0)
                .map(|&(op, w)| (op, w / total))
                .collect(),
        })
    }

    /// YCSB's core workloads. D and E insert new records; D's "latest" read distribution is
    /// replaced by the run's distribution.
    pub fn preset(letter: char) -> Option<Mix> {
        use Op::*;
        let weights: &[(Op, f64)] = match letter.to_ascii_uppercase() {
            'A' => &[(Read, 0.5), (Update, 0.5)],
            'B' => &[(Read, 0.95), (Update, 0.05)],
            'C' => &[(Read, 1.0)],
            'D' => &[(Read, 0.95), (Insert, 0.05)],
            'E' => &[(Scan, 0.95), (Insert, 0.05)],
            'F' => &[(Read, 0.5), (ReadModifyWrite, 0.5)],
            _ => return None,
        };
        Mix::new(&format!("ycsb-{}", letter.to_ascii_lowercase()), weights).ok()
    }

    #[cfg(test)]
    pub fn fraction(&self, op: Op) -> f64 {
        self.weights
            .iter()
            .find(|(o, _)| *o == op)
            .map_or(0.0, |(_, w)| *w)
    }

    pub fn next(&self, rng: &mut fastrand::Rng) -> Op {
        let mut u = rng.f64();
        for &(op, weight) in &self.weights {
            if u < weight {
                return op;
            }
            u -= weight;
        }
        self.weights.last().expect("a mix has an operation").0
    }
}

/// A mix is recorded by its name (a preset's, or the text it was parsed from).
impl serde::Serialize for Mix {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name)
    }
}

impl FromStr for Mix {
    type Err = String;

    /// `a`…`f` (YCSB presets) or `read=0.9,update=0.1[,insert=..,scan=..,rmw=..]`.
    fn from_str(text: &str) -> Result<Mix, String> {
        let mut letters = text.chars();
        if let (Some(letter), None) = (letters.next(), letters.next()) {
            return Mix::preset(letter).ok_or_else(|| format!("no YCSB preset {text:?} (a-f)"));
        }
        let mut weights = Vec::new();
        for part in text.split(',') {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected op=fraction"))?;
            let op = Op::ALL
                .into_iter()
                .find(|op| op.name() == name.trim())
                .ok_or_else(|| {
                    format!("unknown operation {name:?} (read, update, insert, scan, rmw)")
                })?;
            let weight: f64 = weight
                .trim()
                .parse()
                .map_err(|_| format!("{weight:?} is not a number"))?;
            weights.push((op, weight));
        }
        Mix::new(text, &weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_spread() {
        let keys: std::collections::BTreeSet<_> = (0..100_000).map(key).collect();
        assert_eq!(keys.len(), 100_000);
        // Consecutive records land in different parts of the key space.
        let first_bytes: std::collections::BTreeSet<_> = (0..64).map(|i| key(i)[0]).collect();
        assert!(first_bytes.len() > 40, "{}", first_bytes.len());
    }

    #[test]
    fn uniform_covers_the_key_space_evenly() {
        let sampler = Sampler::new(Distribution::Uniform, 10);
        let mut rng = fastrand::Rng::with_seed(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[sampler.next(&mut rng) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }

    /// Frequencies of the first ranks against the exact Zipf probabilities k^-θ / H(n, θ).
    fn assert_zipf_shape(theta: f64, records: u64) {
        let sampler = Sampler::new(Distribution::Zipf(theta), records);
        let mut rng = fastrand::Rng::with_seed(2);
        let samples = 400_000;
        let mut counts = vec![0u32; records as usize];
        for _ in 0..samples {
            let index = sampler.next(&mut rng);
            assert!(index < records);
            counts[index as usize] += 1;
        }
        let harmonic: f64 = (1..=records).map(|k| (k as f64).powf(-theta)).sum();
        for rank in [1u64, 2, 3, 10, 100] {
            let expected = (rank as f64).powf(-theta) / harmonic;
            let observed = f64::from(counts[rank as usize - 1]) / f64::from(samples);
            let tolerance = 4.0 * (expected / f64::from(samples)).sqrt() + 1e-4;
            assert!(
                (observed - expected).abs() < tolerance,
                "θ={theta} rank {rank}: observed {observed:.5}, expected {expected:.5}"
            );
        }
    }

    #[test]
    fn zipf_matches_the_exact_distribution() {
        assert_zipf_shape(0.5, 1000);
        assert_zipf_shape(0.99, 1000);
        assert_zipf_shape(1.0, 1000);
        assert_zipf_shape(1.5, 1000);
    }

    /// `rand_distr::Zipf` (not used for speed, see [`Zipf`]) draws the same ranks as often.
    #[test]
    fn zipf_draws_the_same_law_as_rand_distr() {
        use rand_distr::Distribution as _;
        /// fastrand's generator through rand_core's trait.
        struct FastRng<'a>(&'a mut fastrand::Rng);
        impl rand_core::TryRng for FastRng<'_> {
            type Error = std::convert::Infallible;
            fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
                Ok(self.0.u32(..))
            }
            fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
                Ok(self.0.u64(..))
            }
            fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
                self.0.fill(dst);
                Ok(())
            }
        }
        for theta in [0.5, 0.99, 1.0, 1.25] {
            let records = 100_000;
            let ours = Sampler::new(Distribution::Zipf(theta), records);
            let theirs = rand_distr::Zipf::new(records as f64, theta).unwrap();
            let mut rng = fastrand::Rng::with_seed(5);
            let samples = 200_000;
            let (mut a, mut b) = ([0u32; 8], [0u32; 8]);
            for _ in 0..samples {
                if let Some(count) = a.get_mut(ours.next(&mut rng) as usize) {
                    *count += 1;
                }
                if let Some(count) = b.get_mut(theirs.sample(&mut FastRng(&mut rng)) as usize - 1) {
                    *count += 1;
                }
            }
            for rank in 0..8 {
                let (p, q) = (f64::from(a[rank]), f64::from(b[rank]));
                // Within 5 standard deviations of the difference of two counts.
                assert!(
                    (p - q).abs() < 5.0 * (p + q).sqrt() + 5.0,
                    "θ={theta} rank {rank}: {p} vs {q}"
                );
            }
        }
    }

    #[test]
    fn zipf_stays_in_range_for_large_key_spaces() {
        let sampler = Sampler::new(Distribution::Zipf(1.0), 10_000_000);
        let mut rng = fastrand::Rng::with_seed(3);
        let max = (0..100_000).map(|_| sampler.next(&mut rng)).max().unwrap();
        assert!(max < 10_000_000 && max > 100_000, "{max}");
    }

    #[test]
    fn distributions_parse() {
        assert_eq!("uniform".parse(), Ok(Distribution::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(Distribution::Zipf(0.99)));
        assert_eq!("1.25".parse(), Ok(Distribution::Zipf(1.25)));
        assert_eq!("0".parse(), Ok(Distribution::Uniform));
        assert!("-1".parse::<Distribution>().is_err());
        assert!("zipf".parse::<Distribution>().is_err());
    }

    #[test]
    fn mixes_follow_their_ratios() {
        for letter in ['a', 'b', 'c', 'd', 'e', 'f'] {
            let mix: Mix = letter.to_string().parse().unwrap();
            let total: f64 = Op::ALL.iter().map(|&op| mix.fraction(op)).sum();
            assert!((total - 1.0).abs() < 1e-9, "{letter}");
            let mut rng = fastrand::Rng::with_seed(4);
            let mut counts = std::collections::BTreeMap::new();
            let picks = 200_000;
            for _ in 0..picks {
                *counts.entry(mix.next(&mut rng)).or_insert(0u32) += 1;
            }
            for op in Op::ALL {
                let observed = f64::from(counts.get(&op).copied().unwrap_or(0)) / f64::from(picks);
                assert!(
                    (observed - mix.fraction(op)).abs() < 0.005,
                    "{letter} {op:?}: {observed} vs {}",
                    mix.fraction(op)
                );
            }
        }
        let custom: Mix = "read=3,update=1".parse().unwrap();
        assert_eq!(custom.fraction(Op::Read), 0.75);
        assert!("read=1,fly=2".parse::<Mix>().is_err());
        assert!("read=-1".parse::<Mix>().is_err());
        assert!("g".parse::<Mix>().is_err());
    }
}
