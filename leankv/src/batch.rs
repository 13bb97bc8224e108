//! Atomic write batches and durability levels: what a commit promises.
//!
//! A batch's changes are applied one by one, each logged with the value it replaced and its
//! batch id, and then a commit record is appended. After a crash, recovery rolls back every
//! batch whose commit record did not survive, so a batch is entirely present or entirely
//! absent; the commit order is the order of the commit records, and recovery keeps a prefix of
//! it. Single operations (`Tree::insert`, `Tree::remove`) are batches of one whose record is
//! their own commit.
//!
//! A range removal (`Tree::remove_range`) is committed the same way, by a commit record after
//! its steps, but a crash before it is rolled forward instead of back: its start record names
//! the range, and recovery finishes it from where its last step reached. Dropping a tree
//! (`Db::drop_tree`) is a range removal over all its keys that then removes the catalog entry
//! and frees the root (its last step), rolled forward the same way.
//!
//! A batch that fails halfway (an I/O error, a tree dropped meanwhile) is rolled back at once:
//! what it replaced is restored by more changes of the same batch, last first, which is then
//! committed (it changed nothing). Large values the batch replaced are freed with its commit,
//! except those the rollback put back.
//!
//! Invariant: while a checkpoint begins, no batch or range removal is between its first change
//! and its commit (the batch gate), so every batch that a checkpoint's recovery must roll back,
//! and every removal it must finish, lies entirely after that checkpoint's record.

use crate::blob::{BlobChanges, BlobRef};
use crate::btree::{BTree, Replaced, Stored};
use crate::buffer::policy::Policy;
use crate::error::{Error, Result};
use crate::shared::DbShared;
use crate::tree::Tree;
use crate::wal::{Log, RangeRemoval};
use std::ops::Bound;
use std::sync::Arc;

/// When a commit is durable: it survives a crash (of the process or of the machine).
///
/// Under every level a crash leaves a consistent database holding a prefix of the commit
/// order: no batch partly present, no value that was never written. The levels differ in how
/// long the latest commits may take to become durable:
///
/// * `Immediate`: the commit returns once the log holding it is synced (`fdatasync`).
///   Concurrent commits share one sync (group commit), so many threads committing together
///   get many commits per sync; a single thread gets about one commit per sync.
/// * `Eventual` (the default): the commit returns at once; the log is synced within
///   [`Options::eventual_sync_delay`](crate::Options::eventual_sync_delay) (10 ms by default).
///   A crash loses at most the commits of about that last interval.
/// * `None`: the commit is never synced on its own account; the log reaches the disk when its
///   buffer fills, when a page must be written, at checkpoints and on [`Db::flush`] or
///   [`Db::close`](crate::Db::close). A crash may lose the commits since then.
///
/// [`Db::flush`]: crate::Db::flush
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Durable when the commit returns.
    Immediate,
    /// Durable within a bounded delay.
    #[default]
    Eventual,
    /// Durable at the next sync someone else causes.
    None,
}

/// Changes to one or more trees of one database, applied atomically by
/// [`Db::write`](crate::Db::write): after any crash, entirely there or entirely absent.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let db = leankv::Db::open(dir.path(), leankv::Options::default())?;
/// let (accounts, log) = (db.open_tree("accounts")?, db.open_tree("log")?);
/// accounts.insert("alice", 100u64.to_be_bytes())?;
/// let mut batch = leankv::WriteBatch::new();
/// batch.insert(&accounts, "alice", 70u64.to_be_bytes());
/// batch.insert(&accounts, "bob", 30u64.to_be_bytes());
/// batch.insert(&log, "0001", "alice -> bob: 30");
/// batch.remove(&accounts, "carol");
/// db.write_with(batch, leankv::Durability::Immediate)?;
/// assert_eq!(accounts.get("bob")?, Some(30u64.to_be_bytes().to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Isolation is not part of the promise: a reader running while a batch is applied may see some
/// of its changes and not others (snapshot transactions come later). Changes apply in the order
/// they were added; a later change to the same key wins.
pub struct WriteBatch<P: Policy = crate::buffer::policy::Lean> {
    ops: Vec<BatchOp<P>>,
}

