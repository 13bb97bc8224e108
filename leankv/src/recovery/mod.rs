//! Recovery at open: redo from the last completed checkpoint, then the list of changes of
//! batches that never committed, to be undone through the trees once the database is open.
//!
//! **Redo needs no page from the page file.** A checkpoint begins by raising the image
//! threshold to its LSN: from then on the first change of every page logs the page's full
//! image (and every new page and structural change logs images anyway). So every page changed
//! after the checkpoint began is rebuilt from an image in the log plus the leaf operations
//! after it, and a page torn by a crash mid-write is simply replaced; every page not changed
//! since is on disk as the checkpoint wrote and synced it. The page count and free list are
//! the checkpoint record's, updated by later `Free` records and images.
//!
//! **Undo.** Changes of a batch reach the log (and maybe the disk) before its commit record. A
//! batch without a commit record in the surviving log is rolled back: each of its changes, from
//! the last to the first, restores the value before it, unless a committed change to the same
//! key came later (which then stands). The undo runs as ordinary logged operations after open,
//! as one batch of its own (its commit frees the large values it leaves unreferenced), so a
//! crash during it is recovered like any other.
//!
//! **Range removals roll forward.** A range removal's steps free leaves whole, which cannot be
//! undone key by key; instead, one whose `Commit` did not survive is finished after open, from
//! where its last surviving step reached (it holds the batch gate, so no checkpoint lies
//! between its start and its commit). A change of an uncommitted batch to a key that a later
//! step removed is not undone: the removal came after it.
//!
//! **Two passes, bounded memory.** The first pass reads the log to its end, checks it (see
//! `wal::reader`) and notes which batches committed, from records' outlines; nothing is written
//! before its framing, checksums and sync marks are checked. (A record that passes them but cannot be applied is
//! found by the second pass, maybe after pages were written early: harmless, as every such page
//! is rebuilt from the log again, and every later open fails the same way.)
//! The second replays it ([`redo`]) and gathers the changes to undo ([`undo`]), holding the
//! rebuilt pages in memory up to the pool's size and writing the rest to their places early
//! ([`pages`]). Neither pass keeps the log in memory.
//!
//! Invariant: every image is checked as a node before use; a record that cannot be applied is a
//! typed corruption error naming the page, never a panic and never silently skipped.

mod pages;
mod redo;
#[cfg(test)]
mod tests;
mod undo;

use crate::blob::BlobRef;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::wal::{
    read_log, reread_log, Before, LogEnding, LogPosition, LogScan, Outline, RangeRemoval,
    RangeStep, Record,
};
use redo::Redo;
use std::collections::{HashMap, HashSet};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use undo::UndoScan;

/// A change to roll back: restore `key` of the tree with root page `tree` as `before` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undo {
    pub(crate) tree: u64,
    pub(crate) key: Vec<u8>,
    pub(crate) before: Restore,
}

/// What a rolled-back change restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restore {
    /// The key was absent: remove it.
    Absent,
    /// The key held this value.
    Value(Vec<u8>),
    /// The key held the large value with this reference.
    Blob(Vec<u8>),
    /// The value held these bytes at these offsets (a patch rolled back).
    Ranges(Vec<(usize, Vec<u8>)>),
}

/// The state recovery rebuilt.
pub(crate) struct Redone {
    pub(crate) page_count: u64,
    pub(crate) free: Vec<u64>,
    /// Changes to undo, in the order to apply them.
    pub(crate) undo: Vec<Undo>,
    /// Roots of trees created since the checkpoint: any the catalog does not name is freed.
    pub(crate) new_trees: Vec<u64>,
    /// Pages rebuilt from the log.
    pub(crate) pages: usize,
    /// Times a rebuilt page was written before the end, to stay within the memory budget.
    pub(crate) pages_spilled: u64,
    pub(crate) batches_rolled_back: usize,
    /// Every tree's key count by root page id (`None`: the log kept none).
    pub(crate) key_counts: Option<HashMap<u64, u64>>,
    /// Range removals to finish (after the undo), each from where its steps reached.
    pub(crate) range_removals: Vec<RangeRemoval>,
}

