//! Range scans, one leaf per epoch: a scan step descends to the first key at or above its
//! position, copies what the leaf holds in range into a [`LeafBatch`], and continues above the
//! leaf's upper fence, so no leaf links are needed. Scans read ahead the next leaves under the
//! parent, and hand leaves they brought in back to the cooling stage.
//!
//! Invariant: each step covers its start position and its next start is strictly above the
//! last (the leaf must cover the position; checked, corruption otherwise), so a scan always
//! moves forward and ends.

use super::*;

/// One leaf's worth of a range scan, copied flat into reusable buffers (no allocation per
/// entry once the buffers have grown).
#[derive(Default)]
pub(crate) struct LeafBatch {
    /// Keys and values, back to back.
    bytes: Vec<u8>,
    /// Key and value length of each entry, in order.
    lengths: Vec<(usize, usize)>,
    /// The range's end was reached inside this leaf.
    pub(crate) stopped: bool,
    /// The entry limit was reached before the leaf's end: continue after the last entry.
    pub(crate) limited: bool,
    /// Where the next leaf starts (`None`: this was the last leaf).
    upper_fence: Option<Vec<u8>>,
}

impl<P: Policy> BTree<P> {
    /// Copies entries of one leaf from the lower end of a range: those at or after `start`
    /// (with `bound`) for which `keep` holds, stopping at the first that fails or after
    /// `limit` entries, into `batch`: the entries, whether `keep` stopped the scan, whether the
    /// limit did, and the leaf's upper fence.
    ///
    /// `leaves_done` is how many leaves the scan has finished before this one. Past its first
    /// leaf, a scan that had to bring this leaf in (from the cooling stage or the disk) is
    /// running through data that is not in memory: it requests the next leaves ahead, 2 after
    /// the first leaf and twice as many per further leaf up to the configured depth, and hands
    /// the leaf back to the cooling stage once read (paper §IV-I: prefetching and hinting).
    pub(crate) fn scan_leaf(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
        leaves_done: usize,
        batch: &mut LeafBatch,
    ) -> Result<()> {
        let mut brought_in = false;
        let (covers_start, leaf) = self.bm.run(|mode| {
            let attempt = self.read_node(start, bound, 0, mode, |leaf| {
                batch.clear();
                for index in leaf.search(start, bound)..leaf.count() {
                    if batch.len() == limit {
                        batch.limited = true;
                        break;
                    }
                    let key = leaf.key(index);
                    if !keep(key) {
                        batch.stopped = true;
                        break;
                    }
                    batch.push(key, leaf.value(index));
                }
                batch.set_upper_fence(leaf.upper_fence());
                leaf.covers(start, bound)
            });
            if let Err(Restart::Swizzle { frame, .. }) = &attempt {
                // The missing page is a child of `frame`: a leaf if `frame` is on level 1.
                brought_in |= self.node(*frame).level() == 1;
            }
            attempt
        })?;
        // Every node is checked against its parent when it comes in, so this holds; checked
        // again because a scan that did not move forward would never end.
        if !covers_start {
            return Err(Error::corruption(
                self.bm.frame(leaf).page_id(),
                "leaf reached by a scan does not cover the scan's position",
            ));
        }
        if brought_in && leaves_done > 0 {
            let ahead = (2usize << leaves_done.min(16)).min(self.bm.prefetch_depth());
            if ahead > 0 {
                self.read_ahead(start, bound, keep, ahead)?;
            }
            self.bm.cool_scanned(leaf);
        }
        Ok(())
    }

    /// Requests the (up to) `ahead` leaves after the one holding `start` that are not in
    /// memory, from the prefetch threads. Only siblings under the same parent are requested
    /// (the next parent's leaves follow when the scan arrives there), and only those whose
    /// lower separator `keep` accepts: nothing past the end of the scan's range.
    fn read_ahead(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        ahead: usize,
    ) -> Result<()> {
        let wanted = self.bm.run(|mode| {
            if self.level_of(self.root())? == 0 {
                return Ok(None);
            }
            self.read_node(start, bound, 1, mode, |parent| {
                let index = parent.search(start, bound);
                let last = (index + ahead).min(parent.count());
                // Child `c` holds the keys above separator `c - 1`.
                ((index + 1)..=last)
                    .take_while(|&child| keep(parent.key(child - 1)))
                    .filter_map(|child| match self.bm.child(parent.child_word(child)) {
                        Some(SwipTarget::Page(page_id)) => {
                            Some((parent.child_offset(child), page_id))
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .map(Some)
        })?;
        if let Some((children, parent)) = wanted {
            if !children.is_empty() {
                self.bm.prefetch(parent, &children);
            }
        }
        Ok(())
    }
}

impl LeafBatch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.lengths.clear();
        self.stopped = false;
        self.limited = false;
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.lengths.push((key.len(), value.len()));
    }

    fn set_upper_fence(&mut self, fence: Option<&[u8]>) {
        match (fence, &mut self.upper_fence) {
            (Some(fence), Some(kept)) => {
                kept.clear();
                kept.extend_from_slice(fence);
            }
            (fence, kept) => *kept = fence.map(<[u8]>::to_vec),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    pub(crate) fn upper_fence(&self) -> Option<&[u8]> {
        self.upper_fence.as_deref()
    }

    /// The entries, in key order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        self.lengths.iter().map(move |&(key_len, value_len)| {
            let key = &self.bytes[at..at + key_len];
            let value = &self.bytes[at + key_len..at + key_len + value_len];
            at += key_len + value_len;
            (key, value)
        })
    }

    /// The last entry's key.
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        let &(key_len, value_len) = self.lengths.last()?;
        let start = self.bytes.len() - key_len - value_len;
        Some(&self.bytes[start..start + key_len])
    }
}
