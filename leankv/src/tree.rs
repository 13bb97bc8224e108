//! The public tree handle: input checks and error mapping over the internal B-tree.
//!
//! Invariants: no key or value beyond the database's limits reaches the tree; a handle keeps
//! its tree's root in the pool while it lives.

use crate::btree::{BTree, Decision, LeafBatch};
use crate::buffer::policy::{Lean, Policy};
use crate::error::{CompareAndSwapError, Error, Result};
use crate::range::{scan_tree, Cursor, Range};
use crate::shared::{DbShared, TreeHandle};
use std::cell::RefCell;
use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A named, ordered key-value tree. Cheap to clone; `Send + Sync`.
///
/// Keys and values are byte strings; the empty key and the empty value are valid. Keys are
/// ordered bytewise. See [`Db`](crate::Db) for an example.
pub struct Tree<P: Policy = Lean> {
    pub(crate) handle: TreeHandle<P>,
}

impl<P: Policy> Clone for Tree<P> {
    fn clone(&self) -> Self {
        Tree {
            handle: self.handle.clone(),
        }
    }
}

impl<P: Policy> fmt::Debug for Tree<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tree")
            .field("name", &self.handle.name)
            .field("root_page", &self.handle.tree.root_page_id())
            .finish()
    }
}

thread_local! {
    /// Reused buffer for `get_with` and `update_in_place`, so they do not allocate.
    static LOOKUP_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Largest lookup buffer a thread keeps: one that held a large value is let go.
const LOOKUP_BUFFER_KEPT: usize = 1 << 20;

/// Runs `f` with this thread's reused lookup buffer (taken out of its cell, so that an `f`
/// that looks up again gets a buffer of its own).
pub(crate) fn with_lookup_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut buffer = LOOKUP_BUFFER.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
    let result = f(&mut buffer);
    if buffer.capacity() <= LOOKUP_BUFFER_KEPT {
        LOOKUP_BUFFER.with(|cell| *cell.borrow_mut() = buffer);
    }
    result
}

