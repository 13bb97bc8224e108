//! Redo: the log's records replayed in order onto the pages they describe, and the page
//! allocation, trees, key counts and unfinished range removals rebuilt with them.

use super::pages::{offset, RedoPages};
use super::{check_page_id, decode_blob, leaf_change_of, log_damage, Redone, Undo};
use crate::blob::{BlobChanges, BlobRef};
use crate::btree::beyond;
use crate::btree::redo::{check_image, redo_patch, redo_put, redo_remove, redo_split};
use crate::error::{Error, Result};
use crate::io::page as page_format;
use crate::io::{AlignedBuf, Storage};
use crate::wal::{Before, RangeRemoval, RangeStep, Record, Split};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Bound;

/// Most pages allocated since the checkpoint that no record describes (or frees) recovery
/// accepts: each is an allocation a crash cut off before its record, or one whose operation
/// restarted, or a large value written but not yet referenced (up to a million pages each;
/// this allows sixteen of the largest in flight with 4 KiB pages); more means a damaged log
/// claims page ids far beyond the file.
const MAX_UNDESCRIBED_PAGES: usize = 1 << 24;

pub(super) struct Redo<'a> {
    storage: &'a dyn Storage,
    page_size: usize,
    pages: RedoPages<'a>,
    page_count: u64,
    /// The page count as of the checkpoint: ids from it on were allocated since.
    checkpoint_page_count: u64,
    free: BTreeSet<u64>,
    new_trees: Vec<u64>,
    key_counts: Option<HashMap<u64, u64>>,
    /// Range removals begun since the checkpoint, by id; `start` moves with their steps.
    removals: HashMap<u64, RangeRemoval>,
    /// Roots of trees being dropped (until a new tree reuses the id): a removal that started
    /// on such a tree, before or after the drop's start, is the drop's to finish.
    dropping: HashSet<u64>,
    /// Pages of large values referenced by records since the checkpoint (not to be freed as
    /// allocated without a record).
    blob_pages: HashSet<u64>,
    /// The large values each batch replaced and put: its commit frees those it left
    /// unreferenced.
    batch_blobs: HashMap<u64, BlobChanges>,
}

impl<'a> Redo<'a> {
    /// Redo onto the page file in `storage`, holding about `memory` bytes of pages.
    pub(super) fn new(storage: &'a dyn Storage, page_size: usize, memory: usize) -> Self {
        Redo {
            storage,
            page_size,
            pages: RedoPages::new(storage, page_size, memory),
            page_count: 0,
            checkpoint_page_count: 0,
            free: BTreeSet::new(),
            new_trees: Vec::new(),
            key_counts: None,
            removals: HashMap::new(),
            dropping: HashSet::new(),
            blob_pages: HashSet::new(),
            batch_blobs: HashMap::new(),
        }
    }

    /// Replays the log's next record, which ends at `end_lsn`.
    pub(super) fn apply(&mut self, end_lsn: u64, record: &Record) -> Result<()> {
        let page_size = self.page_size;
        match record {
            Record::Checkpoint {
                page_count,
                free,
                key_counts,
            } => {
                let page_count = *page_count;
                self.key_counts = key_counts
                    .as_ref()
                    .map(|counts| counts.iter().copied().collect());
                self.page_count = page_count;
                self.checkpoint_page_count = page_count;
                if free.iter().any(|&id| id == 0 || id >= page_count) {
                    return Err(log_damage(0, "a checkpoint's free list is malformed"));
                }
                self.free = free.iter().copied().collect();
                if self.free.len() != free.len() {
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
                    self.redo_range_step(step, freed)?;
                }
                if *new_tree {
                    self.dropping.remove(&images[0].0);
                }
                // A freed page is no tree's root: a dropped tree keeps no count, a removal
                // begun on it before the drop is forgotten with it, and it is no longer a tree
                // to free if its catalog entry is missing (its id may be in use again by then).
                self.new_trees.retain(|root| !freed.contains(root));
                for page_id in freed {
                    if let Some(counts) = &mut self.key_counts {
                        counts.remove(page_id);
                    }
                    self.removals.retain(|_, removal| removal.tree != *page_id);
                }
                if *new_tree {
                    self.new_trees.push(images[0].0);
                    if let Some(counts) = &mut self.key_counts {
                        counts.insert(images[0].0, 0);
                    }
                }
                for &page_id in freed {
                    check_page_id(page_id, page_size)?;
                    // A page allocated and freed within one checkpoint interval may already
                    // be free in the checkpoint's snapshot: freeing is idempotent here.
                    self.free.insert(page_id);
                    self.pages.remove(page_id);
                    self.blob_pages.remove(&page_id);
                    self.page_count = self.page_count.max(page_id + 1);
                }
                for (page_id, bytes) in images {
                    self.install_image(*page_id, bytes, end_lsn)?;
                }
            }
            Record::Put { .. } | Record::Remove { .. } | Record::Patch { .. } => {
                self.redo_leaf_change(end_lsn, record)?;
            }
            Record::Split(split) => {
                self.redo_logged_split(split, end_lsn)?;
                self.free.remove(&split.left);
                self.page_count = self.page_count.max(split.left + 1);
            }
            Record::RangeRemoval(removal) => {
                if removal.drop {
                    self.dropping.insert(removal.tree);
                    self.removals.retain(|_, other| other.tree != removal.tree);
                } else if self.dropping.contains(&removal.tree) {
                    return Ok(());
                }
                if self
                    .removals
                    .insert(removal.removal, removal.clone())
                    .is_some()
                {
                    return Err(log_damage(removal.tree, "a range removal begun twice"));
                }
            }
            Record::Commit { batch } => {
                self.removals.remove(batch);
                let changes = self.batch_blobs.remove(batch).unwrap_or_default();
                for blob in changes.unreferenced() {
                    self.free_blob(&blob);
                }
            }
            Record::SyncMark { .. } | Record::Padding => {}
        }
        Ok(())
    }

