//! Writing pages: one write-back per frame at a time from a consistent copy taken under a
//! shared latch (swizzled swips replaced by page ids), the background writer's pass over the
//! old half of the cooling stage, and `flush`, which writes runs of consecutive dirty pages
//! with one write each (fewer system calls and device requests than a write per page).
//!
//! Invariants: no frame index reaches the disk; an older image never lands after a newer one
//! (the `writing` claim); no image is written before the log is durable up to its page LSN
//! and up to the end of the staged records its frame's mark names (the WAL rule); the dirty
//! flag is cleared only if the page did not change since its copy was taken.

use super::policy::Policy;
use super::*;

/// Longest sleep of a thread waiting for another thread's page write (it is woken when a
/// write ends; the bound only limits what a missed wake-up could cost).
pub(super) const WRITE_WAIT: Duration = Duration::from_millis(1);

/// Pages `flush` writes with one write at most.
const FLUSH_RUN_PAGES: usize = 32;

/// The `writing` claims of the frames of a run, given up when dropped: also when a write
/// panics (a bug), since a claim left behind would make every later write of the frame, the
/// final flush at close included, wait forever.
struct Claimed<'a, P: Policy> {
    bm: &'a BufferManager<P>,
    run: &'a [(u64, FrameId)],
}

/// Which dirty pages a flush writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlushPages {
    /// Every one: afterwards the page file holds every change made before the flush.
    All,
    /// Those of a checkpoint that began at this LSN, whose recovery starts there: all but the
    /// pages changed since then whose records are all in the log (a batch's staged records
    /// once published), which hold them whole (their images) from there on. While
    /// updates keep changing a page, the checkpoints that follow leave it to the log; the
    /// first that finds it unchanged since its start writes it (YCSB A: every leaf changes
    /// within a second of a checkpoint's start, so most checkpoints wrote each leaf for nothing).
    NotLoggedSince(u64),
}

impl<P: Policy> Drop for Claimed<'_, P> {
    fn drop(&mut self) {
        for &(_, frame) in self.run {
            self.bm.frame(frame).finish_writing();
        }
        self.bm.writes_finished.notify();
    }
}

impl<P: Policy> BufferManager<P> {
    /// Writes the page in `frame` if it is dirty. A consistent copy is taken under a shared
    /// latch (`wait` decides whether to wait for it); swizzled swips in the copy are replaced
    /// by page ids; the dirty flag is cleared only if nothing changed since the copy.
    pub(crate) fn write_back(&self, frame: FrameId, wait: bool) -> Result<bool> {
        if !self.claim_writing(frame, wait) {
            return Ok(false);
        }
        let one = [(0, frame)];
        let claimed = Claimed {
            bm: self,
            run: &one,
        };
        let written = self.write_back_claimed(frame, wait);
        drop(claimed);
        self.free_written_deleted_pages();
        written
    }

    /// Takes the frame's `writing` claim, waiting for another write of it if `wait`; false if
    /// not waiting and the claim is taken.
    fn claim_writing(&self, frame: FrameId, wait: bool) -> bool {
        let header = self.frame(frame);
        loop {
            let seen = self.writes_finished.count();
            if header.try_start_writing() {
                return true;
            }
            if !wait {
                return false;
            }
            self.writes_finished.wait_past(seen, WRITE_WAIT);
        }
    }

    /// Writes the frames of `run`, which held the consecutive pages `run[i].0` when listed,
    /// with as few writes as the pages still there and dirty allow (a page clean by now, or
    /// no longer in its frame, splits the run; a frame holding another page by now is written
    /// on its own). Waits for other writes of them. `images` holds a page per run entry at
    /// least (reused: zeroing 512 KiB per run cost checkpoints a tenth of their time).
    fn write_run(
        &self,
        run: &[(u64, FrameId)],
        images: &mut [u8],
        pages: FlushPages,
    ) -> Result<()> {
        for &(_, frame) in run {
            self.claim_writing(frame, true);
        }
        let claimed = Claimed { bm: self, run };
        let written = self.write_run_claimed(run, images, pages);
        drop(claimed);
        self.free_written_deleted_pages();
        written
    }

