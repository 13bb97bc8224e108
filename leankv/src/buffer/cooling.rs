//! The cooling stage and the in-flight I/O table (paper §IV-C, §IV-D), kept under one mutex.
//!
//! Cooling pages form a FIFO in unswizzle order, linked through the `fifo_prev`/`fifo_next`
//! fields of their frame headers (no allocation, O(1) removal when a page is touched again),
//! plus an index from page id to frame, consulted when an unswizzled swip is followed. Pages
//! just read from disk enter the same index, at the young end, until the faulting thread
//! swizzles them. The in-flight table maps a page id to the read currently bringing it in, so
//! that many threads faulting on one page cause one read.
//!
//! It also keeps the set of resident pages (held by a frame, hot or cooling). Pages become and
//! stop being resident only on the cold path (a read completes, a page is allocated, evicted
//! or deleted), so the set costs nothing on hits and cooling hits; it is what tells a second
//! reference to a page already in the pool (a damaged file) from a page to read.
//!
//! Invariants (all under the owning mutex): a page id is in at most one of `index` and
//! `in_flight`; a frame is in the FIFO exactly when it is in `index`, and then its state is
//! `Cooling`; every page in `index` is resident, and no page in `in_flight` is. Only the cold
//! path takes this mutex: hot-page accesses never touch it.

use super::frame::FrameId;
use super::pool::Pool;
use parking_lot::{Condvar, Mutex};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const NO_LINK: u32 = 0;

/// A page read in progress; other threads wanting the page wait on it.
#[derive(Default)]
pub(crate) struct InFlightRead {
    done: Mutex<bool>,
    finished: Condvar,
}

impl InFlightRead {
    pub(crate) fn wait(&self) {
        let mut done = self.done.lock();
        while !*done {
            self.finished.wait(&mut done);
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        *self.done.lock()
    }

    pub(crate) fn finish(&self) {
        *self.done.lock() = true;
        self.finished.notify_all();
    }
}

#[derive(Default)]
pub(crate) struct CoolingStage {
    /// Oldest cooling frame (next to evict) and newest.
    oldest: Option<FrameId>,
    newest: Option<FrameId>,
    index: FxHashMap<u64, FrameId>,
    in_flight: FxHashMap<u64, Arc<InFlightRead>>,
    /// Pages held by a frame, hot or cooling.
    resident: FxHashSet<u64>,
    /// Dirty frames pushed so far. A cooling page is never dirtied (a write makes it hot
    /// first), so while this stands still no new work for the background writer has come.
    dirty_pushed: u64,
    /// Frames pushed so far: the next push number.
    pushed: u64,
    /// The background writer's cursor: the oldest frame it has not examined yet (`None`:
    /// it examined them all). Frames pushed at or after `writer_seq` are unexamined, and
    /// `unexamined` counts those still in the FIFO. Since a cooling page is never dirtied,
    /// one look per cooling spell is enough; walking from the old end every round instead
    /// cost a cache miss per cooling frame per 64 pages written, under this mutex.
    writer_next: Option<FrameId>,
    writer_seq: u64,
    unexamined: usize,
}

fn link(frame: Option<FrameId>) -> u32 {
    frame.map_or(NO_LINK, |f| f + 1)
}

fn unlink(word: u32) -> Option<FrameId> {
    (word != NO_LINK).then(|| word - 1)
}

impl CoolingStage {
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Records that a frame now holds `page_id`; false if one already does or a read of it
    /// is in flight (its frame would be a second copy).
    #[must_use]
    pub(crate) fn admit(&mut self, page_id: u64) -> bool {
        !self.in_flight.contains_key(&page_id) && self.resident.insert(page_id)
    }

    /// Records that no frame holds `page_id` any more.
    pub(crate) fn release(&mut self, page_id: u64) {
        let removed = self.resident.remove(&page_id);
        debug_assert!(removed, "page {page_id} was not resident");
        debug_assert!(!self.index.contains_key(&page_id));
    }

    /// Whether a frame holds `page_id` (hot or cooling).
    pub(crate) fn is_resident(&self, page_id: u64) -> bool {
        self.resident.contains(&page_id)
    }

    pub(crate) fn lookup(&self, page_id: u64) -> Option<FrameId> {
        self.index.get(&page_id).copied()
    }

