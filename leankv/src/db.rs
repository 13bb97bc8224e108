//! The database: options, open/close, named trees (the catalog: `crate::catalog`), statistics.
//!
//! A database is a directory holding the page file (`leankv.pages`) and a lock file (`LOCK`,
//! held with an exclusive advisory lock while open). Page 0 of the page file is the superblock;
//! the catalog is a B-tree mapping tree names to the page id of their root, which never
//! changes. Close (and drop) writes every dirty page, the free-page list and the superblock.
//!
//! Opening (recovery included) lives in `open.rs`; the write-ahead log's two files sit beside
//! the page file (see `crate::wal`).

use crate::batch::{Durability, WriteBatch};
use crate::btree::check::{Checker, IntegrityReport};
use crate::buffer::policy::{Lean, Policy};
use crate::buffer::Counter;
use crate::catalog;
use crate::error::{Error, Result};
use crate::io::{FileStorage, IoMode, Storage};
use crate::open::{self, Files, LOG_FILES, PAGE_FILE};
use crate::options::Options;
use crate::shared::DbShared;
use crate::transaction::Transaction;
use crate::tree::Tree;
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

const LOCK_FILE: &str = "LOCK";

/// Counters and facts about a running database, from [`Db::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Pages read from storage.
    pub page_reads: u64,
    /// Pages written to storage (eviction, background writer, flush).
    pub page_writes: u64,
    /// Pages the background writer wrote (part of `page_writes`).
    pub background_writes: u64,
    /// Frames reclaimed from the cooling stage.
    pub evictions: u64,
    /// Hot pages moved to the cooling stage.
    pub unswizzles: u64,
    /// Cooling pages touched again and made hot without I/O.
    pub cooling_hits: u64,
    /// Optimistic operations that restarted after a failed validation.
    pub restarts: u64,
    /// Operations that fell back to pessimistic latching.
    pub pessimistic_fallbacks: u64,
    /// Faults that waited for another thread's read of the same page.
    pub read_waits: u64,
    /// Pages read ahead of range scans and for [`Tree::get_many`](crate::Tree::get_many) (part
    /// of `page_reads`).
    pub prefetch_reads: u64,
    /// Leaves range scans brought in and put straight back into the cooling stage, so that
    /// large scans do not push the hot working set out.
    pub scan_cooled: u64,
    /// Bytes of large values (longer than [`Db::max_inline_value_size`]) written to and read
    /// from their own pages.
    pub large_value_bytes_written: u64,
    /// See `large_value_bytes_written`.
    pub large_value_bytes_read: u64,
    /// How pages reach the device.
    pub io_mode: IoMode,
    /// Page size in bytes.
    pub page_size: usize,
    /// Frames in the pool.
    pub pool_frames: usize,
    /// Frames holding a page now.
    pub frames_in_use: usize,
    /// Pages in the page file (allocation high-water mark, superblock included).
    pub page_count: u64,
    /// Pages below `page_count` that hold nothing: the free list (its own pages included) and
    /// freed pages whose reuse still waits (on the log, or on a write in flight). New pages
    /// are taken from them before the file grows; the page file never shrinks, so only a copy
    /// into a new database (as the `leankv compact` command makes) gives their space back.
    pub free_pages: u64,
    /// The on-disk format version of the page file: the one this build writes (it reads the
    /// previous one too, and rewrites such a file's version at open; a file of another version
    /// is refused at open with [`Error::NotADatabase`]).
    pub format_version: u32,
    /// Bytes appended to the write-ahead log and written since open (0 without a log).
    pub log_bytes_written: u64,
    /// Syncs of the log files since open: with group commit, far fewer than commits.
    pub log_syncs: u64,
    /// Of the log's bytes since open, those that pad the unused rest of a thread's region of
    /// the log buffer when a sync closes it (single operations under `Eventual` or `None`
    /// are placed in per-thread regions; see `ARCHITECTURE.md`).
    pub log_padding_bytes: u64,
    /// What the recovery at open did.
    pub recovery: RecoveryStats,
    /// Trees whose key count was not known at open (after a crash without the log, or kept
    /// by an older version) and was counted by a scan at their first [`Tree::len`].
    pub trees_counted_by_scan: u64,
}

