//! The byte ranges in which a rewritten value differs from the one it replaced: what a patch
//! record logs instead of the whole value (TPC-C rewrites a few fields of rows of 300-700
//! bytes).
//!
//! One pass over the two values, eight bytes at a time: equal stretches are skipped 32 bytes
//! per step, and a range's end (its last differing byte before four equal ones) is found from
//! the XOR of the two words. Two passes (counting the differing words first) took ~2.5% of a
//! TPC-C worker's time with the log on.

/// The byte ranges in which a rewritten value differs from the one it replaced.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangedRanges {
    ranges: [(u32, u32); MAX_PATCH_RANGES],
    count: usize,
}

/// A patch with more ranges than this logs the whole value instead.
const MAX_PATCH_RANGES: usize = 8;
/// Unchanged runs shorter than this join the ranges around them (a range costs ~3 bytes).
const PATCH_MERGE_GAP: usize = 4;
/// What a range costs in a record besides its bytes (its offset and length, as varints).
const RANGE_COST: usize = 3;

impl ChangedRanges {
    /// The ranges of `new` that differ from `old` (same length), if logging them is cheaper
    /// than logging `new` whole.
    pub(crate) fn between(old: &[u8], new: &[u8]) -> Option<ChangedRanges> {
        debug_assert_eq!(old.len(), new.len());
        let len = new.len().min(old.len());
        let (old, new) = (&old[..len], &new[..len]);
        let mut changed = ChangedRanges::default();
        let mut bytes = 0;
        let mut at = 0;
        while let Some(start) = next_difference(old, new, at) {
            let end = range_end(old, new, start + 1);
            if changed.count == MAX_PATCH_RANGES {
                return None;
            }
            bytes += end - start + RANGE_COST;
            if bytes >= len {
                return None;
            }
            changed.ranges[changed.count] = (start as u32, (end - start) as u32);
            changed.count += 1;
            at = end;
        }
        (bytes < len).then_some(changed)
    }

    /// How many ranges.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The ranges, as (offset, length), in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ranges[..self.count]
            .iter()
            .map(|&(offset, len)| (offset as usize, len as usize))
    }
}

/// The eight bytes at `at` as a word, the first in its lowest byte.
fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Where `old` and `new` first differ at or after `at`.
fn next_difference(old: &[u8], new: &[u8], mut at: usize) -> Option<usize> {
    let len = new.len();
    while at + 32 <= len {
        let differs = (0..4).fold(0, |acc, i| {
            acc | (word(old, at + 8 * i) ^ word(new, at + 8 * i))
        });
        if differs != 0 {
            break;
        }
        at += 32;
    }
    while at + 8 <= len {
        let differs = word(old, at) ^ word(new, at);
        if differs != 0 {
            return Some(at + (differs.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    (at..len).find(|&i| old[i] != new[i])
}

/// The end of the range whose byte `end - 1` differs: the first place after it where
/// [`PATCH_MERGE_GAP`] equal bytes (or the value's end) follow.
fn range_end(old: &[u8], new: &[u8], mut end: usize) -> usize {
    const _: () = assert!(PATCH_MERGE_GAP == 4, "the word step below finds runs of 4");
    let len = new.len();
    while end + 8 <= len {
        let differs = word(old, end) ^ word(new, end);
        let equal = equal_bytes(differs);
        if equal == 0 {
            // Every byte differs (a value rewritten whole: YCSB's updates): the next step
            // depends on nothing computed here, so the loads run ahead.
            end += 8;
            continue;
        }
        // Bit 7 of byte i: bytes i..i + 4 are equal (within the word).
        let runs = equal & (equal >> 8) & (equal >> 16) & (equal >> 24);
        if runs != 0 {
            return end + (runs.trailing_zeros() / 8) as usize;
        }
        // No run of four within the word: its last differing byte is among its top five,
        // and a run may begin after it and go on into the next word.
        end += 8 - (differs.leading_zeros() / 8) as usize;
    }
    let mut probe = end;
    while probe < len && probe - end < PATCH_MERGE_GAP {
        if old[probe] != new[probe] {
            end = probe + 1;
        }
        probe += 1;
    }
    end
}

/// Bit 7 set in each byte of `x` that is zero, nothing else.
fn equal_bytes(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    !(((x & LOW7) + LOW7) | x | LOW7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The ranges by their definition, a byte at a time: each begins at a differing byte and
    /// ends before the first run of `PATCH_MERGE_GAP` equal bytes (or at the value's end).
    fn ranges_by_definition(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
        let len = old.len();
        let mut ranges = Vec::new();
        let mut at = 0;
        while let Some(start) = (at..len).find(|&i| old[i] != new[i]) {
            let mut end = start + 1;
            while let Some(next) = (end..len.min(end + PATCH_MERGE_GAP)).find(|&i| old[i] != new[i])
            {
                end = next + 1;
            }
            ranges.push((start, end - start));
            at = end;
        }
        ranges
    }

    fn check(old: &[u8], new: &[u8]) {
        let expected = ranges_by_definition(old, new);
        let cost: usize = expected.iter().map(|&(_, len)| len + RANGE_COST).sum();
        let found = ChangedRanges::between(old, new);
        if expected.len() > MAX_PATCH_RANGES || cost >= old.len() {
            assert!(found.is_none(), "{expected:?} is no cheaper than the value");
        } else {
            let found: Vec<_> = found.expect("a cheaper patch").iter().collect();
            assert_eq!(found, expected);
        }
    }

    #[test]
    fn ranges_are_taken_only_when_cheaper_than_the_value() {
        let old = vec![0u8; 64];
        assert_eq!(
            ChangedRanges::between(&old, &old).unwrap().iter().count(),
            0
        );
        let mut scattered = old.clone();
        for at in (0..64).step_by(6) {
            scattered[at] = 1; // 11 ranges: more than a patch takes
        }
        assert!(ChangedRanges::between(&old, &scattered).is_none());
        assert!(ChangedRanges::between(&old, &[1; 64]).is_none());
        let mut tail = old.clone();
        tail[63] = 5;
        let ranges: Vec<_> = ChangedRanges::between(&old, &tail)
            .unwrap()
            .iter()
            .collect();
        assert_eq!(ranges, vec![(63, 1)]);
    }

    #[test]
    fn gaps_shorter_than_four_bytes_join_ranges_across_words() {
        let old = vec![0u8; 100];
        for (first, gap) in (0..24).flat_map(|first| (1..7).map(move |gap| (first, gap))) {
            let mut new = old.clone();
            new[first] = 1;
            new[first + gap] = 1;
            new[first + gap + 9] = 1;
            check(&old, &new);
        }
    }

    proptest! {
        #[test]
        fn ranges_match_their_definition(
            (old, edits) in (0usize..300).prop_flat_map(|len| (
                proptest::collection::vec(any::<u8>(), len),
                proptest::collection::vec((0..len.max(1), 1usize..12, any::<u8>()), 0..10),
            ))
        ) {
            let mut new = old.clone();
            for (at, run, byte) in edits {
                for i in at..(at + run).min(new.len()) {
                    new[i] = new[i].wrapping_add(byte | 1);
                }
            }
            check(&old, &new);
        }
    }
}
