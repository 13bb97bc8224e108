//! Iterating over a key range in both directions: [`Range`], and the [`Cursor`] it shares with
//! `Tree::scan` ([`scan_tree`], whose cursor and leaf buffers each thread reuses from scan to
//! scan, so that a short scan allocates nothing).
//!
//! The keys not yet read lie between the cursor's `low` and `high` positions. A forward step
//! reads one leaf upwards from `low` (keys up to `high`) and moves `low` past what it read; a
//! backward step reads one leaf downwards from `high` (keys down to `low`) and moves `high`
//! below what it read. Each step holds no latch or epoch afterwards.
//!
//! Invariants: the two ends never read the same key (each reads only between the positions,
//! and moves its own past what it read), so with `next` and `next_back` mixed every key is
//! yielded at most once; every step moves its position strictly (the B-tree checks that each
//! leaf covers the position), so iteration ends; after an error the iterator is finished.

use crate::btree::{stored_blob, BTree, LeafBatch, ScanFrom, StoredValue};
use crate::buffer::policy::{Lean, Policy};
use crate::error::Result;
use crate::shared::TreeHandle;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::iter::FusedIterator;
use std::ops::{Bound, RangeBounds};

/// Iterator over a key range of a [`Tree`](crate::Tree), in ascending key order, or
/// descending from the back (`rev()`, `next_back`; both may be mixed on one iterator). Yields
/// `Result<(key, value)>`; after an error it yields nothing more.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
/// let tree = db.open_tree("numbers")?;
/// for n in 1u8..=5 {
///     tree.insert([n], [n * 10])?;
/// }
/// let descending: Vec<u8> = tree.iter().rev().map(|item| item.unwrap().0[0]).collect();
/// assert_eq!(descending, [5, 4, 3, 2, 1]);
/// let mut both_ends = tree.range([2u8]..);
/// assert_eq!(both_ends.next().unwrap()?.0, [2]);
/// assert_eq!(both_ends.next_back().unwrap()?.0, [5]);
/// assert_eq!(both_ends.map(|item| item.unwrap().0[0]).collect::<Vec<_>>(), [3, 4]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Range<P: Policy = Lean> {
    tree: TreeHandle<P>,
    cursor: Cursor,
    batch: LeafBatch,
    /// Read by forward steps, in ascending order; all below `back`'s entries.
    front: VecDeque<Entry>,
    /// Read by backward steps, in descending order.
    back: VecDeque<Entry>,
    failed: bool,
}

/// A key and its value as its leaf stores it: a large value is read only when it is yielded,
/// so a leaf's worth of them is never held at once.
type Entry = (Vec<u8>, StoredValue);

impl<P: Policy> Range<P> {
    pub(crate) fn new(tree: TreeHandle<P>, cursor: Cursor) -> Range<P> {
        Range {
            tree,
            cursor,
            batch: LeafBatch::default(),
            front: VecDeque::new(),
            back: VecDeque::new(),
            failed: false,
        }
    }

    /// Ends the iteration after an error: what is buffered lies beyond a part that could not
    /// be read, and yielding it would hide the gap.
    fn fail<T>(&mut self, error: crate::Error) -> Option<Result<T>> {
        self.failed = true;
        self.front.clear();
        self.back.clear();
        Some(Err(error))
    }
}

impl<P: Policy> Range<P> {
    /// The next entry from the low end (`downwards == false`) or the high end: from that
    /// end's buffer, else from a step in its direction, else, once nothing unread is left
    /// between the ends, from the far end of the other end's buffer.
    fn advance(&mut self, downwards: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            let (own, other) = if downwards {
                (&mut self.back, &mut self.front)
            } else {
                (&mut self.front, &mut self.back)
            };
            let entry = match own.pop_front() {
                Some(entry) => Some(entry),
                None if self.failed => return None,
                None if self.cursor.exhausted() => match other.pop_back() {
                    Some(entry) => Some(entry),
                    None => return None,
                },
                None => None,
            };
            if let Some((key, stored)) = entry {
                let mut value = stored.bytes;
                if !stored.blob {
                    return Some(Ok((key, value)));
                }
                let reference = std::mem::take(&mut value);
                match self
                    .tree
                    .tree
                    .scanned_value(&key, stored_blob(&reference), &mut value)
                {
                    Ok(true) => return Some(Ok((key, value))),
                    Ok(false) => continue, // removed since its leaf was read
                    Err(error) => return self.fail(error),
                }
            }
            let step = if downwards {
                self.cursor.step(&self.tree.tree, &mut self.batch, true)
            } else {
                self.cursor.step(&self.tree.tree, &mut self.batch, false)
            };
            if let Err(error) = step {
                return self.fail(error);
            }
            let own = if downwards {
                &mut self.back
            } else {
                &mut self.front
            };
            own.extend(
                self.batch
                    .entries()
                    .map(|(key, value)| (key.to_vec(), StoredValue::of(value))),
            );
        }
    }
}

