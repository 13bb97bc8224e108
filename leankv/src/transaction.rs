//! Transactions: atomic commits whose changes are applied as they are made, so that the
//! transaction's own reads (through any handle) see them, and which a failing body undoes.
//!
//! A transaction is a write batch applied eagerly. Each change is applied at once, logged with
//! the value it replaced and the transaction's batch id; when the body returns `Ok`, a commit
//! record is appended; when it returns `Err` or panics, the changes are undone, last first, by
//! more changes of the same batch, which is then committed (it changed nothing). After a crash,
//! recovery rolls back a transaction whose commit record did not survive, as it does a batch.
//!
//! The transaction holds the batch gate shared from its start to its commit, so no checkpoint
//! begins meanwhile (see `crate::batch`), and its thread keeps its records until the commit
//! appends them with the commit record (`wal/staging.rs`). That is why the body may not write
//! through anything else of the same database on its thread: a write outside the transaction
//! may wait for a checkpoint (`admit`) that waits for the gate. Such calls fail with
//! [`Error::TransactionOpen`] instead (a thread-local list of the databases with a transaction
//! open on this thread).
//!
//! Lock order: the batch gate before the map of open trees (`DbShared::trees`), everywhere; a
//! body may drop a `Tree` handle, which locks that map.
//!
//! Invariant: between the first change and the commit or undo, the gate is held and the
//! database's address is in this thread's list.

use crate::batch::{self, Durability};
use crate::blob::BlobChanges;
use crate::btree::Replaced;
use crate::buffer::policy::{Lean, Policy};
use crate::catalog;
use crate::error::{Error, Result};
use crate::shared::DbShared;
use crate::tree::Tree;
use crate::wal::StagingSlot;
use parking_lot::RwLockReadGuard;
use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::sync::Arc;

thread_local! {
    /// The databases (their shared state's address) with a transaction open on this thread.
    static OPEN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The lists of this thread's last transaction, emptied, for its next: growing fresh
    /// ones took ~10 allocations per TPC-C transaction.
    static SPARE_LISTS: Cell<Option<Lists>> = const { Cell::new(None) };
}

/// A transaction's lists (see the fields of [`Transaction`]).
#[derive(Default)]
struct Lists {
    trees: Vec<u64>,
    changes: Vec<Change>,
    keys: Vec<u8>,
    values: Vec<u8>,
}

/// A change: its tree's index in `trees`, where its key lies in `keys`, and the value it
/// replaced (`None`: absent), in `values`.
type Change = (usize, Range<usize>, Option<Replaced>);

/// Lists beyond these capacities are not kept for the next transaction.
const KEPT_CHANGES: usize = 1 << 10;
const KEPT_BYTES: usize = 64 << 10;

fn address<P: Policy>(db: &DbShared<P>) -> usize {
    db as *const DbShared<P> as usize
}

/// Fails with [`Error::TransactionOpen`] if this thread has a transaction open on `db`.
pub(crate) fn refuse_if_open<P: Policy>(db: &DbShared<P>) -> Result<()> {
    let open = OPEN.with(|open| open.borrow().contains(&address(db)));
    if open {
        return Err(Error::TransactionOpen);
    }
    Ok(())
}

/// Changes to one or more trees of one database, applied as they are made and committed
/// atomically when the body of [`Db::transaction`](crate::Db::transaction) returns `Ok`:
/// after any crash, entirely there or entirely absent. If the body returns `Err` or panics,
/// every change is undone.
///
/// Reads need no method here: a change is in its tree as soon as the call that made it
/// returns, so [`Tree::get`] and scans through any handle see it, on this thread and on
/// others. Isolation is not part of the promise: other threads may see the changes before
/// the commit (and then see them undone if the body fails), and two transactions that write
/// the same key concurrently may each overwrite the other's value, also when one is undone.
///
/// Undoing restores the values the transaction replaced, whatever other threads wrote to those
/// keys meanwhile: a failed transaction can overwrite another thread's acknowledged write of a
/// key it also wrote. (Without the write-ahead log, an undo that fails, on an I/O error or a
/// full pool, leaves the changes it could not restore.)
///
/// While a transaction is open, checkpoints wait for it: keep transactions short, and do not
/// make the body wait for another thread that writes to the same database (when the log runs
/// far ahead of checkpoints, that thread's write waits for a checkpoint, which waits for the
/// transaction). Within the body, write to the database only through the transaction:
/// `Tree::insert`, `Db::write`, `Db::flush`, `Db::check_integrity`, `Db::open_tree` of a new
/// tree, `Db::drop_tree` and nested transactions on the same database fail with
/// [`Error::TransactionOpen`] on the thread that has it open.
pub struct Transaction<'db, P: Policy = Lean> {
    db: &'db Arc<DbShared<P>>,
    /// The batch id its changes are logged under; without the log, any id but 0 (which would
    /// not keep the values replaced).
    id: u64,
    /// The trees it changed, by [`BTree::id`](crate::btree::BTree::id): no handle is kept
    /// (cloning one writes counters that every thread using the tree reads); an undo finds
    /// them again.
    trees: Vec<u64>,
    /// Per change, in order (see [`Change`]).
    changes: Vec<Change>,
    /// The changes' keys, one after another (one allocation for all of them).
    keys: Vec<u8>,
    /// The values its changes replaced as stored (a large value as its reference), one after
    /// another (likewise).
    values: Vec<u8>,
    /// The large values its changes replaced or removed, freed with its commit.
    blobs: BlobChanges,
    /// Where its records wait for its commit (with the log, while a slot is free). Fields drop
    /// in declaration order after `drop` (also when it panics): the slot goes before the gate,
    /// so everything staged reaches the log before a checkpoint can begin.
    _staging: Option<StagingSlot<'db>>,
    /// Held from the start to the commit or undo (with the log; see the module notes).
    _gate: Option<RwLockReadGuard<'db, ()>>,
}

