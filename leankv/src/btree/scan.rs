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
    /// Key and value length of each entry, in order.
    lengths: Vec<(usize, usize)>,
    /// The range's end was reached inside this leaf.
    pub(crate) stopped: bool,
    /// The entry limit was reached before the leaf's end: continue after the last entry.
    pub(crate) limited: bool,
    /// Where the scan goes on: the leaf's upper fence going forward, its lower fence going
    /// backward (`None`: this was the last leaf in that direction).
    fence: Option<Vec<u8>>,
}

/// Where a backward scan step starts: below or at a key, or at the tree's last key.
#[derive(Clone, Copy)]
pub(crate) enum BackFrom<'k> {
    /// Keys `<= key`.
    AtMost(&'k [u8]),
    /// Keys `< key`.
    Below(&'k [u8]),
    /// Every key: start at the last.
    End,
}

impl<'k> BackFrom<'k> {
    /// The descent that reaches the leaf covering this position: the keys just below it are
    /// there, or below its lower fence.
    fn descent(self) -> (&'k [u8], Bound) {
        match self {
            BackFrom::AtMost(key) | BackFrom::Below(key) => (key, Bound::AtLeast),
            BackFrom::End => (&[], Bound::Last),
        }
    }

    /// How many entries of `leaf` lie at or below this position (those before the index).
    fn end_index(self, leaf: &Node<'_>) -> usize {
        match self {
            BackFrom::AtMost(key) => leaf.upper_bound(key),
            BackFrom::Below(key) => leaf.lower_bound(key).0,
            BackFrom::End => leaf.count(),
        }
    }
}

/// Which way a scan reads.
#[derive(Clone, Copy)]
enum Direction {
    Forward,
    Backward,
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
                batch.set_fence(leaf.upper_fence());
                leaf.covers(start, bound)
            });
            brought_in |= self.leaf_missing(&attempt);
            attempt
        })?;
        self.after_leaf(leaf, covers_start, brought_in, leaves_done, |ahead| {
            self.read_ahead(start, bound, keep, ahead, Direction::Forward)
        })
    }

    /// [`scan_leaf`](Self::scan_leaf) going backward: copies the entries of one leaf at or
    /// below `from`, in descending order, for which `keep` holds (stopping at the first that
    /// fails, or after `limit` entries), and the leaf's lower fence.
    pub(crate) fn scan_leaf_back(
        &self,
        from: BackFrom<'_>,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
        leaves_done: usize,
        batch: &mut LeafBatch,
    ) -> Result<()> {
        let (key, bound) = from.descent();
        let mut brought_in = false;
        let (covers_start, leaf) = self.bm.run(|mode| {
            let attempt = self.read_node(key, bound, 0, mode, |leaf| {
                batch.clear();
                for index in (0..from.end_index(&leaf).min(leaf.count())).rev() {
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
                batch.set_fence(leaf.lower_fence());
                leaf.covers(key, bound)
            });
            brought_in |= self.leaf_missing(&attempt);
            attempt
        })?;
        self.after_leaf(leaf, covers_start, brought_in, leaves_done, |ahead| {
            self.read_ahead(key, bound, keep, ahead, Direction::Backward)
        })
    }

    /// Whether a scan attempt restarted because the leaf itself was not in memory.
    fn leaf_missing<T>(&self, attempt: &Attempt<T>) -> bool {
        // The missing page is a child of `frame`: a leaf if `frame` is on level 1.
        matches!(attempt, Err(Restart::Swizzle { frame, .. }) if self.node(*frame).level() == 1)
    }

    /// What a scan step does once it has read `leaf`: refuse a leaf that does not cover the
    /// position, and past the first leaf, if this one had to be brought in, read ahead and
    /// hand it back to the cooling stage.
    fn after_leaf(
        &self,
        leaf: FrameId,
        covers_start: bool,
        brought_in: bool,
        leaves_done: usize,
        read_ahead: impl FnOnce(usize) -> Result<()>,
    ) -> Result<()> {
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
                read_ahead(ahead)?;
            }
            self.bm.cool_scanned(leaf);
        }
        Ok(())
    }

    /// Requests the (up to) `ahead` leaves after the one holding `start` (before it, going
    /// backward) that are not in memory, from the prefetch threads. Only siblings under the
    /// same parent are requested (the next parent's leaves follow when the scan arrives there),
    /// and only those whose separator towards the scan `keep` accepts: nothing past the end of
    /// the scan's range.
    fn read_ahead(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        ahead: usize,
        direction: Direction,
    ) -> Result<()> {
        let wanted = self.bm.run(|mode| {
            if self.level_of(self.root())? == 0 {
                return Ok(None);
            }
            self.read_node(start, bound, 1, mode, |parent| {
                let index = parent.search(start, bound);
                // Child `c` holds the keys above separator `c - 1` and up to separator `c`.
                let children: Vec<usize> = match direction {
                    Direction::Forward => ((index + 1)..=(index + ahead).min(parent.count()))
                        .take_while(|&child| keep(parent.key(child - 1)))
                        .collect(),
                    Direction::Backward => {
                        let mut children: Vec<usize> = (index.saturating_sub(ahead)..index)
                            .rev()
                            .take_while(|&child| keep(parent.key(child)))
                            .collect();
                        children.reverse(); // ascending, so consecutive pages form runs
                        children
                    }
                };
                children
                    .into_iter()
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

    fn set_fence(&mut self, fence: Option<&[u8]>) {
        match (fence, &mut self.fence) {
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

    /// Where the scan goes on (see the field).
    pub(crate) fn fence(&self) -> Option<&[u8]> {
        self.fence.as_deref()
    }

    /// The entries, in the order read (descending going backward).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        self.lengths.iter().map(move |&(key_len, value_len)| {
            let key = &self.bytes[at..at + key_len];
            let value = &self.bytes[at + key_len..at + key_len + value_len];
            at += key_len + value_len;
            (key, value)
        })
    }

    /// The last entry's key (the smallest going backward).
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        let &(key_len, value_len) = self.lengths.last()?;
        let start = self.bytes.len() - key_len - value_len;
        Some(&self.bytes[start..start + key_len])
    }
}
