//! The buffer manager's side of the write-ahead log: describing page changes in the log under
//! the changed pages' exclusive latches and stamping each page with the LSN of its latest
//! change, the image rule, and the checkpoint's exact snapshot of page allocation.
//!
//! * A leaf operation is logged by key; if the page's last change lies at or before the image
//!   threshold (the current checkpoint's start), the record carries the page's full image, so
//!   that recovery rebuilds every page changed since a checkpoint from the log alone (torn
//!   pages included).
//! * A structural change (split, merge, new root, new tree) is one record with the images of
//!   all pages it changed and the ids it freed: atomic in the log. A split whose node and
//!   parent recovery will hold anyway (both described since the checkpoint began) is logged
//!   logically instead: how it split, a few bytes instead of three pages.
//! * Page-id allocation and the log agree exactly: records that free ids or first describe a
//!   new page are appended under the page-id lock, and a page allocated but not yet described
//!   counts as free in a checkpoint's snapshot (a crash before its record leaks nothing).
//!
//! * A batch's leaf records may be staged by its thread until its commit (`wal/staging.rs`):
//!   the page then keeps a mark in its frame header, which write-back resolves to an LSN.
//!
//! Invariant: a page's LSN (header bytes 16..24) is the end of the last record describing it,
//! or, if a staged record changed it last, a lower bound of that record's end above the
//! checkpoint's start at the change (kept after the record is published); write-back makes the
//! log durable up to the LSN and up to the end of its mark's publication before writing it.

use super::policy::Policy;
use super::*;
use crate::blob::BlobRef;
use crate::wal::{BeforeRef, LeafChange, LeafOp, Log, LogPosition, Logged, RangeStep, Split};

/// The large values a leaf operation starts or stops referencing (see `buffer/blob.rs`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BlobChange<'a> {
    /// Written for this operation: its extents are described by the operation's record.
    pub(crate) added: Option<&'a BlobRef>,
    /// The value the operation replaced or removed: an operation on its own (batch 0) frees
    /// it with its record; a batch frees it with its commit ([`BufferManager::commit`]).
    pub(crate) dropped: Option<&'a BlobRef>,
}
use crate::key_count::KeyStripe;

impl<P: Policy> BufferManager<P> {
    pub(crate) fn log(&self) -> Option<&Arc<Log>> {
        self.log.as_ref()
    }