    /// Appends `frame` (holding `page_id`) at the young end.
    pub(crate) fn push_newest(&mut self, pool: &Pool, frame: FrameId, page_id: u64) {
        debug_assert!(
            !self.index.contains_key(&page_id),
            "page {page_id} cooling twice"
        );
        debug_assert!(!self.in_flight.contains_key(&page_id));
        debug_assert!(self.resident.contains(&page_id));
        let header = pool.frame(frame);
        header.fifo_prev.store(link(self.newest), Ordering::Relaxed);
        header.fifo_next.store(NO_LINK, Ordering::Relaxed);
        match self.newest {
            Some(newest) => pool
                .frame(newest)
                .fifo_next
                .store(frame + 1, Ordering::Relaxed),
            None => self.oldest = Some(frame),
        }
        self.newest = Some(frame);
        self.index.insert(page_id, frame);
        self.dirty_pushed += u64::from(header.is_dirty());
        header.fifo_seq.store(self.pushed, Ordering::Relaxed);
        self.pushed += 1;
        self.unexamined += 1;
        self.writer_next.get_or_insert(frame);
    }

    /// Dirty frames pushed since the stage was made (see `dirty_pushed`).
    pub(crate) fn dirty_pushed(&self) -> u64 {
        self.dirty_pushed
    }

    /// Removes `frame` (holding `page_id`) from the FIFO and the index.
    pub(crate) fn remove(&mut self, pool: &Pool, frame: FrameId, page_id: u64) {
        let removed = self.index.remove(&page_id);
        debug_assert_eq!(removed, Some(frame));
        let header = pool.frame(frame);
        let prev = unlink(header.fifo_prev.load(Ordering::Relaxed));
        let next = unlink(header.fifo_next.load(Ordering::Relaxed));
        if header.fifo_seq.load(Ordering::Relaxed) >= self.writer_seq {
            self.unexamined -= 1;
        }
        if self.writer_next == Some(frame) {
            self.writer_next = next;
        }
        match prev {
            Some(p) => pool.frame(p).fifo_next.store(link(next), Ordering::Relaxed),
            None => self.oldest = next,
        }
        match next {
            Some(n) => pool.frame(n).fifo_prev.store(link(prev), Ordering::Relaxed),
            None => self.newest = prev,
        }
    }

    /// The oldest cooling frame (the next to evict), if any.
    pub(crate) fn oldest(&self) -> Option<FrameId> {
        self.oldest
    }

    /// The cooling frame pushed after `frame` (toward the young end). Read it before removing
    /// `frame`: a walk from the old end that evicts as it goes visits only the frames it
    /// decides on (collecting a batch's candidates first visited four frame headers, each a
    /// cache miss, per frame freed).
    pub(crate) fn younger_than(&self, pool: &Pool, frame: FrameId) -> Option<FrameId> {
        unlink(pool.frame(frame).fifo_next.load(Ordering::Relaxed))
    }

    /// Up to `limit` frames the background writer has not examined yet, oldest first, from
    /// the old half of the FIFO only (see `BufferManager::write_cooling_pages`); they count
    /// as examined from now on.
    pub(crate) fn frames_to_examine(&mut self, pool: &Pool, limit: usize) -> Vec<FrameId> {
        let old_half = self.len().div_ceil(2);
        let mut frames = Vec::new();
        while let Some(frame) = self.writer_next {
            // Frames older than the cursor, all examined: its position from the old end.
            let position = self.len() - self.unexamined;
            if frames.len() == limit || position >= old_half {
                break;
            }
            let header = pool.frame(frame);
            debug_assert!(header.fifo_seq.load(Ordering::Relaxed) >= self.writer_seq);
            frames.push(frame);
            self.writer_seq = header.fifo_seq.load(Ordering::Relaxed) + 1;
            self.unexamined -= 1;
            self.writer_next = unlink(header.fifo_next.load(Ordering::Relaxed));
        }
        frames
    }

    pub(crate) fn in_flight(&self, page_id: u64) -> Option<Arc<InFlightRead>> {
        self.in_flight.get(&page_id).cloned()
    }

