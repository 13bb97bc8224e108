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
//! Invariant: every image is checked as a node before use; a record that cannot be applied is a
//! typed corruption error naming the page, never a panic and never silently skipped.

use crate::blob::{BlobChanges, BlobRef};
use crate::btree::beyond;
use crate::btree::redo::{check_image, redo_patch, redo_put, redo_remove, redo_split};
use crate::error::{Error, Result};
use crate::io::page as page_format;
use crate::io::{AlignedBuf, Storage};
use crate::wal::{Before, RangeRemoval, RangeStep, Record, Split};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::{Bound, RangeBounds};

/// Most pages allocated since the checkpoint that no record describes (or frees) recovery
/// accepts: each is an allocation a crash cut off before its record, or one whose operation
/// restarted, or a large value written but not yet referenced (up to a million pages each;
/// this allows sixteen of the largest in flight with 4 KiB pages); more means a damaged log
/// claims page ids far beyond the file.
const MAX_UNDESCRIBED_PAGES: usize = 1 << 24;

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
    pub(crate) pages: usize,
    pub(crate) batches_rolled_back: usize,
    /// Every tree's key count by root page id (`None`: the log kept none).
    pub(crate) key_counts: Option<HashMap<u64, u64>>,
    /// Range removals to finish (after the undo), each from where its steps reached.
    pub(crate) range_removals: Vec<RangeRemoval>,
}