    /// Logs a leaf operation on the page in `frame`, just applied under `guard`, and changes
    /// `count`, this thread's stripe of the tree's key count, as it does; returns the end LSN
    /// of its record (0 without a log, or if the record was staged: a batch's, whose commit
    /// gives the LSN to wait for).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn log_leaf(
        &self,
        frame: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        tree: u64,
        batch: u64,
        op: LeafOp<'_>,
        before: BeforeRef<'_>,
        blobs: BlobChange<'_>,
        count: &KeyStripe,
    ) -> u64 {
        let dropped = blobs.dropped.filter(|_| batch == 0);
        let Some(log) = &self.log else {
            op.count_keys(count);
            if let Some(dropped) = dropped {
                self.page_ids.lock().release_extents(&dropped.extents, 0);
            }
            return 0;
        };
        let header = self.frame(frame);
        let page_id = header.page_id();
        let page_lsn = page_format::lsn(self.page(frame).all());
        log.settle(header.staged_mark());
        // A page no record described yet is described now, under the page-id lock (see the
        // module notes); every page is described at creation, so this is a safeguard. Large
        // values the record references or frees change allocation with it, under the lock.
        let ids = (page_lsn == 0 || blobs.added.is_some() || dropped.is_some())
            .then(|| self.page_ids.lock());
        let change = LeafChange {
            page_id,
            tree,
            batch,
            op,
            before,
        };
        let mut fill = |image: &mut [u8]| self.copy_for_log(frame, image);
        // Records that change allocation are appended at once, under the page-id lock.
        let may_stage = ids.is_none();
        let logged = log.append_leaf(
            change,
            page_lsn,
            self.page_size(),
            &mut fill,
            count,
            may_stage,
        );
        let end = match logged {
            Logged::Appended(end) => end,
            Logged::Staged { mark, page_lsn } => {
                header.set_staged_mark(guard, mark);
                self.page_mut(frame, guard)
                    .set_u64(page_format::LSN_OFFSET, page_lsn);
                return 0;
            }
        };
        // The page's staged records precede this one (settled above, or its own published
        // by the append): its LSN covers them now.
        header.set_staged_mark(guard, 0);
        if let Some(mut ids) = ids {
            ids.logged(page_id);
            if let Some(added) = blobs.added {
                ids.extents_logged(&added.extents);
            }
            if let Some(dropped) = dropped {
                ids.release_extents(&dropped.extents, end);
            }
        }
        self.page_mut(frame, guard)
            .set_u64(page_format::LSN_OFFSET, end);
        end
    }

    /// Logs a structural change as one record: the images of the pages in `changed` (latched
    /// exclusively by the caller, as the guards show) and the ids of the pages in `freed`
    /// (latched too, deleted by the caller afterwards). Without a log, does nothing.
    pub(crate) fn log_structure(
        &self,
        changed: &mut [(FrameId, &mut ExclusiveGuard<'_>)],
        freed: &[FrameId],
    ) {
        self.log_structure_record(changed, freed, &[], Shape::Images, None);
    }

    /// Logs a step of a range removal as one record: `step`, the images of the pages in
    /// `changed`, the ids of the pages in `freed` (all latched exclusively by the caller, the
    /// freed ones deleted by it afterwards) and of the large values `blobs` the freed leaves
    /// referenced, which are freed with the record. This thread's stripe `count` of the tree's
    /// key count loses `step.keys` as the record is appended (or at once, without a log).
    pub(crate) fn log_range_step(
        &self,
        changed: &mut [(FrameId, &mut ExclusiveGuard<'_>)],
        freed: &[FrameId],
        blobs: &[BlobRef],
        step: &RangeStep,
        count: &KeyStripe,
    ) {
        if self.log.is_none() {
            count.remove(step.keys);
            let mut ids = self.page_ids.lock();
            for blob in blobs {
                ids.release_extents(&blob.extents, 0);
            }
            return;
        }
        self.log_structure_record(changed, freed, blobs, Shape::RangeStep(step), Some(count));
    }

    /// Appends batch `batch`'s commit record, which frees the large values `dropped` its
    /// changes replaced or removed; returns its end LSN. Without a log, frees them at once
    /// and returns 0.
    pub(crate) fn commit(&self, batch: u64, dropped: &[BlobRef]) -> u64 {
        let Some(log) = &self.log else {
            let mut ids = self.page_ids.lock();
            for blob in dropped {
                ids.release_extents(&blob.extents, 0);
            }
            return 0;
        };
        if dropped.is_empty() {
            return log.commit(batch);
        }
        let mut ids = self.page_ids.lock();
        let end = log.commit(batch);
        for blob in dropped {
            ids.release_extents(&blob.extents, end);
        }
        end
    }

    /// Logs a node split: `changed` holds the new page with the left part, the node split
    /// and its parent, in that order (latched exclusively by the caller); `left_count`,
    /// `right_start` and `separator` say how it split (see `Record::Split`). The record is
    /// logical when recovery will hold the node and its parent (both were described since the
    /// current checkpoint began), else it holds the three pages' images.
    pub(crate) fn log_split(
        &self,
        changed: &mut [(FrameId, &mut ExclusiveGuard<'_>); 3],
        left_count: usize,
        right_start: usize,
        separator: &[u8],
    ) {
        let [left, target, parent] = [0, 1, 2].map(|i| self.frame(changed[i].0).page_id());
        let split = Split {
            page_id: target,
            left,
            parent,
            left_count,
            right_start,
            separator: separator.to_vec(),
        };
        self.log_structure_record(changed, &[], &[], Shape::Split(split), None);
    }

    /// Logs the creation of a tree whose root (new, latched by `guard`) is in `frame`.
    pub(crate) fn log_new_tree(&self, frame: FrameId, guard: &mut ExclusiveGuard<'_>) {
        self.log_structure_record(&mut [(frame, guard)], &[], &[], Shape::NewTree, None);
    }

    /// Frees `page_id`, which nothing references any more, by a record of its own (recovery
    /// uses it for the root of a tree whose creation a crash cut short).
    pub(crate) fn free_unreferenced(&self, page_id: u64) {
        let Some(log) = &self.log else {
            return;
        };
        let mut ids = self.page_ids.lock();
        ids.free_unreferenced(page_id);
        log.append(|writer, _| {
            writer.structure::<FrameId>(&[], &[page_id], false, None, self.page_size(), |_, _| {
                (0, 0)
            })
        });
    }

    /// Logs a structural change as `shape` says: a split logically if recovery will hold
    /// every changed page but the first, else (and every other shape) with the images of all
    /// changed pages. A range step's keys leave the key count (`count`, this thread's stripe)
    /// under the log's mutex (no checkpoint record can come between); the large values `blobs`
    /// are freed with the record.
    fn log_structure_record(
        &self,
        changed: &mut [(FrameId, &mut ExclusiveGuard<'_>)],
        freed: &[FrameId],
        blobs: &[BlobRef],
        shape: Shape<'_>,
        count: Option<&KeyStripe>,
    ) {
        let Some(log) = &self.log else {
            return;
        };
        // Other threads' staged records of these pages come first (see `wal/staging.rs`).
        for frame in changed.iter().map(|(frame, _)| frame).chain(freed) {
            log.settle(self.frame(*frame).staged_mark());
        }
        let mut ids = self.page_ids.lock();
        let mut freed_ids: Vec<u64> = freed.iter().map(|&f| self.frame(f).page_id()).collect();
        for &page_id in &freed_ids {
            ids.free_logged(page_id);
        }
        freed_ids.extend(blobs.iter().flat_map(BlobRef::page_ids));
        let pages: Vec<(u64, FrameId)> = changed
            .iter()
            .map(|(frame, _)| (self.frame(*frame).page_id(), *frame))
            .collect();
        // The oldest change among the pages a logical split needs recovery to hold.
        let oldest_needed = changed
            .get(1..)
            .unwrap_or_default()
            .iter()
            .map(|(frame, _)| page_format::lsn(self.page(*frame).all()))
            .min()
            .unwrap_or(0);
        let ((), end) = log.append(|writer, image_threshold| {
            let (new_tree, step) = match shape {
                Shape::Split(split) if oldest_needed > image_threshold => {
                    writer.split(&split);
                    return;
                }
                Shape::Split(_) | Shape::Images => (false, None),
                Shape::NewTree => (true, None),
                Shape::RangeStep(step) => (false, Some(step)),
            };
            writer.structure(
                &pages,
                &freed_ids,
                new_tree,
                step,
                self.page_size(),
                |frame, image| self.copy_for_log(frame, image),
            );
            if let (Some(step), Some(count)) = (step, count) {
                count.remove(step.keys);
            }
        });
        for (page_id, _) in &pages {
            ids.logged(*page_id);
        }
        for blob in blobs {
            ids.release_extents(&blob.extents, end);
        }
        drop(ids);
        for (frame, guard) in changed.iter_mut() {
            self.frame(*frame).set_staged_mark(guard, 0); // covered by `end` (settled above)
            self.page_mut(*frame, guard)
                .set_u64(page_format::LSN_OFFSET, end);
        }
    }

    /// Begins a checkpoint (see `Log::begin_checkpoint`) with the page allocation as of its
    /// record (pages allocated but not yet logged count as free) and the key counts that
    /// `key_counts` takes.
    pub(crate) fn begin_checkpoint(
        &self,
        log: &Log,
        key_counts: impl FnOnce() -> Vec<(u64, u64)>,
    ) -> LogPosition {
        let ids = self.page_ids.lock();
        let (page_count, free) = ids.snapshot_for_log();
        log.begin_checkpoint(page_count, &free, key_counts)
    }

    /// The LSN up to which the log must be durable before `image` is written: its page LSN,
    /// or, if the frame's staging mark was `mark` when the copy was taken (under a latch), the
    /// end of the staged records that describe it, published now if need be (see
    /// `wal/staging.rs`). The image keeps its LSN: a resolved end may lie beyond the record's
    /// (a later publication's), and a page whose LSN lay past a checkpoint's start that its
    /// last record precedes would skip its image at its next change.
    pub(super) fn wal_lsn(&self, mark: u64, image: &[u8]) -> u64 {
        let lsn = page_format::lsn(image);
        match &self.log {
            Some(log) if mark != 0 => lsn.max(log.resolve(mark)),
            _ => lsn,
        }
    }

    /// Copies the page in `frame` into `image` as it goes to disk or into the log: swizzled
    /// swips replaced by page ids. The caller holds a latch on the frame.
    pub(super) fn copy_for_disk(&self, frame: FrameId, image: &mut [u8]) {
        image.copy_from_slice(self.page(frame).all());
        self.unswizzle_image(image);
    }

    /// [`Self::copy_for_disk`] for the log; returns the free gap the log may leave out.
    fn copy_for_log(&self, frame: FrameId, image: &mut [u8]) -> (usize, usize) {
        self.copy_for_disk(frame, image);
        let page = self.page(frame);
        page_format::page_type(page.all())
            .and_then(|page_type| self.kinds[page_type as usize])
            .and_then(|kind| kind.free_gap)
            .map_or((0, 0), |free_gap| free_gap(page))
    }
}

/// What a structural record says besides the images and freed ids.
enum Shape<'a> {
    /// Nothing: the images say it all.
    Images,
    /// A split, logged logically when recovery will hold the pages it changes.
    Split(Split),
    /// The creation of a tree.
    NewTree,
    /// A step of a range removal.
    RangeStep(&'a RangeStep),
}