impl Stats {
    /// The event counters since open, by field name: what a monitor or a benchmark reports
    /// as rates (every `u64` field that only grows).
    pub fn counters(&self) -> [(&'static str, u64); 16] {
        [
            ("page_reads", self.page_reads),
            ("page_writes", self.page_writes),
            ("background_writes", self.background_writes),
            ("evictions", self.evictions),
            ("unswizzles", self.unswizzles),
            ("cooling_hits", self.cooling_hits),
            ("restarts", self.restarts),
            ("pessimistic_fallbacks", self.pessimistic_fallbacks),
            ("read_waits", self.read_waits),
            ("prefetch_reads", self.prefetch_reads),
            ("scan_cooled", self.scan_cooled),
            ("large_value_bytes_written", self.large_value_bytes_written),
            ("large_value_bytes_read", self.large_value_bytes_read),
            ("log_bytes_written", self.log_bytes_written),
            ("log_syncs", self.log_syncs),
            ("log_padding_bytes", self.log_padding_bytes),
        ]
    }
}

/// What the recovery at open replayed and rolled back (all zero for a new database or
/// without a log; a clean close leaves only its checkpoint record to read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryStats {
    /// Log bytes read from the last checkpoint on.
    pub log_bytes: u64,
    /// Log records replayed (the records of a batch published together, as one group, count
    /// once).
    pub records: u64,
    /// Pages rebuilt from the log and written.
    pub pages: u64,
    /// Writes of rebuilt pages before the end of the replay, which keep its memory within
    /// the pool's size (a page changed again is read back).
    pub pages_written_early: u64,
    /// Batches without a commit record, rolled back.
    pub batches_rolled_back: u64,
    /// Range removals without a commit record, finished.
    pub range_removals_finished: u64,
    /// Time from the start of the open to the end of recovery.
    pub duration: std::time::Duration,
}

/// A database: a directory with a page file, and the buffer pool in front of it.
///
/// ```
/// # fn main() -> leankv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = leankv::Db::open(dir.path(), leankv::Options::default().pool_size(64 << 20))?;
/// let users = db.open_tree("users")?;
/// users.insert(b"ada", b"lovelace")?;
/// users.insert(b"alan", b"turing")?;
/// assert_eq!(users.get(b"ada")?, Some(b"lovelace".to_vec()));
/// for item in users.range(b"a".to_vec()..b"b".to_vec()) {
///     let (key, value) = item?;
///     println!("{} {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
/// }
/// assert!(users.remove(b"alan")?);
/// db.close()?;
/// # Ok(())
/// # }
/// ```
///
/// `Db` is `Send + Sync`; share it with `Arc` or share [`Tree`] handles, which may outlive
/// it (they then return [`Error::Closed`]).
///
/// Applications never name the type parameter: it defaults to the engine itself and exists
/// for the benchmarks' ablations and baselines (feature `ablations`).
pub struct Db<P: Policy = Lean> {
    pub(crate) shared: Arc<DbShared<P>>,
}

impl<P: Policy> fmt::Debug for Db<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut open_trees: Vec<String> = self.shared.trees.lock().keys().cloned().collect();
        open_trees.sort();
        f.debug_struct("Db")
            .field("path", &self.shared.path)
            .field("page_size", &self.shared.bm.page_size())
            .field("pool_frames", &self.shared.bm.frame_count())
            .field("open_trees", &open_trees)
            .finish()
    }
}

impl Db {
    /// Opens the database in directory `dir`, creating the directory and an empty database if
    /// missing.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_in(dir.as_ref(), options)
    }

    /// Opens a database whose pages live in `storage` (for instance a
    /// [`FaultyStorage`](crate::testing::FaultyStorage) in tests); `dir` only holds the lock
    /// file. Feature `testing`.
    #[cfg(feature = "testing")]
    pub fn open_with_storage(
        dir: impl AsRef<Path>,
        options: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Db> {
        Db::open_on(dir.as_ref(), options, Files::pages_only(storage))
    }

    /// Opens a database whose page file is `pages` and whose two log files are `logs` (for
    /// instance [`SimulatedStorage`](crate::testing::SimulatedStorage)s of one crash
    /// simulator); `dir` only holds the lock file. Feature `testing`.
    #[cfg(feature = "testing")]
    pub fn open_with_files(
        dir: impl AsRef<Path>,
        options: Options,
        pages: Arc<dyn Storage>,
        logs: [Arc<dyn Storage>; 2],
    ) -> Result<Db> {
        Db::open_on(dir.as_ref(), options, Files { pages, logs })
    }
}