/// Replays `records` (from a checkpoint record on) onto the page file in `storage`.
pub(crate) fn redo(
    storage: &dyn Storage,
    page_size: usize,
    records: &[(u64, Record)],
) -> Result<Redone> {
    let mut pages: HashMap<u64, AlignedBuf> = HashMap::new();
    let mut page_count = 0;
    // The page count as of the checkpoint: ids from it on were allocated since.
    let mut checkpoint_page_count = 0;
    let mut free = BTreeSet::new();
    let mut committed = HashSet::new();
    let mut batches = HashSet::new();
    let mut new_trees = Vec::new();
    let mut key_counts: Option<HashMap<u64, u64>> = None;
    // Range removals begun since the checkpoint, by id; `start` moves with their steps.
    let mut removals: HashMap<u64, RangeRemoval> = HashMap::new();
    // Roots of trees being dropped (until a new tree reuses the id): a removal that started
    // on such a tree, before or after the drop's start, is the drop's to finish.
    let mut dropping: HashSet<u64> = HashSet::new();
    // Pages of large values referenced by records since the checkpoint (not to be freed as
    // allocated without a record), and the large values each batch replaced and put, whose
    // commit frees those it left unreferenced.
    let mut blob_pages: HashSet<u64> = HashSet::new();
    let mut batch_blobs: HashMap<u64, BlobChanges> = HashMap::new();
    let free_blob = |blob: &BlobRef, free: &mut BTreeSet<u64>, blob_pages: &mut HashSet<u64>| {
        for page_id in blob.page_ids() {
            free.insert(page_id);
            blob_pages.remove(&page_id);
        }
    };
    for (end_lsn, record) in records {
        match record {
            Record::Checkpoint {
                page_count: count,
                free: list,
                key_counts: counts,
            } => {
                key_counts = counts
                    .as_ref()
                    .map(|counts| counts.iter().copied().collect());
                page_count = *count;
                checkpoint_page_count = *count;
                free = list.iter().copied().collect();
                if free.len() != list.len() || list.iter().any(|&id| id == 0 || id >= *count) {
                    return Err(log_damage(0, "a checkpoint's free list is malformed"));
                }
            }
            Record::Structure {
                images,
                freed,
                new_tree,
                step,
            } => {
                if let Some(step) = step {
                    redo_range_step(&mut removals, key_counts.as_mut(), step, freed)?;
                }
                if *new_tree {
                    dropping.remove(&images[0].0);
                }
                // A freed page is no tree's root: a dropped tree keeps no count, a removal
                // begun on it before the drop is forgotten with it, and it is no longer a tree
                // to free if its catalog entry is missing (its id may be in use again by then).
                new_trees.retain(|root| !freed.contains(root));
                for page_id in freed {
                    if let Some(counts) = &mut key_counts {
                        counts.remove(page_id);
                    }
                    removals.retain(|_, removal| removal.tree != *page_id);
                }
                if *new_tree {
                    new_trees.push(images[0].0);
                    if let Some(counts) = &mut key_counts {
                        counts.insert(images[0].0, 0);
                    }
                }
                for &page_id in freed {
                    check_page_id(page_id, page_size)?;
                    // A page allocated and freed within one checkpoint interval may already
                    // be free in the checkpoint's snapshot: freeing is idempotent here.
                    free.insert(page_id);
                    pages.remove(&page_id);
                    blob_pages.remove(&page_id);
                    page_count = page_count.max(page_id + 1);
                }
                for (page_id, bytes) in images {
                    install_image(&mut pages, page_size, *page_id, bytes, *end_lsn)?;
                    free.remove(page_id);
                    page_count = page_count.max(page_id + 1);
                }
            }
            Record::Put { page_id, image, .. }
            | Record::Remove { page_id, image, .. }
            | Record::Patch { page_id, image, .. } => {
                let (tree, batch, key, before) = leaf_change_of(record).expect("a leaf record");
                let put = match record {
                    Record::Put {
                        value, blob: true, ..
                    } => Some(decode_blob(value, page_size, *page_id)?),
                    _ => None,
                };
                if let Some(blob) = &put {
                    // A large value's pages are in use from its record on.
                    for page_id in blob.page_ids() {
                        check_page_id(page_id, page_size)?;
                        free.remove(&page_id);
                        blob_pages.insert(page_id);
                        page_count = page_count.max(page_id + 1);
                    }
                }
                let dropped = match before {
                    Before::Blob(reference) => Some(decode_blob(reference, page_size, *page_id)?),
                    _ => None,
                };
                // The large value replaced is free once the change is committed: a single
                // operation at once (unless it put the same value back), a batch at its
                // commit if it did not put it back.
                match (batch, dropped, put) {
                    (0, Some(dropped), put)
                        if put.as_ref().is_none_or(|put| put.id != dropped.id) =>
                    {
                        free_blob(&dropped, &mut free, &mut blob_pages);
                    }
                    (0, ..) => {}
                    (batch, dropped, put) => {
                        let changes = batch_blobs.entry(batch).or_default();
                        if let Some(blob) = dropped {
                            changes.dropped(blob);
                        }
                        if let Some(blob) = put {
                            changes.put(blob);
                        }
                    }
                }
                let delta = match record {
                    Record::Put { added, .. } => i64::from(*added),
                    Record::Remove { .. } => -1,
                    _ => 0,
                };
                if let Some(counts) = &mut key_counts {
                    if let Some(keys) = counts.get_mut(&tree) {
                        // A count is derived data: one that cannot be right (it came from a
                        // scan that raced writes) is counted again later, not an error.
                        match keys.checked_add_signed(delta) {
                            Some(updated) => *keys = updated,
                            None => _ = counts.remove(&tree),
                        }
                    }
                }
                if let Some(image) = image {
                    install_image(&mut pages, page_size, *page_id, image, *end_lsn)?;
                    free.remove(page_id);
                    page_count = page_count.max(page_id + 1);
                }
                let page = logged_page(&mut pages, *page_id)?;
                match record {
                    Record::Put { value, blob, .. } => redo_put(page, key, value, *blob),
                    Record::Patch {
                        value_len, ranges, ..
                    } => redo_patch(page, key, *value_len, ranges),
                    _ => redo_remove(page, key),
                }
                .map_err(|reason| log_damage(*page_id, reason))?;
                page_format::set_lsn(page, *end_lsn);
                if batch != 0 {
                    batches.insert(batch);
                }
            }
            Record::Split(split) => {
                redo_logged_split(&mut pages, page_size, split, *end_lsn)?;
                free.remove(&split.left);
                page_count = page_count.max(split.left + 1);
            }
            Record::RangeRemoval(removal) => {
                if removal.drop {
                    dropping.insert(removal.tree);
                    removals.retain(|_, other| other.tree != removal.tree);
                } else if dropping.contains(&removal.tree) {
                    continue;
                }
                if removals.insert(removal.removal, removal.clone()).is_some() {
                    return Err(log_damage(removal.tree, "a range removal begun twice"));
                }
            }
            Record::Commit { batch } => {
                committed.insert(*batch);
                removals.remove(batch);
                let changes = batch_blobs.remove(batch).unwrap_or_default();
                for blob in changes.unreferenced() {
                    free_blob(&blob, &mut free, &mut blob_pages);
                }
            }
            Record::SyncMark { .. } => {}
        }
    }
    // A page allocated since the checkpoint that no surviving record describes (its operation
    // was cut short by the crash, while a later allocation was logged) is free.
    let unexplained = (page_count.saturating_sub(checkpoint_page_count) as usize)
        .saturating_sub(pages.len() + blob_pages.len());
    if unexplained > MAX_UNDESCRIBED_PAGES {
        return Err(log_damage(
            0,
            format!("{unexplained} pages allocated since the checkpoint without a record"),
        ));
    }
    let incomplete: HashSet<u64> = batches.difference(&committed).copied().collect();
    let (undo, orphaned) = undo_list(records, &incomplete, page_size)?;
    for blob in &orphaned {
        free_blob(blob, &mut free, &mut blob_pages);
    }
    for page_id in checkpoint_page_count.max(1)..page_count {
        if !pages.contains_key(&page_id) && !blob_pages.contains(&page_id) {
            free.insert(page_id);
        }
    }
    let offset = |page_id: u64| {
        page_id
            .checked_mul(page_size as u64)
            .filter(|&offset| offset <= i64::MAX as u64)
            .ok_or_else(|| log_damage(page_id, "a page id beyond any file offset"))
    };
    storage
        .extend_to(offset(page_count)?)
        .map_err(|e| Error::io("extending the page file at recovery", e))?;
    let mut ids: Vec<u64> = pages.keys().copied().collect();
    ids.sort_unstable();
    for page_id in &ids {
        let page = pages.get_mut(page_id).expect("listed above");
        page_format::seal(page, *page_id);
        storage
            .write_at(page, offset(*page_id)?)
            .map_err(|e| Error::io("writing a recovered page", e))?;
    }
    Ok(Redone {
        page_count,
        free: free.into_iter().collect(),
        undo,
        new_trees: new_trees
            .into_iter()
            .filter(|page_id| pages.contains_key(page_id))
            .collect(),
        pages: ids.len(),
        batches_rolled_back: incomplete.len(),
        key_counts,
        range_removals: removals.into_values().collect(),
    })
}