    /// `write_run` for a caller that holds every frame's `writing` claim.
    fn write_run_claimed(
        &self,
        run: &[(u64, FrameId)],
        images: &mut [u8],
        pages: FlushPages,
    ) -> Result<()> {
        let page_size = self.page_size();
        debug_assert!(images.len() >= run.len() * page_size);
        // The version of each page copied (None: not written with the run).
        let mut copied: Vec<Option<u64>> = Vec::with_capacity(run.len());
        let mut moved = Vec::new();
        // The LSN up to which the log must be durable before they are written.
        let mut newest = 0;
        for (slot, &(page_id, frame)) in run.iter().enumerate() {
            let header = self.frame(frame);
            let shared = header.latch.lock_shared();
            let dirty = header.state() != FrameState::Free && header.is_dirty();
            let listed = dirty && header.page_id() == page_id;
            if dirty && !listed {
                moved.push(frame);
            }
            let writable = listed && !self.logged_whole_since(frame, pages);
            if writable {
                let image = &mut images[slot * page_size..(slot + 1) * page_size];
                self.copy_for_disk(frame, image);
                newest = newest.max(self.wal_lsn(header.staged_mark(), image));
                page_format::seal(image, page_id);
            }
            copied.push(writable.then(|| shared.version()));
        }
        // The WAL rule, for all of them at once.
        if let (Some(log), true) = (&self.log, newest > 0) {
            log.wait_durable(newest)?;
        }
        let mut slot = 0;
        while slot < run.len() {
            if copied[slot].is_none() {
                slot += 1;
                continue;
            }
            let start = slot;
            while slot < run.len() && copied[slot].is_some() {
                slot += 1;
            }
            self.storage
                .write_at(
                    &images[start * page_size..slot * page_size],
                    run[start].0 * page_size as u64,
                )
                .map_err(|e| Error::io("writing a page", e))?;
            self.count(Counter::PageWrites, (slot - start) as u64);
        }
        for (&(page_id, frame), version) in run.iter().zip(copied) {
            let header = self.frame(frame);
            if let (Some(version), Some(shared)) = (version, header.latch.try_lock_shared()) {
                if header.page_id() == page_id && shared.version() == version {
                    header.set_dirty(false);
                }
            }
        }
        for frame in moved {
            self.write_back_claimed(frame, true)?;
        }
        Ok(())
    }

    /// `write_back` for a caller that holds the frame's `writing` claim.
    fn write_back_claimed(&self, frame: FrameId, wait: bool) -> Result<bool> {
        let header = self.frame(frame);
        let shared = if wait {
            header.latch.lock_shared()
        } else {
            match header.latch.try_lock_shared() {
                Some(shared) => shared,
                None => return Ok(false),
            }
        };
        if header.state() == FrameState::Free || !header.is_dirty() {
            return Ok(false);
        }
        let page_id = header.page_id();
        let version = shared.version();
        let mut image = AlignedBuf::new(self.page_size());
        self.copy_for_disk(frame, &mut image);
        let mark = header.staged_mark();
        drop(shared);
        // The WAL rule: the records describing this image are durable before it is written.
        if let Some(log) = &self.log {
            log.wait_durable(self.wal_lsn(mark, &image))?;
        }
        page_format::seal(&mut image, page_id);
        self.storage
            .write_at(&image, page_id * self.page_size() as u64)
            .map_err(|e| Error::io("writing a page", e))?;
        self.count(Counter::PageWrites, 1);
        if let Some(shared) = header.latch.try_lock_shared() {
            if header.page_id() == page_id && shared.version() == version {
                header.set_dirty(false);
            }
        }
        Ok(true)
    }

