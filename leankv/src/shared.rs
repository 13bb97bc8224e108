//! What every handle of one database shares: the buffer manager, the catalog, the trees
//! opened so far and the directory lock, with the operations that span them (flush, close,
//! writing the superblock), and the counted handle through which `Tree` and `Range` use one
//! tree. `Db`, `Tree` and `Range` hold them; none depends on another for them.
//!
//! With the write-ahead log, `flush` is a checkpoint: it begins with a checkpoint record,
//! writes every dirty page (each only once the log holding its changes is durable), syncs, and
//! then writes the superblock naming the checkpoint record, where the next recovery starts.
//! A background thread ([`crate::checkpoint`]) runs checkpoints as the log grows; those leave
//! out the pages changed since they began, which recovery from them rebuilds from the images
//! the log holds (see [`FlushPages::NotLoggedSince`]).
//!
//! Invariant: the superblock is written after the pages it describes (the free list included)
//! and synced with them; it never counts more pages than the file holds; it names a checkpoint
//! only once every page dirty at the checkpoint's start is written and synced, or changed
//! since the start, its image logged after it, and the log durable to its end.

use crate::batch::Durability;
use crate::btree::BTree;
use crate::buffer::policy::Policy;
use crate::buffer::{BufferManager, FlushPages};
use crate::error::{Error, Result};
use crate::io::superblock::{CheckpointRef, Superblock};
use crate::io::AlignedBuf;
use crate::key_count::KeyCounts;
use crate::wal::LogPosition;
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// How long a checkpoint blocks new batches while it waits for the batch gate, per try.
const GATE_TRY: std::time::Duration = std::time::Duration::from_millis(1);

pub(crate) struct DbShared<P: Policy> {
    pub(crate) path: PathBuf,
    pub(crate) bm: Arc<BufferManager<P>>,
    pub(crate) catalog: Arc<BTree<P>>,
    /// Every tree opened so far, by name; held while a root is attached or detached.
    pub(crate) trees: Mutex<HashMap<String, Arc<BTree<P>>>>,
    /// The directory's lock file while open; `None` once closed.
    pub(crate) lock: Mutex<Option<File>>,
    pub(crate) max_key_size: usize,
    pub(crate) max_value_size: usize,
    /// The default durability of commits.
    pub(crate) durability: Durability,
    /// Held shared by a batch from its first change to its commit record, exclusively while
    /// a checkpoint begins (see `crate::batch`). On cache lines of its own: every batch
    /// writes its word twice, and the fields every operation reads (`bm`, the size limits)
    /// would move between the cores with it.
    pub(crate) batch_gate: CachePadded<RwLock<()>>,
    /// Held by the running checkpoint: one at a time (the log keeps the last completed one).
    pub(crate) checkpointing: Mutex<()>,
    /// The log generation of this life of the database.
    pub(crate) generation: u32,
    /// Without a log: the log end recorded in the superblock, kept for a later open with one.
    pub(crate) log_end: u64,
    /// What the recovery at open did.
    pub(crate) recovery: crate::db::RecoveryStats,
    /// The checkpoint thread (with the log, until close).
    pub(crate) checkpointer: Mutex<Option<crate::checkpoint::Checkpointer>>,
    /// Every tree's key count (see `crate::key_count`).
    pub(crate) key_counts: KeyCounts,
}

impl<P: Policy> DbShared<P> {
    /// Called when the last handle of `tree` is gone: its root may leave the pool (unless a
    /// new handle came meanwhile). The catalog stays.
    pub(crate) fn release(&self, tree: &Arc<BTree<P>>) {
        if Arc::ptr_eq(tree, &self.catalog) {
            return;
        }
        let _trees = self.trees.lock();
        // A dropped tree's root frame may hold another page by now.
        if !tree.has_handles() && !tree.is_dropped() {
            tree.detach();
        }
    }

    /// Writes every dirty page, then the superblock (still marked open: eviction may write
    /// pages again before the close), and syncs. With the log, a checkpoint.
    pub(crate) fn flush(&self) -> Result<()> {
        crate::transaction::refuse_if_open(self)?;
        if self.bm.log().is_some() {
            return self.checkpoint(true, false);
        }
        self.save_key_counts()?;
        self.bm.flush(FlushPages::All)?;
        self.write_superblock(true, None)
    }

