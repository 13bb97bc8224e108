//! Opening a database: the superblock, recovery from the write-ahead log, the buffer manager,
//! the catalog, and the first checkpoint of this life.
//!
//! With the log, every open of an existing database runs recovery from the checkpoint the
//! superblock names (after a clean close that is one checkpoint record and nothing to redo).
//! Redo rebuilds the pages and the page allocation ([`crate::recovery`]); then the database
//! opens on them, frees the roots of trees whose creation a crash cut short, rolls back the
//! batches that never committed through ordinary logged operations, finishes the range
//! removals that never committed, and takes a checkpoint.
//! A crash at any point of this is recovered the same way at the next open.
//!
//! Invariants: nothing is appended to the log before the generation of this life is above
//! every earlier one's; a database that needs its log replayed is never opened without it.

use crate::blob::{BlobChanges, BlobRef};
use crate::btree::{self, BTree};
use crate::buffer::policy::Policy;
use crate::buffer::{BufferManager, PageKind};
use crate::checkpoint::Checkpointer;
use crate::db::RecoveryStats;
use crate::error::{Error, Result};
use crate::io::superblock::{
    Superblock, SuperblockError, SUPERBLOCK_SIZE, WRITES_END_AT_SYNC_MARKS,
};
use crate::io::{AlignedBuf, Storage};
use crate::key_count::KeyCounts;
use crate::options::Options;
use crate::recovery::{self, Restore, Undo};
use crate::shared::DbShared;
use crate::wal::{Log, LogConfig, LogEnd, LogEnding, LogPosition, RangeRemoval, Tail, MAX_LSN};
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// The page file's name in a database directory (benchmarks measure the device on it).
pub const PAGE_FILE: &str = "leankv.pages";
/// The log files' names in a database directory.
pub(crate) const LOG_FILES: [&str; 2] = ["leankv.wal-0", "leankv.wal-1"];
/// The frames of the `Mmap` baseline policy, mapped from this file.
const POOL_FILE: &str = "pool.mmap";
/// Where a brand-new log starts (an LSN of 0 means "never logged" on a page).
const FIRST_LSN: u64 = 4096;

/// The storage a database lives in.
pub(crate) struct Files {
    pub(crate) pages: Arc<dyn Storage>,
    pub(crate) logs: [Arc<dyn Storage>; 2],
}

impl Files {
    /// The page file `pages` with logs in memory (tests of the page file alone).
    #[cfg(feature = "testing")]
    pub(crate) fn pages_only(pages: Arc<dyn Storage>) -> Files {
        use crate::io::MemoryStorage;
        Files {
            pages,
            logs: [
                Arc::new(MemoryStorage::new()),
                Arc::new(MemoryStorage::new()),
            ],
        }
    }
}

/// What recovery leaves for the open database to finish.
#[derive(Default)]
struct Unfinished {
    undo: Vec<Undo>,
    new_trees: Vec<u64>,
    range_removals: Vec<RangeRemoval>,
}

