//! The public tree handle and its range iterator: input checks and error mapping over the
//! internal B-tree.
//!
//! Invariants: no key or value beyond the database's limits reaches the tree; a handle keeps
//! its tree's root in the pool while it lives; a range yields strictly ascending keys and ends.

use crate::btree::node::Bound as SearchBound;
use crate::btree::{BTree, LeafBatch};
use crate::buffer::policy::{Lean, Policy};
use crate::error::{Error, Result};
use crate::shared::DbShared;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A named, ordered key-value tree. Cheap to clone; `Send + Sync`.
///
/// Keys and values are byte strings; the empty key and the empty value are valid. Keys are
/// ordered bytewise. See [`Db`](crate::Db) for an example.
pub struct Tree<P: Policy = Lean> {
    db: Arc<DbShared<P>>,
    tree: Arc<BTree<P>>,
    name: Arc<str>,
}

impl<P: Policy> Clone for Tree<P> {
    fn clone(&self) -> Self {
        Tree::new(self.db.clone(), self.tree.clone(), self.name.clone())
    }
}

impl<P: Policy> fmt::Debug for Tree<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tree")
            .field("name", &self.name)
            .field("root_page", &self.tree.root_page_id())
            .finish()
    }
}

impl<P: Policy> Drop for Tree<P> {
    fn drop(&mut self) {
        if self.tree.drop_handle() {
            self.db.release(&self.tree);
        }
    }
}