    /// Runs a checkpoint (see the module notes); `open` is the superblock's open mark. With
    /// `leave_logged`, it leaves the pages changed since it began to the log (see
    /// [`FlushPages::NotLoggedSince`]); else the page file holds every change made before it.
    pub(crate) fn checkpoint(&self, open: bool, leave_logged: bool) -> Result<()> {
        self.checkpoint_with(open, leave_logged, || {})
    }

    /// [`Self::checkpoint`], calling `began` once the checkpoint record is appended (tests
    /// change pages there).
    pub(crate) fn checkpoint_with(
        &self,
        open: bool,
        leave_logged: bool,
        began: impl FnOnce(),
    ) -> Result<()> {
        let log = self.bm.log().expect("checkpoints need the log");
        let _one_at_a_time = self.checkpointing.lock();
        let position = {
            let _no_batch_in_flight = self.exclusive_batch_gate();
            self.bm.begin_checkpoint(log, || self.key_counts.snapshot())
        };
        began();
        let pages = if leave_logged {
            FlushPages::NotLoggedSince(position.lsn)
        } else {
            FlushPages::All
        };
        self.bm.flush(pages)?;
        // The record the superblock will name must be durable first.
        log.wait_durable(log.end())?;
        self.write_superblock(open, Some(position))?;
        log.checkpoint_completed(position);
        Ok(())
    }

    /// The batch gate, exclusively. Waiting for it blocks new readers, so the wait is cut
    /// into short tries: a transaction's body that waits for another thread's batch (or a
    /// transaction on a second database) would otherwise wait for this checkpoint, which waits
    /// for that transaction. Between tries the readers blocked meanwhile get in.
    fn exclusive_batch_gate(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        loop {
            if let Some(gate) = self.batch_gate.try_write_for(GATE_TRY) {
                return gate;
            }
        }
    }

    /// Writes every known key count into its tree's catalog entry (where an open that replays
    /// no log finds them), unless it holds that count already.
    fn save_key_counts(&self) -> Result<()> {
        let catalog = &self.catalog;
        let mut entry = Vec::new();
        let mut updates = Vec::new();
        for (name, root) in self.catalog_roots()? {
            let Some(keys) = self.key_counts.get(root) else {
                continue;
            };
            let saved = crate::catalog::encode_catalog_entry(root, keys);
            if !catalog.lookup(&name, &mut entry)? || entry != saved {
                updates.push((name, saved));
            }
        }
        for (name, saved) in updates {
            catalog.insert(&name, &saved, 0, &mut Vec::new())?;
        }
        Ok(())
    }

    /// Every catalog entry's tree name and root page id.
    fn catalog_roots(&self) -> Result<Vec<(Vec<u8>, u64)>> {
        let mut roots = Vec::new();
        crate::range::scan_tree::<P, &[u8], _>(&self.catalog, .., |name, entry| {
            if let Some((root, _)) = crate::catalog::decode_catalog_entry(entry) {
                roots.push((name.to_vec(), root));
            }
            true
        })?;
        Ok(roots)
    }

    /// Waits, before a write latches anything, while checkpoints lag far behind the log; fails
    /// if the last checkpoint failed meanwhile, or if this thread has a transaction open on
    /// this database (whose gate the checkpoint may be waiting for).
    pub(crate) fn admit(&self) -> Result<()> {
        crate::transaction::refuse_if_open(self)?;
        match self.bm.log() {
            Some(log) => log.admit(),
            None => Ok(()),
        }
    }

    /// Makes the commit whose log record ends at `lsn` (0: it wrote none) as durable as
    /// `durability` says. After
    /// the log failed (a write or sync error), every commit fails: none could become durable.
    pub(crate) fn commit_durability(&self, lsn: u64, durability: Durability) -> Result<()> {
        let Some(log) = self.bm.log() else {
            return Ok(());
        };
        // A commit that wrote no record (it changed nothing) still follows every commit
        // before it: it is durable once they are.
        let lsn = if lsn == 0 { log.end() } else { lsn };
        match durability {
            Durability::Immediate => log.wait_durable(lsn),
            Durability::Eventual => log.sync_eventually(),
            Durability::None => log.check_healthy(),
        }
    }