    pub(crate) fn start_read(&mut self, page_id: u64) -> Arc<InFlightRead> {
        debug_assert!(!self.index.contains_key(&page_id));
        debug_assert!(!self.resident.contains(&page_id));
        let read = Arc::new(InFlightRead::default());
        let previous = self.in_flight.insert(page_id, read.clone());
        debug_assert!(previous.is_none(), "two reads of page {page_id}");
        read
    }

    pub(crate) fn end_read(&mut self, page_id: u64) {
        self.in_flight.remove(&page_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to `limit` frames from the old end, oldest first.
    fn oldest_frames(stage: &CoolingStage, pool: &Pool, limit: usize) -> Vec<FrameId> {
        std::iter::successors(stage.oldest(), |&frame| stage.younger_than(pool, frame))
            .take(limit)
            .collect()
    }

    #[test]
    fn fifo_keeps_unswizzle_order_and_removes_from_the_middle() {
        let pool = Pool::new(8, 4096, false, None).unwrap();
        let mut stage = CoolingStage::default();
        for frame in 0..5 {
            assert!(stage.admit(100 + u64::from(frame)));
            stage.push_newest(&pool, frame, 100 + u64::from(frame));
        }
        assert_eq!(oldest_frames(&stage, &pool, 10), vec![0, 1, 2, 3, 4]);
        stage.remove(&pool, 2, 102);
        stage.remove(&pool, 0, 100);
        stage.remove(&pool, 4, 104);
        assert_eq!(oldest_frames(&stage, &pool, 10), vec![1, 3]);
        assert_eq!(stage.lookup(103), Some(3));
        assert_eq!(stage.lookup(102), None);
        assert!(stage.admit(200));
        assert!(!stage.admit(200), "admitted twice");
        stage.push_newest(&pool, 0, 200);
        assert_eq!(oldest_frames(&stage, &pool, 2), vec![1, 3]);
        assert_eq!(oldest_frames(&stage, &pool, 10), vec![1, 3, 0]);
        assert_eq!(stage.len(), 3);
    }

    #[test]
    fn the_writer_examines_each_cooling_frame_once_and_only_in_the_old_half() {
        let pool = Pool::new(16, 4096, false, None).unwrap();
        let mut stage = CoolingStage::default();
        let push = |stage: &mut CoolingStage, frame: FrameId| {
            assert!(stage.admit(100 + u64::from(frame)));
            stage.push_newest(&pool, frame, 100 + u64::from(frame));
        };
        let remove = |stage: &mut CoolingStage, frame: FrameId| {
            stage.remove(&pool, frame, 100 + u64::from(frame));
            stage.release(100 + u64::from(frame));
        };
        for frame in 0..8 {
            push(&mut stage, frame);
        }
        // The old half is frames 0-3; a step takes at most the limit.
        assert_eq!(stage.frames_to_examine(&pool, 3), vec![0, 1, 2]);
        assert_eq!(stage.frames_to_examine(&pool, 3), vec![3]);
        assert_eq!(stage.frames_to_examine(&pool, 3), Vec::<FrameId>::new());
        // Removing examined frames (evicted) moves the old half forward; removing the
        // cursor's frame (touched again) moves the cursor to the next.
        remove(&mut stage, 0);
        remove(&mut stage, 1);
        remove(&mut stage, 4);
        // Left: 2 3 | 5 6 7 (examined | not); the old half of five is three frames.
        assert_eq!(stage.frames_to_examine(&pool, 8), vec![5]);
        remove(&mut stage, 2);
        remove(&mut stage, 3);
        // Left: 5 | 6 7; pushed again after eviction: 5 | 6 7 0 1 — old half is three.
        push(&mut stage, 0);
        push(&mut stage, 1);
        assert_eq!(stage.frames_to_examine(&pool, 8), vec![6, 7]);
        remove(&mut stage, 5);
        remove(&mut stage, 6);
        remove(&mut stage, 7);
        assert_eq!(stage.frames_to_examine(&pool, 8), vec![0]);
        remove(&mut stage, 0);
        remove(&mut stage, 1);
        assert_eq!(stage.len(), 0);
        // Everything examined or gone: the next push is the cursor again.
        push(&mut stage, 9);
        assert_eq!(stage.frames_to_examine(&pool, 8), vec![9]);
    }
}
