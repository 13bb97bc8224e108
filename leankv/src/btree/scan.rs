//! Range scans, one leaf per epoch, in either direction: a forward step descends to the first
//! key at or above its position, copies what the leaf holds in range into a [`LeafBatch`], and
//! continues above the leaf's upper fence; a backward step descends to the leaf holding the
//! keys just below its position, copies them in descending order, and continues at or below
//! the leaf's lower fence. No leaf links are needed. Scans read ahead the next leaves under the
//! parent (in their direction), and hand leaves they brought in back to the cooling stage.
//!
//! Invariant: each step's leaf covers its position (checked, corruption otherwise), so the
//! next position is strictly beyond the last (above the upper fence, or at the lower fence,
//! which lies below every key of the leaf) and a scan always moves on and ends.

use super::*;

/// One leaf's worth of a range scan, copied flat into reusable buffers (no allocation per
/// entry once the buffers have grown).
#[derive(Default)]
pub(crate) struct LeafBatch {
    /// Keys and values, back to back.
    bytes: Vec<u8>,
    /// Key and value length of each entry, in order, and whether the value is a large-value
    /// reference.
    lengths: Vec<(usize, usize, bool)>,
    /// The range's end was reached inside this leaf.
    pub(crate) stopped: bool,
    /// The entry limit was reached before the leaf's end: continue after the last entry.
    pub(crate) limited: bool,
    /// Where the scan goes on, if `has_fence`: the leaf's upper fence going forward, its lower
    /// fence going backward (without one, this was the last leaf in that direction). The
    /// bytes stay allocated from leaf to leaf and scan to scan.
    fence: Vec<u8>,
    has_fence: bool,
}