    /// Writes the rebuilt pages to the page file, frees what the undo leaves `orphaned` and
    /// what no record describes, and hands over the state for the open database.
    pub(super) fn finish(
        mut self,
        undo: Vec<Undo>,
        orphaned: Vec<BlobRef>,
        batches_rolled_back: usize,
    ) -> Result<Redone> {
        // A page allocated since the checkpoint that no surviving record describes (its
        // operation was cut short by the crash, while a later allocation was logged) is free.
        let described = self.pages.len() + self.blob_pages.len();
        let unexplained = (self.page_count.saturating_sub(self.checkpoint_page_count) as usize)
            .saturating_sub(described);
        if unexplained > MAX_UNDESCRIBED_PAGES {
            return Err(log_damage(
                0,
                format!("{unexplained} pages allocated since the checkpoint without a record"),
            ));
        }
        for blob in &orphaned {
            self.free_blob(blob);
        }
        for page_id in self.checkpoint_page_count.max(1)..self.page_count {
            if !self.pages.contains(page_id) && !self.blob_pages.contains(&page_id) {
                self.free.insert(page_id);
            }
        }
        let new_trees = std::mem::take(&mut self.new_trees)
            .into_iter()
            .filter(|&page_id| self.pages.contains(page_id))
            .collect();
        self.storage
            .extend_to(offset(self.page_count, self.page_size)?)
            .map_err(|e| Error::io("extending the page file at recovery", e))?;
        let pages_spilled = self.pages.spill_writes;
        let pages = self.pages.write_all()?.len();
        Ok(Redone {
            page_count: self.page_count,
            free: self.free.into_iter().collect(),
            undo,
            new_trees,
            pages,
            pages_spilled,
            batches_rolled_back,
            key_counts: self.key_counts,
            range_removals: self.removals.into_values().collect(),
        })
    }