pub(crate) fn open<P: Policy>(
    dir: &Path,
    lock: File,
    options: Options,
    files: Files,
) -> Result<Arc<DbShared<P>>> {
    let Files {
        pages: storage,
        logs,
    } = files;
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
    let superblock = if is_new {
        None
    } else {
        Some(read_superblock(storage.as_ref(), &page_file)?)
    };
    let page_size = superblock.map_or(options.page_size, |sb| sb.page_size as usize);
    let mut config = options.validate(page_size)?;
    if P::POOL_IN_FILE {
        config.pool_file = Some(dir.join(POOL_FILE));
    }
    let log_config = LogConfig {
        eventual_delay: options.eventual_delay,
        checkpoint_bytes: options.checkpoint_bytes(),
        buffer_bytes: options.log_buffer_bytes(),
        zeroed_ahead: crate::wal::zeroed_ahead(options.checkpoint_bytes()),
        thread_regions: options.durability != crate::Durability::Immediate,
    };
    let started = std::time::Instant::now();
    let mut unfinished = Unfinished::default();
    let mut recovery_stats = RecoveryStats::default();
    // Where the trees' key counts come from: a new database has none, recovery rebuilds them
    // from the log, a clean open reads them from the catalog (see `crate::key_count`).
    let mut counts_in_catalog = false;
    let (page_count, free, log, generation, log_end, key_counts) = match superblock {
        None => {
            let log = options
                .write_ahead_log
                .then(|| fresh_log(logs, storage.clone(), log_config, FIRST_LSN, 1))
                .transpose()?;
            let key_counts = KeyCounts::recovered(Some(HashMap::new()));
            (1, Vec::new(), log, 1, FIRST_LSN, key_counts)
        }
        Some(sb) if sb.checkpoint.is_some() && options.write_ahead_log => {
            let checkpoint = sb.checkpoint.expect("matched");
            let start = LogPosition {
                file: usize::from(checkpoint.file),
                offset: checkpoint.offset,
                lsn: checkpoint.lsn,
            };
            let ending = if sb.version >= WRITES_END_AT_SYNC_MARKS {
                LogEnding::LastSyncMark
            } else {
                LogEnding::LastFrame
            };
            let (redone, read) = recovery::recover(
                storage.as_ref(),
                &logs,
                start,
                ending,
                page_size,
                config.frames as usize * page_size,
            )?;
            recovery_stats.log_bytes = read.end.lsn - start.lsn;
            recovery_stats.records = read.records;
            recovery_stats.pages = redone.pages as u64;
            recovery_stats.pages_written_early = redone.pages_spilled;
            recovery_stats.batches_rolled_back = redone.batches_rolled_back as u64;
            recovery_stats.range_removals_finished = redone.range_removals.len() as u64;
            recovery_stats.duration = started.elapsed();
            let generation = next_generation(sb.generation.max(read.generation))?;
            let log = Log::start(
                logs,
                storage.clone(),
                log_config,
                read.end,
                start,
                generation,
            )?;
            unfinished = Unfinished {
                undo: redone.undo,
                new_trees: redone.new_trees,
                range_removals: redone.range_removals,
            };
            let key_counts = KeyCounts::recovered(redone.key_counts);
            (
                redone.page_count,
                redone.free,
                Some(log),
                generation,
                0,
                key_counts,
            )
        }
        Some(sb) => {
            if sb.open && sb.checkpoint.is_some() {
                return Err(Error::InvalidOptions(
                    "the database was not closed cleanly and its write-ahead log must be \
                     replayed: open it with the log on (Options::write_ahead_log(true))"
                        .into(),
                ));
            }
            if sb.open && !options.open_after_crash {
                return Err(Error::NotClosedCleanly {
                    path: dir.to_path_buf(),
                });
            }
            check_length(storage.as_ref(), &sb)?;
            let free = crate::buffer::load_free_list(
                storage.as_ref(),
                page_size,
                sb.free_list_head,
                sb.free_list_len,
                sb.page_count,
            )?;
            let generation = next_generation(sb.generation)?;
            if sb.log_end > MAX_LSN {
                return Err(Error::corruption(0, "superblock: log end out of range"));
            }
            let start = sb.log_end.max(FIRST_LSN).next_multiple_of(4096);
            let log = options
                .write_ahead_log
                .then(|| fresh_log(logs, storage.clone(), log_config, start, generation))
                .transpose()?;
            // After a crash without the log the saved counts may be stale: count again.
            counts_in_catalog = !sb.open;
            let key_counts = KeyCounts::recovered(None);
            (sb.page_count, free, log, generation, sb.log_end, key_counts)
        }
    };
    config.generation = generation;
    let kinds: [PageKind; 2] = btree::page_kinds();
    let bm = BufferManager::new(
        storage,
        &config,
        &kinds,
        page_count,
        free,
        log.map(Arc::new),
    )?;
    let catalog = match superblock {
        None => BTree::create(&bm, &key_counts),
        Some(sb) => BTree::open(&bm, sb.catalog_root, &key_counts),
    }
    .inspect_err(|_| bm.stop_threads())?;
    let shared = Arc::new(DbShared {
        path: dir.to_path_buf(),
        bm: bm.clone(),
        catalog: Arc::new(catalog),
        trees: Mutex::new(HashMap::new()),
        lock: Mutex::new(Some(lock)),
        max_key_size: btree::node::max_key_size(page_size),
        max_value_size: crate::MAX_VALUE_SIZE,
        durability: options.durability,
        batch_gate: CachePadded::new(RwLock::new(())),
        checkpointing: Mutex::new(()),
        generation,
        log_end,
        recovery: recovery_stats,
        checkpointer: Mutex::new(None),
        key_counts,
    });
    let finish = || -> Result<()> {
        if counts_in_catalog {
            for (_, root, keys) in crate::catalog::catalog_entries(&shared)? {
                if let Some(keys) = keys {
                    shared.key_counts.of(root).set_counted(keys);
                }
            }
        }
        finish_recovery(&shared, unfinished)?;
        // Marks the file open (and, when new, writes it whole; with the log, the first
        // checkpoint of this life): a crash from here on is seen at the next open.
        shared.flush()?;
        if let Some(log) = shared.bm.log() {
            *shared.checkpointer.lock() = Some(
                Checkpointer::start(&shared, log.checkpoint_due())
                    .map_err(|e| Error::io("starting the checkpoint thread", e))?,
            );
        }
        Ok(())
    };
    finish().inspect_err(|_| {
        bm.stop_threads();
        if let Some(log) = bm.log() {
            let _ = log.shut_down();
        }
    })?;
    Ok(shared)
}

