//! The database: options, open/close, the catalog of named trees, statistics.
//!
//! A database is a directory holding the page file (`leankv.pages`) and a lock file (`LOCK`,
//! held with an exclusive advisory lock while open). Page 0 of the page file is the superblock;
//! the catalog is a B-tree mapping tree names to the page id of their root, which never
//! changes. Close (and drop) writes every dirty page, the free-page list and the superblock.
//!
//! Crash safety is not provided yet: it comes with the write-ahead log. Until then a crash may
//! lose every change since the last `flush`/`close`, and pages written by eviction between two
//! flushes may leave the file inconsistent (detected at read time as corruption, never
//! returned as data).

use crate::btree::check::{Checker, IntegrityReport};
use crate::btree::{self, BTree};
use crate::buffer::policy::{Lean, Policy};
use crate::buffer::{BufferConfig, BufferManager, Counter, FRAME_HEADER_AREA};
use crate::error::{Error, Result};
use crate::io::superblock::{Superblock, SuperblockError, SUPERBLOCK_SIZE};
use crate::io::{AlignedBuf, FileStorage, IoMode, Storage};
use crate::tree::Tree;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Default page size: 16 KiB, as in the LeanStore paper. Large enough for keys of 1 KiB and
/// values of 4 KiB with room for several per leaf, small enough that a random read of one
/// page costs little more than the device's minimum I/O.
pub const DEFAULT_PAGE_SIZE: usize = 16 * 1024;
/// Longest key with the default page size (page size / 16).
pub const MAX_KEY_SIZE: usize = DEFAULT_PAGE_SIZE / 16;
/// Longest value with the default page size (page size / 4).
pub const MAX_VALUE_SIZE: usize = DEFAULT_PAGE_SIZE / 4;
/// Leaves a scan reads ahead at most, by default (512 KiB with 16 KiB pages).
pub const DEFAULT_SCAN_PREFETCH: usize = 32;
/// Smallest pool, in frames, that can hold a root-to-leaf path for a few threads, the tree
/// roots and a cooling stage.
pub const MIN_POOL_FRAMES: usize = 24;

const PAGE_FILE: &str = "leankv.pages";
const LOCK_FILE: &str = "LOCK";
/// The frames of the `Mmap` baseline policy, mapped from this file.
const POOL_FILE: &str = "pool.mmap";

pub(crate) fn valid_page_size(page_size: usize) -> bool {
    page_size.is_power_of_two() && (4096..=65536).contains(&page_size)
}

/// How to open a database. Build with [`Options::default`] and the setters.
///
/// Each pool frame takes one page plus a 512-byte header.
///
/// ```
/// let options = leankv::Options::default()
///     .pool_size(64 << 20)
///     .cooling_fraction(0.1);
/// assert_eq!(options.frames(), (64 << 20) / (16384 + 512));
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    pool_size: usize,
    page_size: usize,
    cooling_fraction: f64,
    direct_io: bool,
    prefault: bool,
    background_writer: bool,
    scan_prefetch: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool_size: 1 << 30,
            page_size: DEFAULT_PAGE_SIZE,
            cooling_fraction: 0.1,
            direct_io: true,
            prefault: false,
            background_writer: true,
            scan_prefetch: DEFAULT_SCAN_PREFETCH,
        }
    }
}

impl Options {
    /// Memory for the buffer pool in bytes (default 1 GiB). This is the engine's memory budget:
    /// pages beyond it live on disk. Memory is only used as pages are loaded, unless
    /// [`prefault`](Self::prefault) is set.
    pub fn pool_size(mut self, bytes: usize) -> Self {
        self.pool_size = bytes;
        self
    }

    /// Page size for a *new* database: a power of two from 4 KiB to 64 KiB (default 16 KiB).
    /// An existing database keeps the page size it was created with. Key and value limits
    /// scale with it (page size / 16 and / 4).
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// Fraction of the pool kept in the cooling stage once it is full (default 0.1; the paper
    /// finds 5–20% all good). Must lie in (0, 0.5].
    pub fn cooling_fraction(mut self, fraction: f64) -> Self {
        self.cooling_fraction = fraction;
        self
    }