    fn redo_leaf_change(&mut self, end_lsn: u64, record: &Record) -> Result<()> {
        let page_size = self.page_size;
        let (tree, batch, key, before) = leaf_change_of(record).expect("a leaf record");
        let (Record::Put { page_id, image, .. }
        | Record::Remove { page_id, image, .. }
        | Record::Patch { page_id, image, .. }) = record
        else {
            unreachable!("a leaf record")
        };
        let page_id = *page_id;
        let put = match record {
            Record::Put {
                value, blob: true, ..
            } => Some(decode_blob(value, page_size, page_id)?),
            _ => None,
        };
        if let Some(blob) = &put {
            // A large value's pages are in use from its record on.
            for page_id in blob.page_ids() {
                check_page_id(page_id, page_size)?;
                #[cfg(debug_assertions)]
                debug_assert!(
                    !self.pages.is_stale(page_id),
                    "large value on page {page_id}, which recovery wrote early and a record freed"
                );
                self.free.remove(&page_id);
                self.blob_pages.insert(page_id);
                self.page_count = self.page_count.max(page_id + 1);
            }
        }
        let dropped = match before {
            Before::Blob(reference) => Some(decode_blob(reference, page_size, page_id)?),
            _ => None,
        };
        // The large value replaced is free once the change is committed: a single operation
        // at once (unless it put the same value back), a batch at its commit if it did not
        // put it back.
        match (batch, dropped, put) {
            (0, Some(dropped), put) if put.as_ref().is_none_or(|put| put.id != dropped.id) => {
                self.free_blob(&dropped);
            }
            (0, ..) => {}
            (batch, dropped, put) => {
                let changes = self.batch_blobs.entry(batch).or_default();
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
        if let Some(counts) = &mut self.key_counts {
            if let Some(keys) = counts.get_mut(&tree) {
                // A count is derived data: one that cannot be right (it came from a scan that
                // raced writes) is counted again later, not an error.
                match keys.checked_add_signed(delta) {
                    Some(updated) => *keys = updated,
                    None => _ = counts.remove(&tree),
                }
            }
        }
        if let Some(image) = image {
            self.install_image(page_id, image, end_lsn)?;
        }
        // The page must have an image earlier in the log (see the module notes).
        let page = self.pages.get_mut(page_id)?.ok_or_else(|| {
            log_damage(page_id, "a logged change to a page with no image before it")
        })?;
        match record {
            Record::Put { value, blob, .. } => redo_put(page, key, value, *blob),
            Record::Patch {
                value_len, ranges, ..
            } => redo_patch(page, key, *value_len, ranges),
            _ => redo_remove(page, key),
        }
        .map_err(|reason| log_damage(page_id, reason))?;
        page_format::set_lsn(page, end_lsn);
        Ok(())
    }

    fn free_blob(&mut self, blob: &BlobRef) {
        for page_id in blob.page_ids() {
            self.free.insert(page_id);
            self.blob_pages.remove(&page_id);
        }
    }

    /// Checks a page image from the log and makes it the page's current state.
    fn install_image(&mut self, page_id: u64, bytes: &[u8], end_lsn: u64) -> Result<()> {
        check_page_id(page_id, self.page_size)?;
        if bytes.len() != self.page_size {
            return Err(log_damage(page_id, "a page image of the wrong size"));
        }
        check_image(bytes).map_err(|reason| log_damage(page_id, reason))?;
        let mut page = AlignedBuf::new(self.page_size);
        page.copy_from_slice(bytes);
        page_format::set_lsn(&mut page, end_lsn);
        self.pages.insert(page_id, page)?;
        self.free.remove(&page_id);
        self.page_count = self.page_count.max(page_id + 1);
        Ok(())
    }

    /// Replays a logical split: the node and its parent have images earlier in the log; the
    /// new page starts empty.
    fn redo_logged_split(&mut self, split: &Split, end_lsn: u64) -> Result<()> {
        let ids = [split.page_id, split.parent, split.left];
        for page_id in ids {
            check_page_id(page_id, self.page_size)?;
        }
        if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
            return Err(log_damage(split.page_id, "a split naming one page twice"));
        }
        let mut node = self.pages.take(split.page_id)?;
        let mut parent = self.pages.take(split.parent)?;
        let mut left = AlignedBuf::new(self.page_size);
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
                self.pages.insert(page_id, page)?;
            }
        }
        outcome
    }

    /// Applies a range step's bookkeeping: its keys leave the tree's count and its removal
    /// goes on after the key the step reached, or is finished: at the end of its range, or,
    /// for a drop, with the step that frees the tree's root (before it, a drop goes on from
    /// the start).
    fn redo_range_step(&mut self, step: &RangeStep, freed: &[u64]) -> Result<()> {
        // A step of a removal the tree's drop took over (see `redo`) only frees what it frees.
        let Some(removal) = self.removals.get_mut(&step.removal) else {
            return Ok(());
        };
        if removal.tree != step.tree {
            return Err(log_damage(step.tree, "a range step of another tree"));
        }
        if let Some(counts) = &mut self.key_counts {
            if let Some(keys) = counts.get_mut(&step.tree) {
                match keys.checked_sub(step.keys) {
                    Some(left) => *keys = left,
                    None => _ = counts.remove(&step.tree),
                }
            }
        }
        match &step.through {
            _ if removal.drop && freed.contains(&step.tree) => {
                _ = self.removals.remove(&step.removal)
            }
            Some(key) if !beyond(key, removal.end.as_ref().map(Vec::as_slice)) => {
                removal.start = Bound::Excluded(key.clone());
            }
            _ if removal.drop => removal.start = Bound::Unbounded,
            _ => _ = self.removals.remove(&step.removal),
        }
        Ok(())
    }
}