impl<P: Policy> Default for WriteBatch<P> {
    fn default() -> Self {
        WriteBatch { ops: Vec::new() }
    }
}

struct BatchOp<P: Policy> {
    tree: Tree<P>,
    key: Vec<u8>,
    /// `None`: remove.
    value: Option<Vec<u8>>,
}

impl<P: Policy> std::fmt::Debug for WriteBatch<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("changes", &self.ops.len())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch { ops: Vec::new() }
    }
}

impl<P: Policy> WriteBatch<P> {
    /// Sets `key` to `value` in `tree`.
    pub fn insert(&mut self, tree: &Tree<P>, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.ops.push(BatchOp {
            tree: tree.clone(),
            key: key.as_ref().to_vec(),
            value: Some(value.as_ref().to_vec()),
        });
    }

    /// Removes `key` from `tree` (nothing if absent).
    pub fn remove(&mut self, tree: &Tree<P>, key: impl AsRef<[u8]>) {
        self.ops.push(BatchOp {
            tree: tree.clone(),
            key: key.as_ref().to_vec(),
            value: None,
        });
    }

    /// Changes in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Applies `batch` to the database in `db` atomically, durable as `durability` says.
pub(crate) fn write<P: Policy>(
    db: &Arc<DbShared<P>>,
    batch: WriteBatch<P>,
    durability: Durability,
) -> Result<()> {
    for op in &batch.ops {
        if !Arc::ptr_eq(&op.tree.handle.db, db) {
            return Err(Error::InvalidOptions(
                "a write batch holds a tree of another database".into(),
            ));
        }
        op.tree.check_key(&op.key)?;
        if let Some(value) = &op.value {
            op.tree.check_value(value)?;
        }
        // A tree dropped later fails its change, which rolls back the ones before.
        if op.tree.handle.tree.is_dropped() {
            return Err(Error::TreeDropped);
        }
    }
    db.admit()?;
    let Some(log) = db.bm.log() else {
        // Without a log there is nothing to be atomic against: apply in order.
        for op in &batch.ops {
            apply(op, 0, &mut Vec::new())?;
        }
        return Ok(());
    };
    if let [op] = &batch.ops[..] {
        // One change is atomic by itself: it is logged as a single operation, without a batch
        // id, before-image or commit record.
        let (lsn, _) = apply(op, 0, &mut Vec::new())?;
        return db.commit_durability(lsn, durability);
    }
    let end = {
        let _gate = db.batch_gate.read();
        let id = log.next_batch();
        // Its records wait for the commit (see `wal/staging.rs`); released before the gate.
        let _staging = log.stage_batch(&_gate);
        // The values the changes replaced (`None`: absent), in one list.
        let mut replaced = Vec::with_capacity(batch.ops.len());
        let mut values = Vec::new();
        // The large values the batch replaced or removed are freed with its commit.
        let mut blobs = BlobChanges::default();
        for op in &batch.ops {
            match apply(op, id, &mut values) {
                Ok((_, before)) => {
                    let stored = before.as_ref().map(|before| before.stored(&values));
                    if let Some(blob) = large(db, stored) {
                        blobs.dropped(blob);
                    }
                    replaced.push(before);
                }
                Err(error) => {
                    let done = batch.ops[..replaced.len()].iter().zip(&replaced).rev();
                    let done = done.map(|(op, before)| {
                        let before = before.as_ref().map(|before| before.stored(&values));
                        (&*op.tree.handle.tree, &op.key[..], before)
                    });
                    abort(db, done, id, blobs);
                    return Err(error);
                }
            }
        }
        db.bm.commit(id, &blobs.unreferenced())
    };
    db.commit_durability(end, durability)
}

/// Applies one change as part of `batch` (0: on its own); returns the end LSN of its record
/// (0: none written) and, in a batch, the value it replaced (`None`: absent), appended to
/// `values`.
fn apply<P: Policy>(
    op: &BatchOp<P>,
    batch: u64,
    values: &mut Vec<u8>,
) -> Result<(u64, Option<Replaced>)> {
    let tree = &op.tree.handle.tree;
    let written = match &op.value {
        Some(value) => Some(tree.insert(&op.key, value, batch, values)?),
        None => tree.remove(&op.key, batch, values)?,
    };
    Ok(written.map_or((0, None), |written| (written.lsn, written.before)))
}

/// The large value `value` references, if it is one.
pub(crate) fn large<P: Policy>(db: &DbShared<P>, value: Option<Stored<'_>>) -> Option<BlobRef> {
    value?.large_value(db.bm.page_size())
}

/// Undoes the changes of batch (or transaction) `batch`, given last first with the values
/// they replaced (`None`: absent), by more changes of the same batch, and commits it: it
/// changed nothing, and what it wrote is freed (`blobs` holds the large values its changes
/// replaced). A restore that fails leaves the batch uncommitted and fails the log, so that no
/// later commit is acknowledged (a checkpoint must not begin after part of an uncommitted
/// batch) and the next open rolls the batch back.
pub(crate) fn abort<'a, P: Policy + 'a>(
    db: &DbShared<P>,
    changes: impl Iterator<Item = (&'a BTree<P>, &'a [u8], Option<Stored<'a>>)>,
    batch: u64,
    mut blobs: BlobChanges,
) {
    if roll_back(db, changes, batch, &mut blobs) {
        db.bm.commit(batch, &blobs.unreferenced());
    } else {
        undo_failed(db);
    }
}

/// Fails the log after an undo that failed (see [`abort`]).
pub(crate) fn undo_failed<P: Policy>(db: &DbShared<P>) {
    if let Some(log) = db.bm.log() {
        log.fail(
            "a batch or transaction failed and could not be undone; reopen the database to roll \
             it back"
                .into(),
        );
    }
}

/// Restores what `changes` replaced (see [`abort`]), noting in `blobs` the large values this
/// replaces and puts back; returns whether everything was restored.
fn roll_back<'a, P: Policy + 'a>(
    db: &DbShared<P>,
    changes: impl Iterator<Item = (&'a BTree<P>, &'a [u8], Option<Stored<'a>>)>,
    batch: u64,
    blobs: &mut BlobChanges,
) -> bool {
    // What a restore replaced.
    let mut replaced = Vec::new();
    for (tree, key, before) in changes {
        replaced.clear();
        let restored = match before {
            Some(value) => tree
                .insert_stored(key, value, None, batch, &mut replaced)
                .map(|written| written.before),
            None => tree
                .remove(key, batch, &mut replaced)
                .map(|written| written.and_then(|written| written.before)),
        };
        match restored {
            Ok(restored) => {
                let stored = restored.as_ref().map(|restored| restored.stored(&replaced));
                if let Some(blob) = large(db, stored) {
                    blobs.dropped(blob);
                }
                if let Some(blob) = large(db, before) {
                    blobs.put(blob);
                }
            }
            // A change to a tree dropped since is gone with the tree: restore the others.
            Err(_) if tree.is_dropped() => {}
            Err(_) => return false,
        }
    }
    true
}

/// Removes the keys of `tree` from `start` to `end` (a range that is not empty) as one atomic
/// commit (see the module notes); returns how many it removed and the end of its commit record
/// (0 without a log).
pub(crate) fn remove_range<P: Policy>(
    db: &Arc<DbShared<P>>,
    tree: &BTree<P>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
) -> Result<(u64, u64)> {
    db.admit()?;
    let Some(log) = db.bm.log() else {
        let removed = tree.remove_range(start, end.as_ref().map(Vec::as_slice), 0)?;
        return Ok((removed, 0));
    };
    let _gate = db.batch_gate.read();
    // A removal that starts on a dropped tree is never logged (one that loses the race with
    // `drop_tree` fails at its first step, and recovery forgets it with the tree).
    if tree.is_dropped() {
        return Err(Error::TreeDropped);
    }
    let removal = RangeRemoval {
        removal: log.next_batch(),
        tree: tree.root_page_id(),
        start,
        end,
        drop: false,
    };
    log.append(|writer, _| writer.range_removal(&removal));
    // A drop that ran between the check above and the start record: the removal ends at once
    // (recovery ignores a removal that starts on a dropped tree anyway).
    if tree.is_dropped() {
        log.commit(removal.removal);
        return Err(Error::TreeDropped);
    }
    finish_or_fail(db, log, tree, removal)
}

/// Drops `tree` (marked dropped, no operation running on it any more) as one atomic commit:
/// a range removal of all its keys, then its catalog entry and its root page. Returns the end
/// of its commit record (0 without a log). The caller was admitted and holds the batch gate
/// (taken before the map of open trees: see the lock order in `crate::transaction`).
pub(crate) fn drop_tree<P: Policy>(db: &Arc<DbShared<P>>, tree: &BTree<P>) -> Result<u64> {
    debug_assert!(tree.is_dropped());
    let owner = tree.owner_handle();
    let Some(log) = db.bm.log() else {
        owner.clear(Bound::Unbounded, 0)?;
        remove_catalog_entry(db, tree.root_page_id())?;
        owner.free_root(0)?;
        db.key_counts.dropped(tree.root_page_id());
        return Ok(0);
    };
    let removal = RangeRemoval {
        removal: log.next_batch(),
        tree: tree.root_page_id(),
        start: Bound::Unbounded,
        end: Bound::Unbounded,
        drop: true,
    };
    log.append(|writer, _| writer.range_removal(&removal));
    finish_or_fail(db, log, &owner, removal).map(|(_, end)| end)
}

/// [`finish_range_removal`]; if it fails (an I/O error, an exhausted pool), the log fails
/// too: the removal is logged in part, and only recovery at the next open finishes it.
fn finish_or_fail<P: Policy>(
    db: &Arc<DbShared<P>>,
    log: &Log,
    tree: &BTree<P>,
    removal: RangeRemoval,
) -> Result<(u64, u64)> {
    finish_range_removal(db, tree, removal).inspect_err(|error| {
        log.fail(format!(
            "a range removal or tree drop failed halfway ({error}); reopen the database to \
             finish it"
        ));
    })
}

/// Runs range removal `removal`, whose start record is in the log, to its end and commits it:
/// the rest of [`remove_range`] and [`drop_tree`], and recovery's roll forward. Returns the
/// keys removed and the end of the commit record.
pub(crate) fn finish_range_removal<P: Policy>(
    db: &Arc<DbShared<P>>,
    tree: &BTree<P>,
    removal: RangeRemoval,
) -> Result<(u64, u64)> {
    let log = db
        .bm
        .log()
        .expect("range removals are logged only with a log");
    let RangeRemoval {
        removal,
        start,
        end,
        drop,
        tree: root,
    } = removal;
    let removed = if drop {
        let removed = tree.clear(start, removal)?;
        remove_catalog_entry(db, root)?;
        tree.free_root(removal)?;
        db.key_counts.dropped(root);
        removed
    } else {
        tree.remove_range(start, end.as_ref().map(Vec::as_slice), removal)?
    };
    Ok((removed, log.commit(removal)))
}

/// Removes the catalog entry naming the tree whose root is page `root`, if there is one.
fn remove_catalog_entry<P: Policy>(db: &Arc<DbShared<P>>, root: u64) -> Result<()> {
    for (name, tree_root, _) in crate::catalog::catalog_entries(db)? {
        if tree_root == root {
            db.catalog.remove(name.as_bytes(), 0, &mut Vec::new())?;
        }
    }
    Ok(())
}