/// Recovers the page file in `storage` from the log in `logs`, from the checkpoint at
/// `start` to the end `ending` finds, holding about `memory` bytes of rebuilt pages.
pub(crate) fn recover(
    storage: &dyn Storage,
    logs: &[Arc<dyn Storage>; 2],
    start: LogPosition,
    ending: LogEnding,
    page_size: usize,
    memory: usize,
) -> Result<(Redone, LogScan)> {
    let mut outcomes = BatchOutcomes::default();
    let scan = read_log(logs, start, ending, |_, outline| {
        outcomes.note(outline);
        Ok(())
    })?;
    // Pages rebuilt from what was read reach the page file before the log is written
    // again: what was read must be durable first (after a kill, it may not be yet).
    for log in logs {
        log.sync()
            .map_err(|e| Error::io("syncing the log before recovery", e))?;
    }
    let redone = replay(
        storage,
        page_size,
        memory,
        &outcomes.incomplete(),
        |visit| reread_log(logs, start, &scan.end, visit),
    )?;
    Ok((redone, scan))
}

/// Replays the records that `records` hands to its visitor, rolling back the batches in
/// `incomplete`.
fn replay(
    storage: &dyn Storage,
    page_size: usize,
    memory: usize,
    incomplete: &HashSet<u64>,
    records: impl FnOnce(&mut dyn FnMut(u64, &Record) -> Result<()>) -> Result<()>,
) -> Result<Redone> {
    let mut redo = Redo::new(storage, page_size, memory);
    let mut undo = UndoScan::new(incomplete, page_size);
    records(&mut |end_lsn, record| {
        undo.note(record);
        redo.apply(end_lsn, record)
    })?;
    let (undo, orphaned) = undo.finish()?;
    redo.finish(undo, orphaned, incomplete.len())
}

/// Which batches have changes in the log, and which of them committed.
#[derive(Default)]
struct BatchOutcomes {
    changed: HashSet<u64>,
    committed: HashSet<u64>,
}

impl BatchOutcomes {
    fn note(&mut self, outline: Outline) {
        match outline {
            Outline::Change { batch } if batch != 0 => _ = self.changed.insert(batch),
            Outline::Commit { batch } => _ = self.committed.insert(batch),
            Outline::CommittedChange { batch } => {
                self.changed.insert(batch);
                self.committed.insert(batch);
            }
            Outline::Change { .. } | Outline::Checkpoint | Outline::SyncMark | Outline::Other => {}
        }
    }

    /// The batches with changes and no commit record: to roll back.
    fn incomplete(&self) -> HashSet<u64> {
        self.changed.difference(&self.committed).copied().collect()
    }
}

/// Whether the step (of a removal ending at `end`) removed `key`.
fn step_covers(step: &RangeStep, end: Bound<&Vec<u8>>, key: &[u8]) -> bool {
    let range = (
        step.from.as_ref().map(Vec::as_slice),
        end.map(Vec::as_slice),
    );
    range.contains(key) && step.through.as_ref().is_none_or(|through| key <= through)
}

/// A page id from the log must name a page a file can hold (so `page_id + 1` cannot
/// overflow either).
fn check_page_id(page_id: u64, page_size: usize) -> Result<()> {
    if page_id == 0 || page_id >= i64::MAX as u64 / page_size as u64 {
        return Err(log_damage(page_id, "a page id out of range"));
    }
    Ok(())
}

fn log_damage(page_id: u64, reason: impl Into<String>) -> Error {
    Error::corruption(page_id, format!("write-ahead log: {}", reason.into()))
}

/// A leaf record's tree, batch, key and before-image.
fn leaf_change_of(record: &Record) -> Option<(u64, u64, &[u8], &Before)> {
    match record {
        Record::Put {
            tree,
            batch,
            key,
            before,
            ..
        }
        | Record::Remove {
            tree,
            batch,
            key,
            before,
            ..
        }
        | Record::Patch {
            tree,
            batch,
            key,
            before,
            ..
        } => Some((*tree, *batch, key.as_slice(), before)),
        _ => None,
    }
}

/// A large-value reference from the log, checked.
fn decode_blob(reference: &[u8], page_size: usize, page_id: u64) -> Result<BlobRef> {
    BlobRef::decode(reference, page_size).map_err(|reason| log_damage(page_id, reason))
}
