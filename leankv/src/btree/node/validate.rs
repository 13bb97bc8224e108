//! Validating a node read from disk (or found where a swip leads): everything the layout
//! promises, checked without trusting any field, so that a page with a valid checksum but
//! inconsistent content is reported as corruption instead of followed.
//!
//! Invariant: a node that passes [`Node::check`] can be read, searched, compacted and split
//! without any computation leaving its page or any loop failing to end.

use super::*;

impl<'a> Node<'a> {
    /// Checks everything a node's readers and writers rely on: slot count, heap bounds and
    /// space accounting (so a write never overflows the page), fences and keys inside the page
    /// and within the size limits, keys ascending and strictly between the fences, head
    /// offset and heads, inner swips aligned, level in range and matching the page type.
    /// Applied to every node read from disk (with [`Node::check_on_disk`]) and by the
    /// integrity check; a node that passes can be searched, changed and split safely.
    pub(crate) fn check(&self) -> Result<(), String> {
        let len = self.page.len();
        let leaf = self.is_leaf();
        let count = usize::from(self.page.u16(COUNT));
        if count > self.max_slots() {
            return Err(format!("slot count {count} exceeds the page"));
        }
        let level = self.level();
        if level > MAX_LEVEL {
            return Err(format!("level {level} exceeds {MAX_LEVEL}"));
        }
        let page_type = crate::io::page::page_type(self.page.all());
        if page_type != Some(self.page_type()) {
            return Err(format!(
                "page type {page_type:?} does not match level {level}"
            ));
        }
        let heap = self.heap_start();
        if heap > len || heap < SLOTS + count * SLOT_SIZE || (!leaf && !heap.is_multiple_of(8)) {
            return Err(format!("heap start {heap} out of range"));
        }
        let max_key = max_key_size(len);
        let mut live = 0usize;
        for at in [LOWER_FENCE, UPPER_FENCE] {
            let fence_len = self.page.u16(at + 2);
            if fence_len == NO_FENCE {
                continue;
            }
            let (offset, fence_len) = (usize::from(self.page.u16(at)), usize::from(fence_len));
            let placed = fence_len == 0 || (offset >= heap && offset + fence_len <= len);
            if !placed || fence_len > max_key {
                return Err("fence key outside the heap or too long".into());
            }
            live += heap_len(leaf, fence_len);
        }
        if let (Some(lower), Some(upper)) = (self.lower_fence(), self.upper_fence()) {
            if lower >= upper {
                return Err("lower fence not below the upper fence".into());
            }
        }
        // Shorter is fine: every key has that prefix too.
        if self.head_offset() > self.widest_head_offset() {
            return Err("head offset beyond the prefix the keys share".into());
        }
        let max_value = if leaf { max_value_size(len) } else { SWIP_SIZE };
        for index in 0..count {
            let (key_len, value_len) = (self.key_len(index), self.value_len(index));
            if key_len > max_key || value_len > max_value || (!leaf && value_len != SWIP_SIZE) {
                return Err(format!("entry {index} exceeds the size limits"));
            }
            if self.is_blob(index) {
                if !leaf {
                    return Err(format!("inner entry {index} flagged as a large value"));
                }
                crate::blob::BlobRef::decode(self.value(index), len)
                    .map_err(|reason| format!("entry {index}: {reason}"))?;
            }
            let heap_bytes = self.entry_size(index) - SLOT_SIZE;
            let offset = self.key_offset(index);
            if heap_bytes > 0 && (offset < heap || offset + heap_bytes > len) {
                return Err(format!("entry {index} outside the heap"));
            }
            live += heap_bytes;
            if self.head(index) != key_head(self.key(index), self.head_offset()) {
                return Err(format!("entry {index} has a wrong key head"));
            }
            if !leaf && !self.child_offset(index).is_multiple_of(8) {
                return Err(format!("inner entry {index} has a misaligned swip"));
            }
            if index > 0 && self.key(index - 1) >= self.key(index) {
                return Err(format!("keys {} and {index} out of order", index - 1));
            }
        }
        // A wrong hint would make a search miss a key that is there.
        if self.hints() != self.sampled_hints() {
            return Err("hints do not match the slots".into());
        }
        // Writers trust the accounting (compaction must reclaim exactly what it promises), so
        // live bytes and garbage must add up to the heap exactly.
        let garbage = self.page.u32(GARBAGE) as usize;
        if live.checked_add(garbage) != Some(len - heap) {
            return Err(format!(
                "heap of {} bytes holds {live} live and {garbage} dead bytes",
                len - heap
            ));
        }
        // Every heap byte belongs to at most one key, value or fence: entries that share
        // bytes would read as pairs that were never written. An occupancy bitmap of the page
        // finds a byte claimed twice in one pass (sorting the extents cost ~5% of a read-bound
        // workload's time, every page read being checked).
        let mut claimed = [0u64; MAX_PAGE_SIZE / 64];
        let fences = [LOWER_FENCE, UPPER_FENCE].into_iter().filter_map(|at| {
            let fence_len = self.page.u16(at + 2);
            (fence_len != NO_FENCE).then(|| {
                (
                    usize::from(self.page.u16(at)),
                    heap_len(leaf, fence_len.into()),
                )
            })
        });
        let entries =
            (0..count).map(|index| (self.key_offset(index), self.entry_size(index) - SLOT_SIZE));
        for (start, extent_len) in entries.chain(fences) {
            if !claim(&mut claimed, start, extent_len, len) {
                return Err("entries overlap in the heap".into());
            }
        }
        if count > 0 {
            if let Some(lower) = self.lower_fence() {
                if self.key(0) <= lower {
                    return Err("first key not above the lower fence".into());
                }
            }
            if let Some(upper) = self.upper_fence() {
                if self.key(count - 1) > upper {
                    return Err("last key above the upper fence".into());
                }
            }
        }
        Ok(())
    }