impl<P: Policy> Tree<P> {
    /// A new handle; the tree's root is hot (see `BTree::attach`).
    pub(crate) fn new(db: Arc<DbShared<P>>, tree: Arc<BTree<P>>, name: Arc<str>) -> Tree<P> {
        Tree {
            handle: TreeHandle::new(db, tree, name),
        }
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.handle.db.max_key_size {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.handle.db.max_key_size,
            });
        }
        Ok(())
    }

    pub(crate) fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.handle.db.max_value_size {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: self.handle.db.max_value_size,
            });
        }
        Ok(())
    }

    /// False for keys longer than the limit: no such key can be stored, so lookups and
    /// removals can answer without searching.
    fn may_exist(&self, key: &[u8]) -> bool {
        key.len() <= self.handle.db.max_key_size
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
        self.check_value(value)?;
        let db = &self.handle.db;
        db.admit()?;
        // A single operation keeps no value it replaced (a large one's reference only, which
        // its record names).
        let written = self.handle.tree.insert(key, value, 0, &mut Vec::new())?;
        db.commit_durability(written.lsn, db.durability)
    }

    /// The value of `key`, if present. (A key longer than the limit cannot be present, so
    /// asking for one returns `None`, as `remove` returns `false`.)
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        let mut value = Vec::new();
        Ok(self.handle.tree.lookup(key, &mut value)?.then_some(value))
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
        with_lookup_buffer(|buffer| match self.handle.tree.lookup(key, buffer) {
            Ok(true) => Ok(Some(read(buffer))),
            Ok(false) => Ok(None),
            Err(error) => Err(error),
        })
    }

    /// Up to `len` bytes of the value of `key` from byte `offset` on (fewer at the value's
    /// end, none past it), if the key is present. A large value is read only where asked, so
    /// a caller can stream a value of gigabytes in pieces of its choice without holding it
    /// whole; [`value_len`](Self::value_len) says how long it is. Like `get`, each call sees
    /// the value as it was at one moment (a concurrent overwrite is seen wholly or not at all),
    /// but two calls may see two different values.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let files = db.open_tree("files")?;
    /// let video = vec![7u8; 10 << 20]; // 10 MiB: stored in pages of its own
    /// files.insert("video.mp4", &video)?;
    /// assert_eq!(files.value_len("video.mp4")?, Some(10 << 20));
    /// let mut copy = Vec::new();
    /// let mut offset = 0;
    /// while let Some(piece) = files.get_range("video.mp4", offset, 1 << 20)? {
    ///     if piece.is_empty() {
    ///         break;
    ///     }
    ///     offset += piece.len() as u64;
    ///     copy.extend_from_slice(&piece);
    /// }
    /// assert!(copy == video);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_range(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: usize,
    ) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        let mut out = Vec::new();
        let found = self.handle.tree.lookup_part(key, offset, len, &mut out)?;
        Ok(found.map(|_| out))
    }

    /// The length of the value of `key` in bytes, if the key is present, without reading a
    /// large value.
    pub fn value_len(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        let key = key.as_ref();
        if !self.may_exist(key) {
            return Ok(None);
        }
        self.handle.tree.lookup_part(key, 0, 0, &mut Vec::new())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.value_len(key)?.is_some())
    }

    /// Changes the value of `key` in place: `modify` gets the current value and may rewrite
    /// its bytes (not its length); the result is stored before any other operation on the key
    /// can see the value. Returns `modify`'s result, or `None` if the key is absent (then
    /// `modify` is not called). Suited to counters and fixed-layout records.
    ///
    /// `modify` runs while the key's leaf is latched: it must not use this tree. A value
    /// longer than [`Db::max_inline_value_size`](crate::Db::max_inline_value_size) lives
    /// outside its leaf and is not rewritten in place: that fails with
    /// [`Error::ValueTooLarge`] without calling `modify` (use
    /// [`fetch_update`](Self::fetch_update)).
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
        let db = &self.handle.db;
        let updated = if self.may_exist(key) {
            db.admit()?;
            with_lookup_buffer(|buffer| {
                // Outside a batch nothing is appended to `replaced`.
                let replaced = &mut Vec::new();
                self.handle.tree.update(key, buffer, modify, 0, replaced)
            })?
        } else {
            None
        };
        // A commit that found nothing to change is durable once every commit before it is.
        let lsn = updated.as_ref().map_or(0, |&(_, lsn)| lsn);
        db.commit_durability(lsn, db.durability)?;
        Ok(updated.map(|(result, _)| result))
    }

    /// Stores `new` under `key` (`None`: removes it) if its current value is `expected`
    /// (`None`: absent), atomically: no other write of the key comes in between. This covers
    /// insert-if-absent (`expected: None`) and remove-if-equal (`new: None`). On a mismatch
    /// nothing changes and the inner error carries the value found.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let locks = db.open_tree("locks")?;
    /// // Take the lock only if nobody holds it.
    /// assert!(locks.compare_and_swap("printer", None, Some(b"ada"))?.is_ok());
    /// let taken = locks.compare_and_swap("printer", None, Some(b"alan"))?.unwrap_err();
    /// assert_eq!(taken.current.as_deref(), Some(&b"ada"[..]));
    /// // Release it only if we hold it.
    /// assert!(locks.compare_and_swap("printer", Some(b"ada"), None)?.is_ok());
    /// assert_eq!(locks.get("printer")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), CompareAndSwapError>> {
        let key = key.as_ref();
        self.check_key(key)?;
        if let Some(new) = new {
            self.check_value(new)?;
        }
        let mut found_instead = None;
        self.write_if(key, |current| {
            if current == expected {
                found_instead = None;
                new.map_or(Decision::Remove, Decision::Put)
            } else {
                found_instead = Some(current.map(<[u8]>::to_vec));
                Decision::Keep
            }
        })?;
        Ok(match found_instead {
            Some(current) => Err(CompareAndSwapError {
                current,
                proposed: new.map(<[u8]>::to_vec),
            }),
            None => Ok(()),
        })
    }

    /// Replaces the value of `key` with what `f` makes of it (`None` in: absent; `None` out:
    /// remove), atomically: no other write of the key comes in between. Returns the value
    /// before. The new value may have any length up to the limit.
    ///
    /// `f` runs while the key's leaf is latched, so it must not use this tree; it may run more
    /// than once (again when its value did not fit the leaf, on the value then current), so it
    /// should compute from its argument alone.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let counters = db.open_tree("counters")?;
    /// let increment = |old: Option<&[u8]>| {
    ///     let count = old.map_or(0, |bytes| u64::from_be_bytes(bytes.try_into().unwrap()));
    ///     Some((count + 1).to_be_bytes().to_vec())
    /// };
    /// assert_eq!(counters.fetch_update("hits", increment)?, None);
    /// assert_eq!(counters.fetch_update("hits", increment)?, Some(1u64.to_be_bytes().to_vec()));
    /// assert_eq!(counters.get("hits")?, Some(2u64.to_be_bytes().to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fetch_update(
        &self,
        key: impl AsRef<[u8]>,
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        self.check_key(key)?;
        let max = self.handle.db.max_value_size;
        let mut previous = None;
        let mut too_large = None;
        self.write_if(key, |current| {
            previous = current.map(<[u8]>::to_vec);
            too_large = None;
            match f(current) {
                Some(new) if new.len() > max => {
                    too_large = Some(new.len());
                    Decision::Keep
                }
                Some(new) => Decision::Put(new),
                None => Decision::Remove,
            }
        })?;
        match too_large {
            Some(len) => Err(Error::ValueTooLarge { len, max }),
            None => Ok(previous),
        }
    }

    /// A conditional write of `key` as one commit, durable as the database's level says.
    fn write_if<V: AsRef<[u8]>>(
        &self,
        key: &[u8],
        decide: impl FnMut(Option<&[u8]>) -> Decision<V>,
    ) -> Result<()> {
        let db = &self.handle.db;
        db.admit()?;
        let written = self.handle.tree.write_if(key, decide)?;
        // A commit that changed nothing is durable once every commit before it is: what it
        // saw was committed.
        db.commit_durability(written.map_or(0, |written| written.lsn), db.durability)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        let db = &self.handle.db;
        let removed = if self.may_exist(key) {
            db.admit()?;
            self.handle.tree.remove(key, 0, &mut Vec::new())?
        } else {
            None
        };
        // A commit that found nothing to change is durable once every commit before it is.
        db.commit_durability(
            removed.as_ref().map_or(0, |written| written.lsn),
            db.durability,
        )?;
        Ok(removed.is_some())
    }

    /// Removes every key in `range` and returns how many there were: one atomic commit, durable
    /// as the database's [`Durability`](crate::Durability) says (after a crash the whole range
    /// is removed or none of it).
    ///
    /// Leaves wholly inside the range are cut out of the tree a parent at a time and their
    /// pages freed, so the cost grows with the leaves, not with the keys; only the two leaves
    /// at the range's ends lose keys one by one. Leaves not in memory are read to count their
    /// keys. Bounds longer than [`Db::max_key_size`](crate::Db::max_key_size) are refused with
    /// [`Error::KeyTooLarge`]; an empty range removes nothing.
    ///
    /// Like a batch, the removal is not isolated: a concurrent reader may see part of the range
    /// removed, and a key inserted into the range while the removal runs stays if the removal
    /// had passed its place. Checkpoints wait for a running removal. A removal that fails
    /// halfway (an I/O error) leaves the database refusing commits until it is reopened, which
    /// finishes the removal.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let events = db.open_tree("events")?;
    /// for n in 0u32..10_000 {
    ///     events.insert(n.to_be_bytes(), b"payload")?;
    /// }
    /// let removed = events.remove_range(1_000u32.to_be_bytes()..9_000u32.to_be_bytes())?;
    /// assert_eq!((removed, events.len()?), (8_000, 2_000));
    /// assert_eq!(events.remove_range::<&[u8], _>(..)?, 2_000);
    /// assert!(events.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        let owned = |bound: Bound<&K>| -> Result<Bound<Vec<u8>>> {
            Ok(match bound {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(key) => {
                    self.check_key(key.as_ref())?;
                    Bound::Included(key.as_ref().to_vec())
                }
                Bound::Excluded(key) => {
                    self.check_key(key.as_ref())?;
                    Bound::Excluded(key.as_ref().to_vec())
                }
            })
        };
        let (start, end) = (owned(range.start_bound())?, owned(range.end_bound())?);
        let empty = match (&start, &end) {
            (Bound::Included(start), Bound::Included(end)) => start > end,
            (Bound::Included(start) | Bound::Excluded(start), Bound::Excluded(end))
            | (Bound::Excluded(start), Bound::Included(end)) => start >= end,
            _ => false,
        };
        if empty {
            return Ok(0);
        }
        let db = &self.handle.db;
        let (removed, lsn) = crate::batch::remove_range(db, &self.handle.tree, start, end)?;
        db.commit_durability(lsn, db.durability)?;
        Ok(removed)
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
        Range::new(self.handle.clone(), Cursor::new(range))
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
        visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        scan_tree(&self.handle.tree, range, visit)
    }

    /// All pairs in ascending key order (see [`range`](Self::range)).
    pub fn iter(&self) -> Range<P> {
        self.range::<&[u8], _>(..)
    }

    /// The pairs whose keys start with `prefix`, in ascending key order (`rev()` for
    /// descending); the empty prefix matches every key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let files = db.open_tree("files")?;
    /// for path in ["docs/a.md", "docs/b.md", "src/lib.rs", "docsite"] {
    ///     files.insert(path, "")?;
    /// }
    /// let docs: Vec<Vec<u8>> = files
    ///     .scan_prefix("docs/")
    ///     .map(|item| item.map(|(key, _)| key))
    ///     .collect::<leankv::Result<_>>()?;
    /// assert_eq!(docs, [b"docs/a.md".to_vec(), b"docs/b.md".to_vec()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Range<P> {
        let prefix = prefix.as_ref();
        match prefix_successor(prefix) {
            Some(end) => self.range(prefix.to_vec()..end),
            None => self.range(prefix.to_vec()..),
        }
    }

    /// The pair with the smallest key, if the tree holds any.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    /// The pair with the largest key, if the tree holds any.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let log = db.open_tree("log")?;
    /// assert_eq!(log.last()?, None);
    /// for sequence in 1u64..=3 {
    ///     log.insert(sequence.to_be_bytes(), format!("entry {sequence}"))?;
    /// }
    /// let (key, value) = log.last()?.unwrap();
    /// assert_eq!((key, value), (3u64.to_be_bytes().to_vec(), b"entry 3".to_vec()));
    /// assert_eq!(log.first()?.unwrap().0, 1u64.to_be_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }

    /// How many keys the tree holds, exactly, without a scan: the tree keeps its count as
    /// writes change it, and the log and checkpoints keep it across crashes and reopens.
    ///
    /// Cost: a few cache lines read (the count is kept per thread, so that writers do not
    /// contend on it). Under concurrent writes it counts every write that completed before
    /// the call; writes running or starting meanwhile may or may not count.
    /// (After reopening a database kept without its write-ahead log following a crash, or one
    /// written by a version before counts, the first call per tree counts it by a scan; such
    /// a count is exact if no write runs meanwhile.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let tree = db.open_tree("fruit")?;
    /// for fruit in ["apple", "banana", "cherry", "apple"] {
    ///     tree.insert(fruit, "")?;
    /// }
    /// tree.remove("banana")?;
    /// assert_eq!(tree.len()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        self.check_usable()?;
        let count = self.handle.tree.key_count();
        if let Some(keys) = count.get() {
            return Ok(keys);
        }
        // Counted from the leaves, without reading any large value.
        let mut cursor = Cursor::new::<&[u8], _>(..);
        let mut batch = LeafBatch::default();
        let mut keys = 0;
        while !cursor.exhausted() {
            cursor.step(&self.handle.tree, &mut batch, false)?;
            keys += batch.len() as u64;
        }
        self.handle.db.key_counts.counted_by_scan(count, keys);
        Ok(keys)
    }

    /// True if the tree holds no key.
    pub fn is_empty(&self) -> Result<bool> {
        self.check_usable()?;
        match self.handle.tree.key_count().get() {
            Some(keys) => Ok(keys == 0),
            None => Ok(self.first()?.is_none()),
        }
    }

    /// The errors of a call that answers without a page access (the key count): the tree was
    /// dropped, or the database closed.
    fn check_usable(&self) -> Result<()> {
        if self.handle.tree.is_dropped() {
            return Err(Error::TreeDropped);
        }
        self.handle.db.bm.check_open()
    }
}

/// The smallest key above every key that starts with `prefix`, if there is one (there is none
/// for the empty prefix or one of only `0xFF` bytes: every key above it has the prefix).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&byte| byte != u8::MAX)?;
    let mut successor = prefix[..=last].to_vec();
    successor[last] += 1;
    Some(successor)
}

#[cfg(test)]
mod tests {
    use super::prefix_successor;

    #[test]
    fn prefix_successor_is_the_first_key_past_the_prefix() {
        assert_eq!(prefix_successor(b"abc"), Some(b"abd".to_vec()));
        assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
        assert_eq!(prefix_successor(b"\x00"), Some(b"\x01".to_vec()));
    }
}