impl<P: Policy> Iterator for Range<P> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(false)
    }
}

impl<P: Policy> DoubleEndedIterator for Range<P> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.advance(true)
    }
}

impl<P: Policy> FusedIterator for Range<P> {}

impl<P: Policy> fmt::Debug for Range<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Range")
            .field("tree", &self.tree.name)
            .field("low", &KeyBound(self.cursor.low.get()))
            .field("high", &KeyBound(self.cursor.high.get()))
            .field("buffered", &(self.front.len() + self.back.len()))
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<P: Policy> Range<P> {
    fn is_finished(&self) -> bool {
        self.failed || (self.cursor.exhausted() && self.front.is_empty() && self.back.is_empty())
    }
}

/// A bound shown with its key as escaped ASCII (`Included(user\x00)`), not a list of numbers.
struct KeyBound<'a>(Bound<&'a [u8]>);

impl fmt::Debug for KeyBound<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Bound::Included(key) => write!(f, "Included({})", key.escape_ascii()),
            Bound::Excluded(key) => write!(f, "Excluded({})", key.escape_ascii()),
            Bound::Unbounded => write!(f, "Unbounded"),
        }
    }
}

/// Entries the first step in each direction copies. It doubles per step, so that short scans
/// (the common `take(n)`, `first`, `last`) do not copy whole leaves they never return.
const FIRST_BATCH: usize = 16;

/// Where a range stands between steps: the keys not yet read lie between `low` and `high`.
pub(crate) struct Cursor {
    low: Position,
    high: Position,
    /// No unread key is left between `low` and `high`.
    exhausted: bool,
    forward: Pace,
    backward: Pace,
}

/// One end of a cursor: a bound whose key bytes stay allocated while it is unbounded, so that
/// setting it again (the next step, or the next scan of a thread's reused cursor) reuses them.
struct Position {
    bound: Bound<()>,
    key: Vec<u8>,
}

impl Position {
    fn unbounded() -> Position {
        Position {
            bound: Bound::Unbounded,
            key: Vec::new(),
        }
    }

    fn get(&self) -> Bound<&[u8]> {
        self.bound.map(|()| &self.key[..])
    }

    fn set(&mut self, bound: Bound<&[u8]>) {
        self.key.clear();
        if let Bound::Included(key) | Bound::Excluded(key) = bound {
            self.key.extend_from_slice(key);
        }
        self.bound = bound.map(|_| ());
    }
}

/// How far one direction of a cursor has come.
struct Pace {
    /// Entries the next step copies at most.
    batch_limit: usize,
    /// Leaves finished so far; decides read-ahead and hinting (see `BTree::scan_leaf`).
    leaves_done: usize,
}

impl Pace {
    fn new() -> Pace {
        Pace {
            batch_limit: FIRST_BATCH,
            leaves_done: 0,
        }
    }
}

/// Whether `key` lies at or below the upper position `high`.
fn below(high: Bound<&[u8]>, key: &[u8]) -> bool {
    match high {
        Bound::Unbounded => true,
        Bound::Included(last) => key <= last,
        Bound::Excluded(last) => key < last,
    }
}

/// Whether `key` lies at or above the lower position `low`.
fn above(low: Bound<&[u8]>, key: &[u8]) -> bool {
    match low {
        Bound::Unbounded => true,
        Bound::Included(first) => key >= first,
        Bound::Excluded(first) => key > first,
    }
}

impl Cursor {
    pub(crate) fn new<K: AsRef<[u8]>, R: RangeBounds<K>>(range: R) -> Cursor {
        let mut cursor = Cursor {
            low: Position::unbounded(),
            high: Position::unbounded(),
            exhausted: false,
            forward: Pace::new(),
            backward: Pace::new(),
        };
        cursor.reset(range);
        cursor
    }