    /// Writes and syncs the superblock, with the open mark `open`, naming `checkpoint`. The
    /// free-page list goes to disk only when no checkpoint is named (without a log, or at a
    /// clean close); with one, the checkpoint record holds it.
    fn write_superblock(&self, open: bool, checkpoint: Option<LogPosition>) -> Result<()> {
        let storage = self.bm.storage().as_ref();
        let page_size = self.bm.page_size();
        let (page_count, free_list_head, free_list_len) =
            self.bm.with_page_allocation(|page_count, free| {
                if checkpoint.is_some() {
                    return Ok((page_count, 0, 0));
                }
                let head = crate::buffer::save_free_list(storage, page_size, free)?;
                Ok((page_count, head, free.len() as u64))
            })?;
        // Pages allocated and freed before ever being written lie beyond the end of the file;
        // the superblock counts them, so the file must hold them (a shorter file is truncated).
        storage
            .extend_to(page_count * page_size as u64)
            .map_err(|e| Error::io("extending the page file", e))?;
        let mut page = AlignedBuf::new(page_size);
        Superblock {
            version: crate::io::superblock::FORMAT_VERSION,
            page_size: page_size as u32,
            catalog_root: self.catalog.root_page_id(),
            page_count,
            free_list_head,
            free_list_len,
            open,
            checkpoint: checkpoint.map(|position| CheckpointRef {
                file: position.file as u8,
                offset: position.offset,
                lsn: position.lsn,
            }),
            generation: self.generation,
            log_end: self.bm.log().map_or(self.log_end, |log| log.end()),
        }
        .encode(&mut page);
        storage
            .write_at(&page, 0)
            .and_then(|()| storage.sync())
            .map_err(|e| Error::io("writing the superblock", e))
    }

    pub(crate) fn close(&self) -> Result<()> {
        let mut lock = self.lock.lock();
        if lock.is_none() {
            return Ok(());
        }
        // Dropped outside the mutex: the thread may be in a checkpoint that takes it.
        let checkpointer = self.checkpointer.lock().take();
        drop(checkpointer);
        // The next open, which replays no log, reads them from the catalog.
        self.save_key_counts()?;
        self.bm.shut_down()?;
        // Only now is the file complete: no eviction can write a page any more.
        // A clean close leaves a page file that needs no log: complete, with its free list,
        // and the log's end (where the next life's log starts).
        if let Some(log) = self.bm.log() {
            log.shut_down()?;
        }
        self.write_superblock(false, None)?;
        // The blocks the page file allocated ahead of new pages (see `FileStorage::open`) are
        // released: a closed database's file holds its pages, no more.
        let page_count = self.bm.with_page_allocation(|page_count, _| page_count);
        self.bm
            .storage()
            .shrink_to(page_count * self.bm.page_size() as u64)
            .map_err(|e| {
                Error::io(
                    "shrinking the page file (the database itself closed cleanly)",
                    e,
                )
            })?;
        // Most of the log's disk use ends with it (a clean open starts a fresh log). Shrunk
        // before the directory lock goes, so that no other open has begun writing to it.
        let shrunk = self.bm.log().map_or(Ok(()), |log| log.shrink_files());
        *lock = None;
        shrunk
    }
}

/// One use of an open tree: a `Tree` or a `Range` over it. While any exists, the tree's root
/// stays in the pool; when the last goes, the root may leave it (see `BTree::attach`).
pub(crate) struct TreeHandle<P: Policy> {
    pub(crate) db: Arc<DbShared<P>>,
    pub(crate) tree: Arc<BTree<P>>,
    /// The tree's name (`<catalog>` for the catalog), for `Debug` output.
    pub(crate) name: Arc<str>,
}

impl<P: Policy> TreeHandle<P> {
    pub(crate) fn new(db: Arc<DbShared<P>>, tree: Arc<BTree<P>>, name: Arc<str>) -> Self {
        tree.add_handle();
        TreeHandle { db, tree, name }
    }
}

impl<P: Policy> Clone for TreeHandle<P> {
    fn clone(&self) -> Self {
        TreeHandle::new(self.db.clone(), self.tree.clone(), self.name.clone())
    }
}

impl<P: Policy> Drop for TreeHandle<P> {
    fn drop(&mut self) {
        if self.tree.drop_handle() {
            self.db.release(&self.tree);
        }
    }
}