impl<P: Policy> Db<P> {
    /// [`Db::open`] with buffer-management policy `P`, e.g.
    /// `Db::<leankv::ablations::Traditional>::open_with_policy(dir, options)`. Feature
    /// `ablations`.
    #[cfg(feature = "ablations")]
    pub fn open_with_policy(dir: impl AsRef<Path>, options: Options) -> Result<Db<P>> {
        Self::open_in(dir.as_ref(), options)
    }

    /// [`Db::open_with_storage`] with buffer-management policy `P`. Feature `ablations`.
    #[cfg(feature = "ablations")]
    pub fn open_with_storage_and_policy(
        dir: impl AsRef<Path>,
        options: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Db<P>> {
        Self::open_on(dir.as_ref(), options, Files::pages_only(storage))
    }

    /// Opens the database in `dir`, its pages in the page file there.
    fn open_in(dir: &Path, options: Options) -> Result<Db<P>> {
        let lock = lock_directory(dir)?;
        let as_storage = |file: std::io::Result<FileStorage>, what: &'static str| {
            file.map(|file| Arc::new(file) as Arc<dyn Storage>)
                .map_err(|e| Error::io(what, e))
        };
        let pages = as_storage(
            FileStorage::open(&dir.join(PAGE_FILE), options.direct_io),
            "opening the page file",
        )?;
        let new = pages
            .is_empty()
            .map_err(|e| Error::io("reading the page file size", e))?;
        if new {
            // Log files without a page file belong to no database this one could continue.
            for name in LOG_FILES {
                match std::fs::remove_file(dir.join(name)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Error::io("removing a stale log file", e));
                    }
                    _ => {}
                }
            }
        }
        let log = |name: &str| {
            let file = FileStorage::open_sequential(&dir.join(name), options.direct_io);
            as_storage(file, "opening the log")
        };
        let logs = [log(LOG_FILES[0])?, log(LOG_FILES[1])?];
        Self::open_locked(dir, lock, options, Files { pages, logs })
    }

    /// Opens the database whose files live in `files`, locking `dir`.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    fn open_on(dir: &Path, options: Options, files: Files) -> Result<Db<P>> {
        let lock = lock_directory(dir)?;
        Self::open_locked(dir, lock, options, files)
    }

    fn open_locked(dir: &Path, lock: File, options: Options, files: Files) -> Result<Db<P>> {
        Ok(Db {
            shared: open::open(dir, lock, options, files)?,
        })
    }

    /// Opens the tree `name`, creating it if missing. Handles are cheap to clone and may be
    /// used from any thread.
    pub fn open_tree(&self, name: &str) -> Result<Tree<P>> {
        let shared = &self.shared;
        if name.len() > shared.max_key_size {
            return Err(Error::KeyTooLarge {
                len: name.len(),
                max: shared.max_key_size,
            });
        }
        let tree = catalog::open_named_tree(shared, name)?;
        Ok(Tree::new(shared.clone(), tree, name.into()))
    }

    /// Drops the tree `name`: removes its keys and its name and frees all its pages, as one
    /// atomic commit durable as [`Options::durability`] says (after a crash the tree is
    /// entirely there or entirely gone). Returns whether the tree existed.
    ///
    /// Handles to the tree that outlive it fail with [`Error::TreeDropped`]; operations
    /// running on it when it is dropped either finish first or fail the same way.
    /// [`open_tree`](Self::open_tree) with the same name creates a new, empty tree. Opening
    /// other trees waits while a drop runs. A drop that fails halfway (an I/O error) leaves the
    /// database refusing commits until it is reopened, which finishes the drop.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let sessions = db.open_tree("sessions")?;
    /// sessions.insert("s1", "alice")?;
    /// assert!(db.drop_tree("sessions")?);
    /// assert!(matches!(sessions.get("s1"), Err(leankv::Error::TreeDropped)));
    /// assert!(!db.drop_tree("sessions")?);
    /// assert!(db.open_tree("sessions")?.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drop_tree(&self, name: &str) -> Result<bool> {
        let shared = &self.shared;
        if name.len() > shared.max_key_size {
            return Ok(false);
        }
        shared.admit()?;
        // The gate before the trees (the lock order of `crate::transaction`).
        let gate = shared.batch_gate.read();
        let mut trees = shared.trees.lock();
        let Some(tree) = catalog::named_tree(shared, &mut trees, name)? else {
            return Ok(false);
        };
        tree.mark_dropped();
        shared.bm.wait_for_running_operations();
        trees.remove(name);
        let lsn = crate::batch::drop_tree(shared, &tree)?;
        drop((trees, gate));
        shared.commit_durability(lsn, shared.durability)?;
        Ok(true)
    }

    /// Runs `body` as a [`Transaction`]: its changes are applied as it makes them (so its reads
    /// see them) and committed atomically when it returns `Ok`, durable as the database's
    /// [`Options::durability`] says; if it returns `Err` or panics, they are undone. Returns
    /// what `body` returned; its error type takes leankv's errors (`From<Error>`), so a body
    /// can fail with errors of its own.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// let accounts = db.open_tree("accounts")?;
    /// accounts.insert("alice", 100u64.to_be_bytes())?;
    /// let balance = |name: &str| -> leankv::Result<u64> {
    ///     let bytes = accounts.get(name)?.unwrap_or_else(|| vec![0; 8]);
    ///     Ok(u64::from_be_bytes(bytes.try_into().unwrap()))
    /// };
    /// let transfer = |amount: u64| -> Result<u64, Box<dyn std::error::Error>> {
    ///     db.transaction(|txn| {
    ///         let from = balance("alice")?;
    ///         txn.insert(&accounts, "bob", (balance("bob")? + amount).to_be_bytes())?;
    ///         if from < amount {
    ///             return Err("insufficient funds".into()); // undoes the insert
    ///         }
    ///         txn.insert(&accounts, "alice", (from - amount).to_be_bytes())?;
    ///         Ok(from - amount)
    ///     })
    /// };
    /// assert_eq!(transfer(30)?, 70);
    /// assert_eq!(transfer(500).unwrap_err().to_string(), "insufficient funds");
    /// assert_eq!((balance("alice")?, balance("bob")?), (70, 30));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn transaction<T, E: From<Error>>(
        &self,
        body: impl FnOnce(&mut Transaction<'_, P>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        crate::transaction::run(&self.shared, self.shared.durability, body)
    }

    /// [`transaction`](Self::transaction), its commit durable as `durability` says.
    pub fn transaction_with<T, E: From<Error>>(
        &self,
        durability: Durability,
        body: impl FnOnce(&mut Transaction<'_, P>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        crate::transaction::run(&self.shared, durability, body)
    }

    /// Applies `batch` atomically (see [`WriteBatch`]), durable as the database's
    /// [`Options::durability`] says.
    pub fn write(&self, batch: WriteBatch<P>) -> Result<()> {
        crate::batch::write(&self.shared, batch, self.shared.durability)
    }

    /// Applies `batch` atomically, durable as `durability` says.
    pub fn write_with(&self, batch: WriteBatch<P>, durability: Durability) -> Result<()> {
        crate::batch::write(&self.shared, batch, durability)
    }

    /// Names of all trees, in byte order.
    pub fn tree_names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for item in self.catalog().iter() {
            let (name, _) = item?;
            names.push(String::from_utf8_lossy(&name).into_owned());
        }
        Ok(names)
    }

    /// Makes every commit so far durable, whatever its durability level, and writes a
    /// checkpoint: every dirty page is written and synced, so the next recovery starts here.
    /// (Without the log: writes every dirty page, the free-page list and the superblock, and
    /// syncs.) Not needed for durability under `Durability::Immediate`.
    pub fn flush(&self) -> Result<()> {
        self.shared.flush()
    }

    /// Current counters and facts.
    pub fn stats(&self) -> Stats {
        let bm = &self.shared.bm;
        let (page_count, free_pages) =
            bm.with_page_allocation(|page_count, free| (page_count, free.len() as u64));
        let counters = bm.counters();
        let count = |counter: Counter| counters[counter as usize];
        let log = bm.log().map(|log| log.counters()).unwrap_or_default();
        Stats {
            page_reads: count(Counter::PageReads),
            page_writes: count(Counter::PageWrites),
            background_writes: count(Counter::BackgroundWrites),
            evictions: count(Counter::Evictions),
            unswizzles: count(Counter::Unswizzles),
            cooling_hits: count(Counter::CoolingHits),
            restarts: count(Counter::Restarts),
            pessimistic_fallbacks: count(Counter::PessimisticFallbacks),
            read_waits: count(Counter::ReadWaits),
            prefetch_reads: count(Counter::PrefetchReads),
            scan_cooled: count(Counter::ScanCooled),
            large_value_bytes_written: count(Counter::BlobBytesWritten),
            large_value_bytes_read: count(Counter::BlobBytesRead),
            io_mode: bm.io_mode(),
            page_size: bm.page_size(),
            pool_frames: bm.frame_count() as usize,
            frames_in_use: bm.frames_in_use(),
            page_count,
            free_pages,
            format_version: crate::io::superblock::FORMAT_VERSION,
            log_bytes_written: log.bytes,
            log_syncs: log.syncs,
            log_padding_bytes: log.padding,
            recovery: self.shared.recovery,
            trees_counted_by_scan: self.shared.key_counts.scans(),
        }
    }

    /// Longest key this database accepts.
    pub fn max_key_size(&self) -> usize {
        self.shared.max_key_size
    }

    /// Longest value this database accepts ([`MAX_VALUE_SIZE`](crate::MAX_VALUE_SIZE),
    /// 4 GiB - 1).
    pub fn max_value_size(&self) -> usize {
        self.shared.max_value_size
    }

    /// Longest value stored in its leaf, next to its key (a quarter of a page). A longer value
    /// lives in runs of whole pages of its own, written and read with large sequential I/O
    /// past the buffer pool, and its leaf holds a short reference to it.
    pub fn max_inline_value_size(&self) -> usize {
        crate::btree::node::max_value_size(self.shared.bm.page_size())
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The page ids of every page access since the last call, in order, when the policy
    /// records them ([`ablations::Traced`](crate::ablations::Traced)); empty otherwise. Input
    /// for replacement-policy simulation. Feature `ablations`.
    #[cfg(feature = "ablations")]
    pub fn take_access_trace(&self) -> Vec<u64> {
        self.shared.bm.take_trace()
    }

    /// Flushes, then walks every tree on disk checking checksums, node structure, key order,
    /// fence keys and page ownership, and measuring how much room each tree takes
    /// ([`IntegrityReport::spaces`]). Run it while no writes are in flight.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
    /// db.open_tree("users")?.insert("ada", "lovelace")?;
    /// let report = db.check_integrity()?;
    /// assert!(report.is_ok(), "{report}"); // Display lists every problem found
    /// assert_eq!(report.trees, 2); // "users" and the catalog
    /// for space in &report.spaces {
    ///     // <catalog>: 1 pages, leaves 0% full / users: 1 pages, leaves 0% full
    ///     println!("{}: {} pages, leaves {:.0}% full", space.name, space.pages(), space.leaf_fill() * 100.0);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_integrity(&self) -> Result<IntegrityReport> {
        self.shared.flush()?;
        let bm = &self.shared.bm;
        let (page_count, free) = bm.page_allocation();
        let mut checker = Checker::new(bm.storage().as_ref(), bm.page_size(), page_count);
        checker.free_pages(&free);
        checker.tree("<catalog>", self.shared.catalog.root_page_id());
        for item in self.catalog().iter() {
            let (name, entry) = item?;
            let name = String::from_utf8_lossy(&name).into_owned();
            match catalog::decode_catalog_entry(&entry) {
                Some((root, _)) => checker.tree(&name, root),
                None => checker
                    .report
                    .problems
                    .push(format!("catalog entry of tree {name:?} is not a page id")),
            }
        }
        Ok(checker.finish())
    }

    /// The catalog as a tree handle (read-only use: names to root page ids).
    fn catalog(&self) -> Tree<P> {
        catalog::handle(&self.shared)
    }

    /// Writes everything and releases the directory. Handles still around return
    /// [`Error::Closed`]. Dropping a `Db` closes it too, but only `close` reports errors.
    pub fn close(self) -> Result<()> {
        self.shared.close()
    }
}

impl<P: Policy> Drop for Db<P> {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; `close` is the way to see them.
        let _ = self.shared.close();
    }
}

/// Creates `dir` if missing and takes its lock file, or reports who holds it.
fn lock_directory(dir: &Path) -> Result<File> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating the database directory", e))?;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("opening the lock file", e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::AlreadyOpen {
            path: dir.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("locking the database", e)),
    }
}