impl<'db, P: Policy> Transaction<'db, P> {
    /// Opens a transaction on `db` (admitted by the caller).
    fn begin(db: &'db Arc<DbShared<P>>) -> Self {
        let (id, gate, staging) = match db.bm.log() {
            Some(log) => {
                let gate = db.batch_gate.read();
                let staging = log.stage_batch(&gate);
                (log.next_batch(), Some(gate), staging)
            }
            None => (1, None, None),
        };
        OPEN.with(|open| open.borrow_mut().push(address(db)));
        let Lists {
            trees,
            changes,
            keys,
            values,
        } = SPARE_LISTS.take().unwrap_or_default();
        Transaction {
            db,
            id,
            trees,
            changes,
            keys,
            values,
            blobs: BlobChanges::default(),
            _staging: staging,
            _gate: gate,
        }
    }

    /// Sets `key` to `value` in `tree`. Fails with [`Error::KeyTooLarge`] /
    /// [`Error::ValueTooLarge`] beyond the database's limits, changing nothing.
    pub fn insert(
        &mut self,
        tree: &Tree<P>,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        tree.check_key(key)?;
        tree.check_value(value)?;
        let index = self.tree_index(tree)?;
        let written = tree
            .handle
            .tree
            .insert(key, value, self.id, &mut self.values)?;
        self.changed(index, key, written.before);
        Ok(())
    }

    /// Removes `key` from `tree`; returns whether it was present.
    pub fn remove(&mut self, tree: &Tree<P>, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        let index = self.tree_index(tree)?;
        if tree.check_key(key).is_err() {
            return Ok(false); // no such key can be stored
        }
        let Some(written) = tree.handle.tree.remove(key, self.id, &mut self.values)? else {
            return Ok(false);
        };
        self.changed(index, key, written.before);
        Ok(true)
    }