/// Applies a range step's bookkeeping: its keys leave the tree's count and its removal goes on
/// after the key the step reached, or is finished: at the end of its range, or, for a drop,
/// with the step that frees the tree's root (before it, a drop goes on from the start).
fn redo_range_step(
    removals: &mut HashMap<u64, RangeRemoval>,
    key_counts: Option<&mut HashMap<u64, u64>>,
    step: &RangeStep,
    freed: &[u64],
) -> Result<()> {
    // A step of a removal the tree's drop took over (see `redo`) only frees what it frees.
    let Some(removal) = removals.get_mut(&step.removal) else {
        return Ok(());
    };
    if removal.tree != step.tree {
        return Err(log_damage(step.tree, "a range step of another tree"));
    }
    if let Some(counts) = key_counts {
        if let Some(keys) = counts.get_mut(&step.tree) {
            match keys.checked_sub(step.keys) {
                Some(left) => *keys = left,
                None => _ = counts.remove(&step.tree),
            }
        }
    }
    match &step.through {
        _ if removal.drop && freed.contains(&step.tree) => _ = removals.remove(&step.removal),
        Some(key) if !beyond(key, removal.end.as_ref().map(Vec::as_slice)) => {
            removal.start = Bound::Excluded(key.clone());
        }
        _ if removal.drop => removal.start = Bound::Unbounded,
        _ => _ = removals.remove(&step.removal),
    }
    Ok(())
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

/// Checks a page image from the log and makes it the page's current state.
fn install_image(
    pages: &mut HashMap<u64, AlignedBuf>,
    page_size: usize,
    page_id: u64,
    bytes: &[u8],
    end_lsn: u64,
) -> Result<()> {
    check_page_id(page_id, page_size)?;
    if bytes.len() != page_size {
        return Err(log_damage(page_id, "a page image of the wrong size"));
    }
    check_image(bytes).map_err(|reason| log_damage(page_id, reason))?;
    let mut page = AlignedBuf::new(page_size);
    page.copy_from_slice(bytes);
    page_format::set_lsn(&mut page, end_lsn);
    pages.insert(page_id, page);
    Ok(())
}

/// Replays a logical split: the node and its parent have images earlier in the log; the new
/// page starts empty.
fn redo_logged_split(
    pages: &mut HashMap<u64, AlignedBuf>,
    page_size: usize,
    split: &Split,
    end_lsn: u64,
) -> Result<()> {
    let ids = [split.page_id, split.parent, split.left];
    for page_id in ids {
        check_page_id(page_id, page_size)?;
    }
    if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
        return Err(log_damage(split.page_id, "a split naming one page twice"));
    }
    let mut node = pages.remove(&split.page_id);
    let mut parent = pages.remove(&split.parent);
    let mut left = AlignedBuf::new(page_size);
    let outcome = match (&mut node, &mut parent) {
        (Some(node), Some(parent)) => {
            let page_type = page_format::page_type(node)
                .ok_or_else(|| log_damage(split.page_id, "a split of a page without a type"))?;
            page_format::init_header(&mut left, page_type, split.left);
            redo_split(node, parent, &mut left, split)
                .map_err(|reason| log_damage(split.page_id, reason))
        }
        _ => Err(log_damage(
            split.page_id,
            "a logged split of pages with no image before it",
        )),
    };
    for (page_id, page) in [
        (split.page_id, node),
        (split.parent, parent),
        (split.left, Some(left)),
    ] {
        if let Some(mut page) = page {
            page_format::set_lsn(&mut page, end_lsn);
            pages.insert(page_id, page);
        }
    }
    outcome
}