thread_local! {
    /// Reused buffer for `get_with` and `update_in_place`, so they do not allocate.
    static LOOKUP_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<P: Policy> Tree<P> {
    /// A new handle; the tree's root is hot (see `BTree::attach`).
    pub(crate) fn new(db: Arc<DbShared<P>>, tree: Arc<BTree<P>>, name: Arc<str>) -> Tree<P> {
        tree.add_handle();
        Tree { db, tree, name }
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.db.max_key_size {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.db.max_key_size,
            });
        }
        Ok(())
    }

    /// False for keys longer than the limit: no such key can be stored, so lookups and
    /// removals can answer without searching.
    fn may_exist(&self, key: &[u8]) -> bool {
        key.len() <= self.db.max_key_size
    }

    /// Inserts `key` with `value`, replacing any previous value. Fails with
    /// [`Error::KeyTooLarge`] / [`Error::ValueTooLarge`] beyond the database's limits.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let users = db.open_tree("users")?;
    /// users.insert("ada", "lovelace")?;
    /// users.insert("ada", "byron")?; // replaces
    /// assert_eq!(users.get("ada")?, Some(b"byron".to_vec()));
    /// assert_eq!(users.get("alan")?, None);
    /// let too_long = vec![0u8; db.max_key_size() + 1];
    /// assert!(matches!(
    ///     users.insert(&too_long, ""),
    ///     Err(leankv::Error::KeyTooLarge { .. })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.check_key(key)?;
        if value.len() > self.db.max_value_size {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: self.db.max_value_size,
            });
        }
        self.tree.insert(key, value)
    }

    /// The value of `key`, if present. (A key longer than the limit cannot be present, so
    /// asking for one returns `None`, as `remove` returns `false`.)
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        let mut value = Vec::new();
        Ok(self.tree.lookup(key, &mut value)?.then_some(value))
    }

    /// Calls `read` with the value of `key`, if present, without allocating: the value is
    /// copied into a reused per-thread buffer (a consistent copy, never torn).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let sizes = db.open_tree("sizes")?;
    /// sizes.insert("a.txt", 1234u32.to_le_bytes())?;
    /// let size = sizes.get_with("a.txt", |bytes| u32::from_le_bytes(bytes.try_into().unwrap()))?;
    /// assert_eq!(size, Some(1234));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        // Taken out of the cell, so a `read` that looks up again gets a buffer of its own.
        let mut buffer = LOOKUP_BUFFER.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        let found = self.tree.lookup(key, &mut buffer);
        let result = match found {
            Ok(true) => Ok(Some(read(&buffer))),
            Ok(false) => Ok(None),
            Err(error) => Err(error),
        };
        LOOKUP_BUFFER.with(|cell| *cell.borrow_mut() = buffer);
        result
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get_with(key, |_| ())?.is_some())
    }

    /// Changes the value of `key` in place: `modify` gets the current value and may rewrite
    /// its bytes (not its length); the result is stored before any other operation on the key
    /// can see the value. Returns `modify`'s result, or `None` if the key is absent (then
    /// `modify` is not called). Suited to counters and fixed-layout records.
    ///
    /// `modify` runs while the key's leaf is latched: it must not use this tree.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let counters = db.open_tree("counters")?;
    /// counters.insert("visits", 41u64.to_be_bytes())?;
    /// let before = counters.update_in_place("visits", |bytes| {
    ///     let count = u64::from_be_bytes(bytes.try_into().unwrap());
    ///     bytes.copy_from_slice(&(count + 1).to_be_bytes());
    ///     count
    /// })?;
    /// assert_eq!(before, Some(41));
    /// assert_eq!(counters.get("visits")?.unwrap(), 42u64.to_be_bytes());
    /// assert_eq!(counters.update_in_place("missing", |_| ())?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_in_place<R>(
        &self,
        key: impl AsRef<[u8]>,
        modify: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        let mut buffer = LOOKUP_BUFFER.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        let result = self.tree.update(key, &mut buffer, modify);
        LOOKUP_BUFFER.with(|cell| *cell.borrow_mut() = buffer);
        result
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(false);
        }
        self.tree.remove(key)
    }

    /// The pairs whose keys lie in `range`, in ascending key order.
    ///
    /// The iterator copies at most one leaf per step (fewer entries at first, so short scans
    /// stay cheap) and holds no latch or epoch between steps, so it never blocks writers or
    /// eviction. Once past its first leaf, a scan that meets leaves not in memory reads ahead
    /// (see [`Options::scan_prefetch`](crate::Options::scan_prefetch)) and puts the leaves it
    /// brought in straight into the cooling stage, so a scan larger than the pool does not push
    /// out the hot pages of other work. It returns every key that is present for the whole
    /// duration of the scan, each exactly once, in strictly ascending order; keys inserted or
    /// removed meanwhile may or may not appear.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let words = db.open_tree("words")?;
    /// for word in ["apple", "banana", "blueberry", "cherry"] {
    ///     words.insert(word, "")?;
    /// }
    /// // Any `RangeBounds` over byte strings: `a..b`, `a..=b`, `a..`, `..`.
    /// let b_words: Vec<Vec<u8>> = words
    ///     .range("b".."c")
    ///     .map(|item| item.map(|(key, _)| key))
    ///     .collect::<leankv::Result<_>>()?;
    /// assert_eq!(b_words, [b"banana".to_vec(), b"blueberry".to_vec()]);
    /// assert_eq!(words.range("blueberry"..).count(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Range<P> {
        Range {
            tree: self.clone(),
            cursor: Cursor::new(range),
            batch: LeafBatch::default(),
            buffered: VecDeque::new(),
        }
    }

    /// Calls `visit` with the pairs whose keys lie in `range`, in ascending key order, until
    /// it returns `false`. Works like [`range`](Self::range) (same guarantees, read-ahead and
    /// hinting) but lends each pair from a reused copy of its leaf instead of allocating it,
    /// which makes long scans several times cheaper.
    ///
    /// `visit` runs while no latch is held, so it may use the tree (changes it makes behind
    /// the scan's position may or may not be seen).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let events = db.open_tree("events")?;
    /// for n in 0u32..100 {
    ///     events.insert(n.to_be_bytes(), b"payload")?;
    /// }
    /// let mut bytes = 0;
    /// events.scan(10u32.to_be_bytes()..20u32.to_be_bytes(), |_key, value| {
    ///     bytes += value.len();
    ///     true // false stops the scan
    /// })?;
    /// assert_eq!(bytes, 70);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let mut cursor = Cursor::new(range);
        let mut batch = LeafBatch::default();
        while !cursor.finished {
            cursor.step(&self.tree, &mut batch)?;
            for (key, value) in batch.entries() {
                if !visit(key, value) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// All pairs in ascending key order (see [`range`](Self::range)).
    pub fn iter(&self) -> Range<P> {
        self.range::<&[u8], _>(..)
    }

    /// True if the tree holds no key.
    pub fn is_empty(&self) -> Result<bool> {
        self.iter().next().transpose().map(|first| first.is_none())
    }
}

/// Iterator over a key range of a [`Tree`]; yields `Result<(key, value)>`.
pub struct Range<P: Policy = Lean> {
    tree: Tree<P>,
    cursor: Cursor,
    batch: LeafBatch,
    buffered: VecDeque<(Vec<u8>, Vec<u8>)>,
}

impl<P: Policy> fmt::Debug for Range<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Range")
            .field("tree", &self.tree.name)
            .field("next", &KeyBound(&self.cursor.next))
            .field("end", &KeyBound(&self.cursor.end))
            .field("buffered", &self.buffered.len())
            .field("finished", &self.cursor.finished)
            .finish()
    }
}