    /// Bypass the OS page cache with `O_DIRECT` where the file system supports it (default
    /// on); `Stats::io_mode` tells what is in use.
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }

    /// Touch the whole pool at open, so no page fault of the OS happens later (default off).
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }

    /// Run a background thread that writes dirty pages ahead of eviction (default on).
    pub fn background_writer(mut self, on: bool) -> Self {
        self.background_writer = on;
        self
    }

    /// Most leaves a range scan reads ahead once it runs through pages that are not in memory
    /// (default 32; 0 turns read-ahead off). A scan starts with 2 and doubles the distance
    /// with every leaf it crosses, so short scans do not read pages they never use.
    pub fn scan_prefetch(mut self, leaves: usize) -> Self {
        self.scan_prefetch = leaves;
        self
    }

    /// Frames the pool will have with the configured page size.
    pub fn frames(&self) -> usize {
        self.pool_size / (FRAME_HEADER_AREA + self.page_size)
    }

    fn validate(&self, page_size: usize) -> Result<BufferConfig> {
        if !valid_page_size(self.page_size) {
            return Err(Error::InvalidOptions(format!(
                "page size {} is not a power of two between 4096 and 65536",
                self.page_size
            )));
        }
        if !(self.cooling_fraction > 0.0 && self.cooling_fraction <= 0.5) {
            return Err(Error::InvalidOptions(format!(
                "cooling fraction {} is not in (0, 0.5]",
                self.cooling_fraction
            )));
        }
        let frames = self.pool_size / (FRAME_HEADER_AREA + page_size);
        if frames < MIN_POOL_FRAMES {
            return Err(Error::InvalidOptions(format!(
                "pool of {} bytes holds {frames} frames of {page_size}-byte pages; at least \
                 {MIN_POOL_FRAMES} are needed for root-to-leaf paths and the cooling stage",
                self.pool_size
            )));
        }
        let frames = u32::try_from(frames).map_err(|_| {
            Error::InvalidOptions(format!("pool of {} bytes is too large", self.pool_size))
        })?;
        Ok(BufferConfig {
            page_size,
            frames,
            cooling_fraction: self.cooling_fraction,
            prefault: self.prefault,
            background_writer: self.background_writer,
            pool_file: None,
            prefetch_depth: self.scan_prefetch,
        })
    }
}

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
    /// Pages read ahead of range scans (part of `page_reads`).
    pub prefetch_reads: u64,
    /// Leaves range scans brought in and put straight back into the cooling stage, so that
    /// large scans do not push the hot working set out.
    pub scan_cooled: u64,
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
/// The type parameter picks the buffer-management [`policy`](crate::policy); it exists for
/// the benchmarks' ablations and baselines, and defaults to the engine itself, [`Lean`].
pub struct Db<P: Policy = Lean> {
    shared: Arc<DbShared<P>>,
}

pub(crate) struct DbShared<P: Policy> {
    path: PathBuf,
    bm: Arc<BufferManager<P>>,
    catalog: Arc<BTree<P>>,
    trees: Mutex<HashMap<String, Arc<BTree<P>>>>,
    lock: Mutex<Option<File>>,
    pub(crate) max_key_size: usize,
    pub(crate) max_value_size: usize,
}

impl Db {
    /// Opens the database in directory `dir`, creating the directory and an empty database if
    /// missing.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_with_policy(dir, options)
    }

    /// Opens a database whose pages live in `storage` (for instance a
    /// [`FaultyStorage`](crate::io::FaultyStorage) in tests); `dir` only holds the lock file.
    pub fn open_with_storage(
        dir: impl AsRef<Path>,
        options: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Db> {
        Db::open_with_storage_and_policy(dir, options, storage)
    }
}