    /// Replaces every swizzled swip in a page image by the page id of its target, so that no
    /// frame index ever reaches the disk. The image's source frame is latched by the caller,
    /// which keeps its children in place.
    pub(super) fn unswizzle_image(&self, image: &mut [u8]) {
        let Some(iterate) = self.child_iterator(PageView::from_slice(image)) else {
            return;
        };
        let mut replacements = Vec::new();
        iterate(PageView::from_slice(image), &mut |offset| {
            let word = PageView::from_slice(image).u64(offset);
            if let Some(SwipTarget::Frame(child)) = Swip::decode(word, self.frame_count()) {
                replacements.push((offset, self.frame(child).page_id()));
            }
            true
        });
        let mut page = PageMut::from_slice(image);
        for (offset, page_id) in replacements {
            page.set_u64(offset, Swip::unswizzled_word(page_id));
        }
    }

    /// Dirty pages that have entered the cooling stage so far: while the count stands still,
    /// the background writer has nothing new to look for.
    pub(crate) fn dirty_pages_cooled(&self) -> u64 {
        self.cooling.lock().dirty_pushed()
    }

    /// Writes the dirty pages among up to `limit` cooling frames of the old half of the FIFO
    /// that the background writer has not examined yet (its work). Returns how many frames
    /// it examined.
    ///
    /// The young half is left alone: a page unswizzled moments ago is the one most likely to
    /// be touched and dirtied again (a hot page the random choice happened to hit), and
    /// writing it then is wasted. Eviction takes frames from the old end only, so the old
    /// half is all the writer has to keep clean.
    pub(crate) fn write_cooling_pages(&self, limit: usize) -> usize {
        let candidates = self.cooling.lock().frames_to_examine(&self.pool, limit);
        let mut written = 0;
        for &frame in &candidates {
            if self.frame(frame).is_dirty() && matches!(self.write_back(frame, false), Ok(true)) {
                written += 1;
            }
        }
        self.count(Counter::BackgroundWrites, written);
        candidates.len()
    }

    /// Whether a flush of `pages` leaves out the page in `frame` (latched by the caller)
    /// because recovery from the checkpoint it serves rebuilds the page from the log alone:
    /// the page changed since that checkpoint began (its LSN lies past the start), so its
    /// first change since logged its whole image, and every record of it is in the log (a
    /// staged record only once its publication is: the checkpoint makes the log durable to
    /// its end before it completes).
    fn logged_whole_since(&self, frame: FrameId, pages: FlushPages) -> bool {
        match pages {
            FlushPages::All => false,
            FlushPages::NotLoggedSince(start) => {
                let mark = self.frame(frame).staged_mark();
                let in_log =
                    mark == 0 || self.log.as_ref().is_some_and(|log| log.is_published(mark));
                in_log && page_format::lsn(self.page(frame).all()) > start
            }
        }
    }

    /// Writes the dirty pages `pages` asks for, runs of consecutive page ids with one write
    /// each, and syncs the storage.
    pub(crate) fn flush(&self, pages: FlushPages) -> Result<()> {
        let touched = self.fresh.load(Ordering::Acquire);
        // Which page each dirty frame holds, read unlatched: `write_run` checks it again.
        let mut dirty: Vec<(u64, FrameId)> = (0..touched)
            .filter(|&frame| self.frame(frame).is_dirty())
            .map(|frame| (self.frame(frame).page_id(), frame))
            .collect();
        dirty.sort_unstable();
        let mut images = AlignedBuf::new(FLUSH_RUN_PAGES.min(dirty.len()) * self.page_size());
        let mut start = 0;
        while start < dirty.len() {
            let mut end = start + 1;
            while end < dirty.len()
                && end - start < FLUSH_RUN_PAGES
                && dirty[end].0 == dirty[end - 1].0 + 1
            {
                end += 1;
            }
            self.write_run(&dirty[start..end], &mut images, pages)?;
            start = end;
        }
        self.storage
            .sync()
            .map_err(|e| Error::io("syncing the page file", e))
    }
}