/// A bound shown with its key as escaped ASCII (`Included(user\x00)`), not a list of numbers.
struct KeyBound<'a>(&'a Bound<Vec<u8>>);

impl fmt::Debug for KeyBound<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Bound::Included(key) => write!(f, "Included({})", key.escape_ascii()),
            Bound::Excluded(key) => write!(f, "Excluded({})", key.escape_ascii()),
            Bound::Unbounded => write!(f, "Unbounded"),
        }
    }
}

/// Where a scan stands between steps: shared by [`Range`] and [`Tree::scan`].
struct Cursor {
    /// Where the next leaf read starts.
    next: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    finished: bool,
    /// Entries copied by the next step. It starts small and doubles, so that short scans
    /// (the common `take(n)`) do not copy whole leaves they never return.
    batch_limit: usize,
    /// Leaves finished so far; decides read-ahead and hinting (see `BTree::scan_leaf`).
    leaves_done: usize,
}

/// Entries the first step of a range copies.
const FIRST_BATCH: usize = 16;

impl Cursor {
    fn new<K: AsRef<[u8]>, R: RangeBounds<K>>(range: R) -> Cursor {
        let own = |bound: Bound<&K>| match bound {
            Bound::Included(key) => Bound::Included(key.as_ref().to_vec()),
            Bound::Excluded(key) => Bound::Excluded(key.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        Cursor {
            next: own(range.start_bound()),
            end: own(range.end_bound()),
            finished: false,
            batch_limit: FIRST_BATCH,
            leaves_done: 0,
        }
    }

    /// Copies the next batch (at most the rest of one leaf) into `batch` and moves past it.
    /// On an error the cursor is finished.
    fn step<P: Policy>(&mut self, tree: &BTree<P>, batch: &mut LeafBatch) -> Result<()> {
        let (start, bound): (&[u8], SearchBound) = match &self.next {
            Bound::Unbounded => (&[], SearchBound::AtLeast),
            Bound::Included(key) => (key, SearchBound::AtLeast),
            Bound::Excluded(key) => (key, SearchBound::Above),
        };
        let end = &self.end;
        let within = move |key: &[u8]| match end {
            Bound::Unbounded => true,
            Bound::Included(last) => key <= last.as_slice(),
            Bound::Excluded(last) => key < last.as_slice(),
        };
        let read = tree.scan_leaf(
            start,
            bound,
            &within,
            self.batch_limit,
            self.leaves_done,
            batch,
        );
        if let Err(error) = read {
            self.finished = true;
            return Err(error);
        }
        self.batch_limit = self.batch_limit.saturating_mul(2);
        if batch.limited {
            match batch.last_key() {
                Some(last) => self.next = Bound::Excluded(last.to_vec()),
                None => self.finished = true, // a limit of zero cannot happen; stop safely
            }
            return Ok(());
        }
        match batch.upper_fence() {
            // Keys above a fence that is past the end are past the end too.
            Some(fence) if !batch.stopped && within(fence) => {
                self.next = Bound::Excluded(fence.to_vec());
                self.leaves_done += 1;
            }
            _ => self.finished = true,
        }
        Ok(())
    }
}

impl<P: Policy> Iterator for Range<P> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.buffered.is_empty() && !self.cursor.finished {
            if let Err(error) = self.cursor.step(&self.tree.tree, &mut self.batch) {
                return Some(Err(error));
            }
            let entries = self.batch.entries();
            self.buffered
                .extend(entries.map(|(key, value)| (key.to_vec(), value.to_vec())));
        }
        self.buffered.pop_front().map(Ok)
    }
}