/// The page a leaf record changes: it must have an image earlier in the log (see the module
/// notes), else the log is damaged.
fn logged_page(pages: &mut HashMap<u64, AlignedBuf>, page_id: u64) -> Result<&mut AlignedBuf> {
    pages
        .get_mut(&page_id)
        .ok_or_else(|| log_damage(page_id, "a logged change to a page with no image before it"))
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

/// The changes of `incomplete` batches to undo, last first, leaving out keys that a committed
/// change wrote afterwards; and the large values such left-out changes replaced, which nothing
/// references any more.
fn undo_list(
    records: &[(u64, Record)],
    incomplete: &HashSet<u64>,
    page_size: usize,
) -> Result<(Vec<Undo>, Vec<BlobRef>)> {
    if incomplete.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    // Where each key an incomplete batch touched was last written by a committed change.
    let mut last_committed: HashMap<(u64, &[u8]), usize> = records
        .iter()
        .filter_map(|(_, record)| leaf_change_of(record))
        .filter(|(_, batch, _, _)| incomplete.contains(batch))
        .map(|(tree, _, key, _)| ((tree, key), 0))
        .collect();
    for (index, (_, record)) in records.iter().enumerate() {
        if let Some((tree, batch, key, _)) = leaf_change_of(record) {
            if !incomplete.contains(&batch) {
                if let Some(last) = last_committed.get_mut(&(tree, key)) {
                    *last = index + 1;
                }
            }
        }
    }
    // Range steps, with their removal's end, by position: each is a committed change to every
    // key it covers.
    let mut ends = HashMap::new();
    let mut steps = Vec::new();
    for (index, (_, record)) in records.iter().enumerate() {
        match record {
            Record::RangeRemoval(removal) => _ = ends.insert(removal.removal, &removal.end),
            Record::Structure {
                step: Some(step),
                freed,
                ..
            } => {
                // The step that frees its tree's root (a drop) removed every key of the tree.
                let everything = freed.contains(&step.tree);
                if let Some(end) = ends.get(&step.removal) {
                    steps.push((index, step, end.as_ref(), everything));
                }
            }
            _ => {}
        }
    }
    let removed_later =
        |index: usize, tree: u64, key: &[u8]| {
            steps.iter().rev().take_while(|(at, ..)| *at > index).any(
                |(_, step, end, everything)| {
                    step.tree == tree && (*everything || step_covers(step, *end, key))
                },
            )
        };
    // Where each large value was last put (a rolled-back change puts one back).
    let mut last_put: HashMap<&[u8], usize> = HashMap::new();
    for (index, (_, record)) in records.iter().enumerate() {
        if let Record::Put {
            value, blob: true, ..
        } = record
        {
            last_put.insert(value, index);
        }
    }
    let mut undo = Vec::new();
    let mut orphaned = Vec::new();
    for (index, (_, record)) in records.iter().enumerate().rev() {
        let Some((tree, batch, key, before)) = leaf_change_of(record) else {
            continue;
        };
        if !incomplete.contains(&batch) {
            continue;
        }
        if last_committed[&(tree, key)] > index || removed_later(index, tree, key) {
            // The large value this change replaced is not put back: unreferenced, unless a
            // later record put it back (and the changes after that decide its fate).
            if let Before::Blob(reference) = before {
                if last_put.get(&reference[..]).is_none_or(|&put| put < index) {
                    orphaned.push(decode_blob(reference, page_size, 0)?);
                }
            }
            continue;
        }
        let before = match before {
            Before::Absent => Restore::Absent,
            Before::Value(value) => Restore::Value(value.clone()),
            Before::Blob(reference) => {
                decode_blob(reference, page_size, 0)?;
                Restore::Blob(reference.clone())
            }
            Before::Ranges(ranges) => Restore::Ranges(ranges.clone()),
            Before::Unrecorded => {
                return Err(log_damage(0, "a batch's change without its before-image"));
            }
        };
        undo.push(Undo {
            tree,
            key: key.to_vec(),
            before,
        });
    }
    Ok((undo, orphaned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(batch: u64, key: &str, value: &str, before: Before) -> (u64, Record) {
        let record = Record::Put {
            page_id: 5,
            tree: 1,
            batch,
            key: key.into(),
            value: value.into(),
            blob: false,
            added: before == Before::Absent,
            before,
            image: None,
        };
        (0, record)
    }

    #[test]
    fn pages_allocated_since_the_checkpoint_that_no_record_describes_are_free() {
        use crate::btree::node::NodeMut;
        use crate::buffer::PageMut;
        const PAGE: usize = 4096;
        let mut leaf = vec![0u8; PAGE];
        page_format::init_header(&mut leaf, page_format::PageType::BTreeLeaf, 12);
        NodeMut::new(PageMut::from_slice(&mut leaf)).init(0, None, None);
        // Pages 10 and 11 were allocated after the checkpoint; only 12's record survived.
        let records = vec![
            (
                100,
                Record::Checkpoint {
                    page_count: 10,
                    free: vec![3],
                    key_counts: None,
                },
            ),
            (
                200,
                Record::Structure {
                    images: vec![(12, leaf)],
                    freed: Vec::new(),
                    new_tree: false,
                    step: None,
                },
            ),
        ];
        let storage = crate::io::MemoryStorage::new();
        let redone = redo(&storage, PAGE, &records).unwrap();
        assert_eq!(redone.page_count, 13);
        assert_eq!(redone.free, vec![3, 10, 11]);
    }

    #[test]
    fn a_drop_takes_over_the_removals_on_its_tree_before_and_after_its_start() {
        let removal = |id: u64, tree: u64, drop: bool| {
            (
                id * 100,
                Record::RangeRemoval(RangeRemoval {
                    removal: id,
                    tree,
                    start: Bound::Unbounded,
                    end: Bound::Excluded(b"m".to_vec()),
                    drop,
                }),
            )
        };
        let checkpoint = Record::Checkpoint {
            page_count: 10,
            free: Vec::new(),
            key_counts: None,
        };
        let records = vec![
            (1, checkpoint),
            removal(1, 7, false), // cut off by the drop
            removal(2, 8, false), // another tree: finished
            removal(3, 7, true),
            removal(4, 7, false), // started after the drop (lost the race)
        ];
        let storage = crate::io::MemoryStorage::new();
        let redone = redo(&storage, 4096, &records).unwrap();
        let mut pending: Vec<(u64, bool)> = redone
            .range_removals
            .iter()
            .map(|removal| (removal.removal, removal.drop))
            .collect();
        pending.sort_unstable();
        assert_eq!(pending, vec![(2, false), (3, true)]);
    }

    #[test]
    fn undo_restores_last_first_and_leaves_keys_a_later_commit_wrote() {
        let old = |value: &str| Before::Value(value.into());
        let records = vec![
            put(7, "a", "a1", old("a0")),
            put(7, "b", "b1", Before::Absent),
            put(0, "a", "a2", Before::Unrecorded), // committed after batch 7 changed "a"
            put(7, "c", "c1", old("c0")),
            put(7, "c", "c2", old("c1")),
            put(8, "d", "d1", old("d0")),
            (0, Record::Commit { batch: 8 }),
        ];
        let (undo, _) = undo_list(&records, &HashSet::from([7]), 4096).unwrap();
        let undo: Vec<(&[u8], &Restore)> =
            undo.iter().map(|u| (u.key.as_slice(), &u.before)).collect();
        let value = |v: &str| Restore::Value(v.into());
        assert_eq!(
            undo,
            vec![
                (&b"c"[..], &value("c1")),
                (&b"c"[..], &value("c0")),
                (&b"b"[..], &Restore::Absent),
            ]
        );
    }
}