    /// [`check`](Self::check) for a page image as it is on disk: every child reference of an
    /// inner node is a page id (a frame index means the image was never sealed by leankv).
    pub(crate) fn check_on_disk(&self) -> Result<(), String> {
        self.check()?;
        if self.is_leaf() {
            return Ok(());
        }
        for index in 0..=self.count() {
            if !matches!(
                Swip::decode(self.child_word(index), 0),
                Some(SwipTarget::Page(_))
            ) {
                return Err(format!("child {index} is not a page id"));
            }
        }
        Ok(())
    }

    /// Checks that this node can be a tree's root: a B-tree node (checked on its own when it
    /// was read) whose key range is unbounded.
    pub(crate) fn check_as_root(&self) -> Result<(), String> {
        if crate::io::page::page_type(self.page.all()) != Some(self.page_type()) {
            return Err("not a B-tree node".into());
        }
        if self.lower_fence().is_some() || self.upper_fence().is_some() {
            return Err("a tree root with fence keys (a page of another tree?)".into());
        }
        Ok(())
    }

    /// Checks that this node, met through the child swip at byte `offset` of `parent`, is the
    /// node the parent routes to there: one level below it, with fences equal to the
    /// separators around the swip (the parent's own fences at the ends). Together with the
    /// check of each node on its own, this keeps every walk down the tree and along its leaves
    /// moving forward, whatever a page on disk says.
    pub(crate) fn check_as_child_of(&self, parent: &Node<'_>, offset: usize) -> Result<(), String> {
        if crate::io::page::page_type(self.page.all()) != Some(self.page_type()) {
            return Err("not a B-tree node".into());
        }
        if parent.is_leaf() || self.level() + 1 != parent.level() {
            return Err(format!(
                "level {} below a parent of level {}",
                self.level(),
                parent.level()
            ));
        }
        let count = parent.count();
        let Some(index) = (0..=count).find(|&index| parent.child_offset(index) == offset) else {
            return Err("its parent has no child reference there".into());
        };
        let lower = match index {
            0 => parent.lower_fence(),
            _ => Some(parent.key(index - 1)),
        };
        let upper = match index {
            _ if index == count => parent.upper_fence(),
            _ => Some(parent.key(index)),
        };
        if self.lower_fence() != lower || self.upper_fence() != upper {
            return Err("fence keys differ from the parent's separators".into());
        }
        Ok(())
    }
}

/// Largest page a node can be (16-bit offsets).
const MAX_PAGE_SIZE: usize = 65536;

/// Marks bytes `start..start + len` of a page of `page_len` bytes in `claimed`; false if one of
/// them was marked already or the extent leaves the page (the node is then rejected, and
/// `claimed`, which may hold part of the extent, is not used again).
fn claim(
    claimed: &mut [u64; MAX_PAGE_SIZE / 64],
    start: usize,
    len: usize,
    page_len: usize,
) -> bool {
    let Some(end) = start
        .checked_add(len)
        .filter(|&end| end <= page_len.min(MAX_PAGE_SIZE))
    else {
        return false;
    };
    let mut at = start;
    while at < end {
        let (word, bit) = (at / 64, at % 64);
        let bits = (end - at).min(64 - bit);
        let mask = if bits == 64 {
            u64::MAX
        } else {
            ((1u64 << bits) - 1) << bit
        };
        if claimed[word] & mask != 0 {
            return false;
        }
        claimed[word] |= mask;
        at += bits;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{claim, MAX_PAGE_SIZE};

    #[test]
    fn claiming_finds_every_shared_byte_and_nothing_else() {
        let fresh = || [0u64; MAX_PAGE_SIZE / 64];
        let mut claimed = fresh();
        assert!(claim(&mut claimed, 10, 100, 4096));
        assert!(claim(&mut claimed, 110, 18, 4096)); // adjacent, across a word boundary
        assert!(claim(&mut claimed, 0, 10, 4096));
        assert!(claim(&mut claimed, 200, 0, 4096)); // empty extents claim nothing
        assert!(!claim(&mut claimed, 127, 1, 4096)); // the last byte of the second
        assert!(!claim(&mut claimed, 0, 1, 4096));
        assert!(!claim(&mut claimed, 4000, 97, 4096)); // leaves the page
        assert!(claim(&mut claimed, 4000, 96, 4096));
        // Against a byte-by-byte model on random extents.
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..200 {
            let (mut claimed, mut model) = (fresh(), vec![false; 16384]);
            for _ in 0..40 {
                let start = rng.usize(..16384);
                let len = rng.usize(..600);
                let fits = start + len <= 16384;
                let free = fits && model[start..start + len].iter().all(|&used| !used);
                assert_eq!(claim(&mut claimed, start, len, 16384), free);
                if !free {
                    break; // a refused extent may be partly marked: this bitmap is done
                }
                model[start..start + len]
                    .iter_mut()
                    .for_each(|used| *used = true);
            }
        }
    }
}