impl<P: Policy> Db<P> {
    /// [`Db::open`] with buffer-management policy `P`, e.g.
    /// `Db::<leankv::policy::Traditional>::open_with_policy(dir, options)`.
    pub fn open_with_policy(dir: impl AsRef<Path>, options: Options) -> Result<Db<P>> {
        let dir = dir.as_ref();
        let lock = lock_directory(dir)?;
        let storage = FileStorage::open(&dir.join(PAGE_FILE), options.direct_io)
            .map_err(|e| Error::io("opening the page file", e))?;
        Self::open_locked(dir, lock, options, Arc::new(storage))
    }

    /// [`Db::open_with_storage`] with buffer-management policy `P`.
    pub fn open_with_storage_and_policy(
        dir: impl AsRef<Path>,
        options: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Db<P>> {
        let dir = dir.as_ref();
        let lock = lock_directory(dir)?;
        Self::open_locked(dir, lock, options, storage)
    }

    fn open_locked(
        dir: &Path,
        lock: File,
        options: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Db<P>> {
        let page_file = dir.join(PAGE_FILE);
        let is_new = storage
            .is_empty()
            .map_err(|e| Error::io("reading the page file size", e))?;
        if !P::EVICTS && !is_new {
            return Err(Error::InvalidOptions(format!(
                "the {} policy keeps every page in memory and only creates new databases",
                P::NAME
            )));
        }
        let iterators = btree::child_iterators();
        let (bm, catalog) = if is_new {
            let mut config = options.validate(options.page_size)?;
            if P::POOL_IN_FILE {
                config.pool_file = Some(dir.join(POOL_FILE));
            }
            let bm = BufferManager::new(storage, &config, &iterators, 1, Vec::new())?;
            let catalog = BTree::create(&bm)?;
            (bm, catalog)
        } else {
            let superblock = read_superblock(storage.as_ref(), &page_file)?;
            let page_size = superblock.page_size as usize;
            let length = storage
                .len()
                .map_err(|e| Error::io("reading the page file size", e))?;
            if length < superblock.page_count * page_size as u64 {
                return Err(Error::corruption(
                    0,
                    format!(
                        "page file has {length} bytes, the superblock records {} pages of {page_size}",
                        superblock.page_count
                    ),
                ));
            }
            let config = options.validate(page_size)?;
            let free = crate::buffer::load_free_list(
                storage.as_ref(),
                page_size,
                superblock.free_list_head,
                superblock.free_list_len,
                superblock.page_count,
            )?;
            let bm = BufferManager::new(storage, &config, &iterators, superblock.page_count, free)?;
            let catalog = BTree::open(&bm, superblock.catalog_root)?;
            (bm, catalog)
        };
        let page_size = bm.page_size();
        let shared = Arc::new(DbShared {
            path: dir.to_path_buf(),
            bm,
            catalog: Arc::new(catalog),
            trees: Mutex::new(HashMap::new()),
            lock: Mutex::new(Some(lock)),
            max_key_size: page_size / 16,
            max_value_size: page_size / 4,
        });
        if is_new {
            shared.flush()?;
        }
        Ok(Db { shared })
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
        let mut trees = shared.trees.lock();
        if let Some(tree) = trees.get(name) {
            return Ok(Tree::new(shared.clone(), tree.clone()));
        }
        let mut root = Vec::new();
        let tree = if shared.catalog.lookup(name.as_bytes(), &mut root)? {
            let root = <[u8; 8]>::try_from(root.as_slice()).map_err(|_| {
                Error::corruption(
                    shared.catalog.root_page_id(),
                    format!("catalog entry of tree {name:?} is not a page id"),
                )
            })?;
            BTree::open(&shared.bm, u64::from_le_bytes(root))?
        } else {
            let tree = BTree::create(&shared.bm)?;
            shared
                .catalog
                .insert(name.as_bytes(), &tree.root_page_id().to_le_bytes())?;
            tree
        };
        let tree = Arc::new(tree);
        trees.insert(name.to_string(), tree.clone());
        Ok(Tree::new(shared.clone(), tree))
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

    /// Writes every dirty page, the free-page list and the superblock, and syncs.
    pub fn flush(&self) -> Result<()> {
        self.shared.flush()
    }

    /// Current counters and facts.
    pub fn stats(&self) -> Stats {
        let bm = &self.shared.bm;
        let counters = bm.counters();
        let count = |counter: Counter| counters[counter as usize];
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
            io_mode: bm.io_mode(),
            page_size: bm.page_size(),
            pool_frames: bm.frame_count() as usize,
            frames_in_use: bm.frames_in_use(),
            page_count: bm.page_allocation().0,
        }
    }

    /// Longest key this database accepts.
    pub fn max_key_size(&self) -> usize {
        self.shared.max_key_size
    }

    /// Longest value this database accepts.
    pub fn max_value_size(&self) -> usize {
        self.shared.max_value_size
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The page ids of every page access since the last call, in order, when the policy
    /// records them ([`policy::Traced`](crate::policy::Traced)); empty otherwise. Input for
    /// replacement-policy simulation.
    pub fn take_access_trace(&self) -> Vec<u64> {
        self.shared.bm.take_trace()
    }

    /// Flushes, then walks every tree on disk checking checksums, node structure, key order,
    /// fence keys and page ownership. Run it while no writes are in flight.
    pub fn check_integrity(&self) -> Result<IntegrityReport> {
        self.shared.flush()?;
        let bm = &self.shared.bm;
        let (page_count, free) = bm.page_allocation();
        let mut checker = Checker::new(bm.storage().as_ref(), bm.page_size(), page_count);
        checker.free_pages(&free);
        checker.tree("<catalog>", self.shared.catalog.root_page_id());
        for item in self.catalog().iter() {
            let (name, root) = item?;
            let name = String::from_utf8_lossy(&name).into_owned();
            match <[u8; 8]>::try_from(root.as_slice()) {
                Ok(root) => checker.tree(&name, u64::from_le_bytes(root)),
                Err(_) => checker
                    .report
                    .problems
                    .push(format!("catalog entry of tree {name:?} is not a page id")),
            }
        }
        Ok(checker.finish())
    }

    /// The catalog as a tree handle (read-only use: names to root page ids).
    fn catalog(&self) -> Tree<P> {
        Tree::new(self.shared.clone(), self.shared.catalog.clone())
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

impl<P: Policy> DbShared<P> {
    fn flush(&self) -> Result<()> {
        self.bm.flush()?;
        self.write_superblock()
    }

    fn write_superblock(&self) -> Result<()> {
        let storage = self.bm.storage().as_ref();
        let page_size = self.bm.page_size();
        let (page_count, free) = self.bm.page_allocation();
        let free_list_head = crate::buffer::save_free_list(storage, page_size, &free)?;
        let mut page = AlignedBuf::new(page_size);
        Superblock {
            page_size: page_size as u32,
            catalog_root: self.catalog.root_page_id(),
            page_count,
            free_list_head,
            free_list_len: free.len() as u64,
        }
        .encode(&mut page);
        storage
            .write_at(&page, 0)
            .and_then(|()| storage.sync())
            .map_err(|e| Error::io("writing the superblock", e))
    }

    fn close(&self) -> Result<()> {
        let mut lock = self.lock.lock();
        if lock.is_none() {
            return Ok(());
        }
        self.bm.shut_down()?;
        self.write_superblock()?;
        *lock = None;
        Ok(())
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

fn read_superblock(storage: &dyn Storage, page_file: &Path) -> Result<Superblock> {
    let mut bytes = AlignedBuf::new(SUPERBLOCK_SIZE);
    if storage
        .len()
        .map_err(|e| Error::io("reading the page file size", e))?
        < SUPERBLOCK_SIZE as u64
    {
        return Err(Error::NotADatabase {
            path: page_file.to_path_buf(),
            reason: "file shorter than a superblock".into(),
        });
    }
    storage
        .read_at(&mut bytes, 0)
        .map_err(|e| Error::io("reading the superblock", e))?;
    Superblock::decode(&bytes).map_err(|error| match error {
        SuperblockError::Foreign(reason) => Error::NotADatabase {
            path: page_file.to_path_buf(),
            reason,
        },
        SuperblockError::Damaged(reason) => Error::corruption(0, reason),
    })
}