    /// Starts over on `range`, keeping the memory the bounds had (a thread's scans reuse one
    /// cursor: see [`scan_tree`]).
    pub(crate) fn reset<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, range: R) {
        self.low.set(range.start_bound().map(AsRef::as_ref));
        self.high.set(range.end_bound().map(AsRef::as_ref));
        self.exhausted = false;
        self.forward = Pace::new();
        self.backward = Pace::new();
    }

    /// Bytes the cursor holds for its bounds.
    fn capacity(&self) -> usize {
        self.low.key.capacity() + self.high.key.capacity()
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Copies the next batch (at most the rest of one leaf) from the low end in ascending
    /// order, or with `downwards` from the high end in descending order, into `batch`, and
    /// moves that end past it. On an error the cursor is exhausted.
    pub(crate) fn step<P: Policy>(
        &mut self,
        tree: &BTree<P>,
        batch: &mut LeafBatch,
        downwards: bool,
    ) -> Result<()> {
        let from = if downwards {
            match self.high.get() {
                Bound::Unbounded => ScanFrom::End,
                Bound::Included(key) => ScanFrom::AtMost(key),
                Bound::Excluded(key) => ScanFrom::Below(key),
            }
        } else {
            match self.low.get() {
                Bound::Unbounded => ScanFrom::AtLeast(&[]),
                Bound::Included(key) => ScanFrom::AtLeast(key),
                Bound::Excluded(key) => ScanFrom::Above(key),
            }
        };
        let (low, high) = (self.low.get(), self.high.get());
        // Whether a key lies before the other end's position.
        let keep = |key: &[u8]| {
            if downwards {
                above(low, key)
            } else {
                below(high, key)
            }
        };
        let pace = if downwards {
            &mut self.backward
        } else {
            &mut self.forward
        };
        let read = tree.scan_leaf(from, &keep, pace.batch_limit, pace.leaves_done, batch);
        if let Err(error) = read {
            self.exhausted = true;
            return Err(error);
        }
        pace.batch_limit = pace.batch_limit.saturating_mul(2);
        let next = if batch.limited {
            // Go on after the last key copied (the smallest, going down).
            batch.last_key().map(Bound::Excluded)
        } else {
            // Keys beyond a fence that is past the other end are past it too. Going up, the
            // next leaf holds keys above the upper fence; going down, keys at or below the
            // lower fence.
            match batch.fence() {
                Some(fence) if !batch.stopped && keep(fence) => {
                    pace.leaves_done += 1;
                    Some(if downwards {
                        Bound::Included(fence)
                    } else {
                        Bound::Excluded(fence)
                    })
                }
                _ => None,
            }
        };
        match next {
            Some(next) if downwards => self.high.set(next),
            Some(next) => self.low.set(next),
            None => self.exhausted = true,
        }
        Ok(())
    }
}

/// Most bytes a thread's scans keep for the next scan: scratch that grew beyond (a large value,
/// a long bound) is let go.
const SCRATCH_KEPT: usize = 1 << 20;

/// What [`scan_tree`] needs besides the tree: reused by a thread's scans, so that a short scan
/// (TPC-C runs several per transaction) allocates nothing once the buffers have grown.
struct ScanScratch {
    cursor: Cursor,
    batch: LeafBatch,
    /// The current large value.
    large: Vec<u8>,
}

impl ScanScratch {
    fn capacity(&self) -> usize {
        self.cursor.capacity() + self.batch.capacity() + self.large.capacity()
    }
}

thread_local! {
    static SCAN_SCRATCH: RefCell<Option<ScanScratch>> = const { RefCell::new(None) };
}

/// `Tree::scan` over `tree` (also for users without a handle: the database's own upkeep).
pub(crate) fn scan_tree<P: Policy, K: AsRef<[u8]>, R: RangeBounds<K>>(
    tree: &BTree<P>,
    range: R,
    mut visit: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    // Taken out of its cell, so that a `visit` that scans again gets scratch of its own (and
    // fresh scratch where the cell is gone: a scan from a thread-local destructor).
    let kept = SCAN_SCRATCH
        .try_with(|cell| cell.borrow_mut().take())
        .ok()
        .flatten();
    let mut scratch = match kept {
        Some(mut scratch) => {
            scratch.cursor.reset(range);
            scratch
        }
        None => ScanScratch {
            cursor: Cursor::new(range),
            batch: LeafBatch::default(),
            large: Vec::new(),
        },
    };
    let scanned = scan_with(tree, &mut scratch, &mut visit);
    if scratch.capacity() <= SCRATCH_KEPT {
        // Fails only while the thread's locals are destroyed: the scratch is dropped then.
        let _ = SCAN_SCRATCH.try_with(|cell| *cell.borrow_mut() = Some(scratch));
    }
    scanned
}

/// The loop of [`scan_tree`], over its (reset) scratch.
fn scan_with<P: Policy>(
    tree: &BTree<P>,
    scratch: &mut ScanScratch,
    visit: &mut impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let ScanScratch {
        cursor,
        batch,
        large,
    } = scratch;
    while !cursor.exhausted() {
        cursor.step(tree, batch, false)?;
        for (key, value) in batch.entries() {
            let value = if value.blob {
                if !tree.scanned_value(key, value, large)? {
                    continue; // removed since the leaf was read
                }
                &large[..]
            } else {
                value.bytes
            };
            if !visit(key, value) {
                return Ok(());
            }
        }
    }
    Ok(())
}