    /// Rewrites the value of `key` in `tree` in place, as [`Tree::update_in_place`] does (the
    /// same length; `modify` runs at most once, under the leaf's latch, and must not use the
    /// tree); returns `modify`'s result, or `None` if the key is absent.
    pub fn update_in_place<R>(
        &mut self,
        tree: &Tree<P>,
        key: impl AsRef<[u8]>,
        modify: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>> {
        let key = key.as_ref();
        let index = self.tree_index(tree)?;
        if tree.check_key(key).is_err() {
            return Ok(None);
        }
        // Batch id 0 would append no before-image (it never is one: see `id`).
        debug_assert_ne!(self.id, 0);
        let (id, values) = (self.id, &mut self.values);
        let at = values.len();
        let updated = crate::tree::with_lookup_buffer(|buffer| {
            tree.handle.tree.update(key, buffer, modify, id, values)
        });
        let Ok(Some((result, _))) = updated else {
            debug_assert_eq!(
                self.values.len(),
                at,
                "only an update appends its before-image"
            );
            return updated.map(|_| None);
        };
        // The value replaced is in `values` already (never a large one).
        let before = Replaced {
            at: at..self.values.len(),
            blob: false,
        };
        self.note(index, key, Some(before));
        Ok(Some(result))
    }

    /// Changes made so far.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// True before the first change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The index of `tree` in `self.trees` (added if new), once it is known to be a tree of
    /// this database (a dropped one fails in the change itself); waits first while the log's
    /// writer is far behind (see `Log::admit_in_batch`).
    fn tree_index(&mut self, tree: &Tree<P>) -> Result<usize> {
        if !Arc::ptr_eq(&tree.handle.db, self.db) {
            return Err(Error::InvalidOptions(
                "a transaction got a tree of another database".into(),
            ));
        }
        if let Some(log) = self.db.bm.log() {
            log.admit_in_batch();
        }
        let id = tree.handle.tree.id();
        Ok(match self.trees.iter().position(|&known| known == id) {
            Some(index) => index,
            None => {
                self.trees.push(id);
                self.trees.len() - 1
            }
        })
    }

    /// Notes a change to `key` of tree `index` that replaced `before` (in `values`).
    fn changed(&mut self, index: usize, key: &[u8], before: Option<Replaced>) {
        let stored = before.as_ref().map(|before| before.stored(&self.values));
        if let Some(blob) = batch::large(self.db, stored) {
            self.blobs.dropped(blob);
        }
        self.note(index, key, before);
    }

    /// Notes a change to `key` of tree `index` whose replaced value is `before`, in `values`.
    fn note(&mut self, index: usize, key: &[u8], before: Option<Replaced>) {
        let at = self.keys.len();
        self.keys.extend_from_slice(key);
        self.changes.push((index, at..self.keys.len(), before));
    }

    /// Appends the commit record (none if nothing changed) and closes the transaction;
    /// returns the record's end (0: none).
    fn commit(mut self) -> u64 {
        let blobs = std::mem::take(&mut self.blobs).unreferenced();
        let end = if self.changes.is_empty() {
            0
        } else {
            self.db.bm.commit(self.id, &blobs)
        };
        self.changes.clear();
        end
    }

    /// Undoes every change, last first, and commits the undone batch (see
    /// [`batch::abort`]).
    fn undo(&mut self) {
        if self.changes.is_empty() {
            return;
        }
        let changes = std::mem::take(&mut self.changes);
        let blobs = std::mem::take(&mut self.blobs);
        // The changes to a tree dropped meanwhile went with it.
        let handles: Result<Vec<Option<Tree<P>>>> = (self.trees.iter())
            .map(|&id| catalog::handle_of(self.db, id))
            .collect();
        let Ok(handles) = handles else {
            batch::undo_failed(self.db);
            return;
        };
        let (keys, values) = (&self.keys, &self.values);
        let undone = changes.iter().rev().filter_map(|(index, key, before)| {
            let tree = handles[*index].as_ref()?;
            let before = before.as_ref().map(|before| before.stored(values));
            Some((&*tree.handle.tree, &keys[key.clone()], before))
        });
        batch::abort(self.db, undone, self.id, blobs);
    }
}

impl<P: Policy> Drop for Transaction<'_, P> {
    /// A transaction dropped with changes (its body failed or panicked) is undone.
    fn drop(&mut self) {
        self.undo();
        OPEN.with(|open| {
            let mut open = open.borrow_mut();
            let at = open.iter().rposition(|&db| db == address(self.db));
            debug_assert!(at.is_some(), "a transaction is in its thread's list");
            if let Some(at) = at {
                open.swap_remove(at);
            }
        });
        if self.changes.capacity() <= KEPT_CHANGES
            && self.keys.capacity() <= KEPT_BYTES
            && self.values.capacity() <= KEPT_BYTES
        {
            let mut lists = Lists {
                trees: std::mem::take(&mut self.trees),
                changes: std::mem::take(&mut self.changes),
                keys: std::mem::take(&mut self.keys),
                values: std::mem::take(&mut self.values),
            };
            lists.trees.clear();
            lists.changes.clear();
            lists.keys.clear();
            lists.values.clear();
            // `try_with`: a transaction dropped while the thread's locals are torn down.
            let _ = SPARE_LISTS.try_with(|spare| spare.set(Some(lists)));
        }
        // The fields go next, in declaration order: the staging slot, then the gate.
    }
}

impl<P: Policy> std::fmt::Debug for Transaction<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("changes", &self.changes.len())
            .finish()
    }
}

/// Runs `body` as a transaction on `db`, its commit durable as `durability` says (see
/// [`Transaction`]).
pub(crate) fn run<P: Policy, T, E: From<Error>>(
    db: &Arc<DbShared<P>>,
    durability: Durability,
    body: impl FnOnce(&mut Transaction<'_, P>) -> Result<T, E>,
) -> Result<T, E> {
    db.admit()?;
    let mut transaction = Transaction::begin(db);
    let value = body(&mut transaction)?; // dropped on `Err`: undone
    let end = transaction.commit();
    db.commit_durability(end, durability)?;
    Ok(value)
}