/// Where a scan step starts, and which way it reads.
#[derive(Clone, Copy)]
pub(crate) enum ScanFrom<'k> {
    /// Upwards: keys `>= key`.
    AtLeast(&'k [u8]),
    /// Upwards: keys `> key`.
    Above(&'k [u8]),
    /// Downwards: keys `<= key`.
    AtMost(&'k [u8]),
    /// Downwards: keys `< key`.
    Below(&'k [u8]),
    /// Downwards from the tree's last key.
    End,
}

impl<'k> ScanFrom<'k> {
    /// The descent that reaches the leaf covering this position. Going down, the keys just
    /// below the position are in that leaf or below its lower fence.
    fn descent(self) -> (&'k [u8], Bound) {
        match self {
            ScanFrom::AtLeast(key) | ScanFrom::AtMost(key) | ScanFrom::Below(key) => {
                (key, Bound::AtLeast)
            }
            ScanFrom::Above(key) => (key, Bound::Above),
            ScanFrom::End => (&[], Bound::Last),
        }
    }

    fn downwards(self) -> bool {
        matches!(
            self,
            ScanFrom::AtMost(_) | ScanFrom::Below(_) | ScanFrom::End
        )
    }

    /// Copies the entries of `leaf` from this position on, in this direction, into `batch`
    /// (see [`BTree::scan_leaf`]), and the fence where the scan goes on.
    fn copy(
        self,
        leaf: &Node<'_>,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
        batch: &mut LeafBatch,
    ) {
        batch.clear();
        let (key, bound) = self.descent();
        match self {
            ScanFrom::AtLeast(_) | ScanFrom::Above(_) => {
                batch.copy(leaf, leaf.search(key, bound)..leaf.count(), keep, limit);
                batch.set_fence(leaf.upper_fence());
            }
            ScanFrom::AtMost(_) | ScanFrom::Below(_) | ScanFrom::End => {
                let end = match self {
                    ScanFrom::AtMost(key) => leaf.upper_bound(key),
                    ScanFrom::Below(key) => leaf.lower_bound(key).0,
                    _ => leaf.count(),
                };
                batch.copy(leaf, (0..end.min(leaf.count())).rev(), keep, limit);
                batch.set_fence(leaf.lower_fence());
            }
        }
    }
}

impl<P: Policy> BTree<P> {
    /// Copies entries of one leaf from position `from` on, in its direction (ascending
    /// upwards, descending downwards): those for which `keep` holds, stopping at the first
    /// that fails or after `limit` entries, into `batch`: the entries, whether `keep` stopped
    /// the scan, whether the limit did, and the fence where the scan goes on (the leaf's upper
    /// fence upwards, its lower fence downwards).
    ///
    /// `leaves_done` is how many leaves the scan has finished before this one. Past its first
    /// leaf, a scan that had to bring this leaf in (from the cooling stage or the disk) is
    /// running through data that is not in memory: it requests the next leaves ahead, 2 after
    /// the first leaf and twice as many per further leaf up to the configured depth, and hands
    /// the leaf back to the cooling stage once read (paper §IV-I: prefetching and hinting).
    pub(crate) fn scan_leaf(
        &self,
        from: ScanFrom<'_>,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
        leaves_done: usize,
        batch: &mut LeafBatch,
    ) -> Result<()> {
        let (key, bound) = from.descent();
        let mut brought_in = false;
        let (covers_start, leaf) = self.bm.run(|mode| {
            let attempt = self.read_node(key, bound, 0, mode, |leaf| {
                from.copy(&leaf, keep, limit, batch);
                leaf.covers(key, bound)
            });
            brought_in |= self.leaf_missing(&attempt);
            attempt
        })?;
        // Every node is checked against its parent when it comes in, so this holds; checked
        // again because a scan that did not move on would never end.
        if !covers_start {
            return Err(Error::corruption(
                self.bm.frame(leaf).page_id(),
                "leaf reached by a scan does not cover the scan's position",
            ));
        }
        if brought_in && leaves_done > 0 {
            let ahead = (2usize << leaves_done.min(16)).min(self.bm.prefetch_depth());
            if ahead > 0 {
                self.read_ahead(key, bound, keep, ahead, from.downwards())?;
            }
            self.bm.cool_scanned(leaf);
        }
        Ok(())
    }

    /// Whether a scan attempt restarted because the leaf itself was not in memory.
    fn leaf_missing<T>(&self, attempt: &Attempt<T>) -> bool {
        // The missing page is a child of `frame`: a leaf if `frame` is on level 1.
        matches!(attempt, Err(Restart::Swizzle { frame, .. }) if self.node(*frame).level() == 1)
    }

    /// Requests the (up to) `ahead` leaves after the one holding `start` (before it, going
    /// downwards) that are not in memory, from the prefetch threads. Only siblings under the
    /// same parent are requested (the next parent's leaves follow when the scan arrives there),
    /// and only those whose separator towards the scan `keep` accepts: nothing past the end of
    /// the scan's range.
    fn read_ahead(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        ahead: usize,
        downwards: bool,
    ) -> Result<()> {
        let wanted = self.bm.run(|mode| {
            if self.level_of(self.root())? == 0 {
                return Ok(None);
            }
            self.read_node(start, bound, 1, mode, |parent| {
                let index = parent.search(start, bound);
                // Child `c` holds the keys above separator `c - 1` and up to separator `c`.
                let children: Vec<usize> = if downwards {
                    let mut children: Vec<usize> = (index.saturating_sub(ahead)..index)
                        .rev()
                        .take_while(|&child| keep(parent.key(child)))
                        .collect();
                    children.reverse(); // ascending, so consecutive pages form runs
                    children
                } else {
                    ((index + 1)..=(index + ahead).min(parent.count()))
                        .take_while(|&child| keep(parent.key(child - 1)))
                        .collect()
                };
                self.unswizzled(&parent, children)
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

    /// The children of `parent` among `children` that are not in memory, as (swip offset, page
    /// id): what a read-ahead asks for.
    pub(super) fn unswizzled(
        &self,
        parent: &Node<'_>,
        children: impl IntoIterator<Item = usize>,
    ) -> Vec<(usize, u64)> {
        children
            .into_iter()
            .filter_map(|child| match self.bm.child(parent.child_word(child)) {
                Some(SwipTarget::Page(page_id)) => Some((parent.child_offset(child), page_id)),
                _ => None,
            })
            .collect()
    }
}

impl LeafBatch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.lengths.clear();
        self.stopped = false;
        self.limited = false;
    }

    /// Copies the entries of `leaf` at `indexes`, in that order, while `keep` accepts their
    /// keys and fewer than `limit` are copied.
    fn copy(
        &mut self,
        leaf: &Node<'_>,
        indexes: impl Iterator<Item = usize>,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
    ) {
        for index in indexes {
            if self.len() == limit {
                self.limited = true;
                break;
            }
            let key = leaf.key(index);
            if !keep(key) {
                self.stopped = true;
                break;
            }
            self.push(key, leaf.stored(index));
        }
    }

    fn push(&mut self, key: &[u8], value: Stored<'_>) {
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value.bytes);
        self.lengths
            .push((key.len(), value.bytes.len(), value.blob));
    }

    fn set_fence(&mut self, fence: Option<&[u8]>) {
        self.fence.clear();
        self.fence.extend_from_slice(fence.unwrap_or_default());
        self.has_fence = fence.is_some();
    }

    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Bytes the batch holds in its buffers.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
            + self.lengths.capacity() * std::mem::size_of::<(usize, usize, bool)>()
            + self.fence.capacity()
    }

    /// Where the scan goes on (see the field).
    pub(crate) fn fence(&self) -> Option<&[u8]> {
        self.has_fence.then_some(&self.fence[..])
    }

    /// The entries, in the order read (descending going backward), with their values as
    /// stored (see [`BTree::scanned_value`] for large ones).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], Stored<'_>)> {
        let mut at = 0;
        self.lengths.iter().map(move |&(key_len, value_len, blob)| {
            let key = &self.bytes[at..at + key_len];
            let bytes = &self.bytes[at + key_len..at + key_len + value_len];
            at += key_len + value_len;
            (key, Stored { bytes, blob })
        })
    }

    /// The last entry's key (the smallest going backward).
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        let &(key_len, value_len, _) = self.lengths.last()?;
        let start = self.bytes.len() - key_len - value_len;
        Some(&self.bytes[start..start + key_len])
    }
}