/// The generation after `generation`; only a damaged file has none.
fn next_generation(generation: u32) -> Result<u32> {
    generation
        .checked_add(1)
        .ok_or_else(|| Error::corruption(0, "log generation at its maximum"))
}

/// Starts a log with nothing to recover: its first checkpoint goes to file 0 at offset 0.
fn fresh_log(
    logs: [Arc<dyn Storage>; 2],
    data_file: Arc<dyn Storage>,
    config: LogConfig,
    lsn: u64,
    generation: u32,
) -> Result<Log> {
    let end = LogEnd {
        file: 0,
        offset: 0,
        lsn,
        tail: Tail::default(),
    };
    // "The last checkpoint is in the other file": the first one stays in file 0.
    let previous = LogPosition {
        file: 1,
        offset: 0,
        lsn,
    };
    Log::start(logs, data_file, config, end, previous, generation)
}

/// Frees the roots of trees created without a surviving catalog entry, rolls back the
/// batches that never committed, then finishes the range removals that never committed.
fn finish_recovery<P: Policy>(shared: &Arc<DbShared<P>>, unfinished: Unfinished) -> Result<()> {
    if unfinished.undo.is_empty()
        && unfinished.new_trees.is_empty()
        && unfinished.range_removals.is_empty()
    {
        return Ok(());
    }
    let mut roots = HashMap::new();
    let catalog = &shared.catalog;
    for (name, root, _) in crate::catalog::catalog_entries(shared)? {
        roots.insert(root, name);
    }
    for root in unfinished.new_trees {
        // A tree whose drop lost its catalog entry is freed by the drop's roll forward.
        let dropping = unfinished
            .range_removals
            .iter()
            .any(|removal| removal.drop && removal.tree == root);
        if !roots.contains_key(&root) && root != catalog.root_page_id() && !dropping {
            shared.bm.free_unreferenced(root);
        }
    }
    let mut trees: HashMap<u64, Arc<BTree<P>>> = HashMap::new();
    trees.insert(catalog.root_page_id(), catalog.clone());
    // The tree with root page `root`, opened by its catalog name (or, for a tree being
    // dropped, which may have lost its entry already, by its root).
    let mut tree_of = |root: u64, dropping: bool| -> Result<Arc<BTree<P>>> {
        if let Some(tree) = trees.get(&root) {
            return Ok(tree.clone());
        }
        let tree = match roots.get(&root) {
            Some(name) => crate::catalog::open_named_tree(shared, name)?,
            None if dropping => Arc::new(BTree::open(&shared.bm, root, &shared.key_counts)?),
            None => {
                return Err(Error::corruption(
                    root,
                    "write-ahead log: a change to a tree the catalog does not name",
                ))
            }
        };
        trees.insert(root, tree.clone());
        Ok(tree)
    };
    // The undo is one batch: it replaces the large values the rolled-back changes wrote and
    // puts back those they replaced, and its commit frees what ends up unreferenced.
    let undo_batch = shared.bm.log().map_or(0, |log| log.next_batch());
    let mut blobs = BlobChanges::default();
    let page_size = shared.bm.page_size();
    let decode = |reference: &[u8]| {
        BlobRef::decode(reference, page_size).map_err(|reason| Error::corruption(0, reason))
    };
    let undone = !unfinished.undo.is_empty();
    // What an undo replaced.
    let mut values = Vec::new();
    for undo in unfinished.undo {
        let tree = tree_of(undo.tree, false)?;
        let mut put_back = None;
        values.clear();
        let replaced = match &undo.before {
            Restore::Value(value) => {
                tree.insert(&undo.key, value, undo_batch, &mut values)?
                    .before
            }
            Restore::Blob(reference) => {
                let stored = btree::stored_blob(reference);
                put_back = Some(decode(reference)?);
                tree.insert_stored(&undo.key, stored, None, undo_batch, &mut values)?
                    .before
            }
            Restore::Absent => tree
                .remove(&undo.key, undo_batch, &mut values)?
                .and_then(|written| written.before),
            Restore::Ranges(ranges) => {
                // The value is the patched one (later changes were undone first): put the old
                // bytes back in place.
                let mut value = Vec::new();
                let restored = tree.update(
                    &undo.key,
                    &mut value,
                    |bytes| {
                        let fits = ranges
                            .iter()
                            .all(|(offset, old)| offset + old.len() <= bytes.len());
                        for (offset, old) in ranges.iter().filter(|_| fits) {
                            bytes[*offset..offset + old.len()].copy_from_slice(old);
                        }
                        fits
                    },
                    0,
                    &mut Vec::new(),
                )?;
                if !matches!(restored, Some((true, _))) {
                    return Err(Error::corruption(
                        undo.tree,
                        "write-ahead log: a batch's patch to undo does not match its value",
                    ));
                }
                None
            }
        };
        let replaced = replaced.map(|replaced| replaced.stored(&values));
        if let Some(blob) = replaced.and_then(|value| value.large_value(page_size)) {
            blobs.dropped(blob);
        }
        if let Some(blob) = put_back {
            blobs.put(blob);
        }
    }
    if let (Some(_), true) = (shared.bm.log(), undone) {
        shared.bm.commit(undo_batch, &blobs.unreferenced());
    }
    for removal in unfinished.range_removals {
        let tree = tree_of(removal.tree, removal.drop)?;
        let dropped = removal.drop.then_some(removal.tree);
        crate::batch::finish_range_removal(shared, &tree, removal)?;
        if let Some(root) = dropped {
            tree.mark_dropped();
            shared
                .trees
                .lock()
                .retain(|_, tree| tree.root_page_id() != root);
        }
    }
    Ok(())
}

fn check_length(storage: &dyn Storage, superblock: &Superblock) -> Result<()> {
    let page_size = superblock.page_size as usize;
    let length = storage
        .len()
        .map_err(|e| Error::io("reading the page file size", e))?;
    // The superblock's check bounds the product.
    if length < superblock.page_count * page_size as u64 {
        return Err(Error::corruption(
            0,
            format!(
                "page file has {length} bytes, the superblock records {} pages of {page_size}",
                superblock.page_count
            ),
        ));
    }
    Ok(())
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
