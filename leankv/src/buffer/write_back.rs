//! Writing pages: one write-back per frame at a time from a consistent copy taken under a
//! shared latch (swizzled swips replaced by page ids), the background writer's pass over the
//! old half of the cooling stage, and `flush`.
//!
//! Invariants: no frame index reaches the disk; an older image never lands after a newer one
//! (the `writing` claim); no image is written before the log is durable up to its page LSN
//! (the WAL rule); the dirty flag is cleared only if the page did not change since its copy
//! was taken.

use super::policy::Policy;
use super::*;

/// Longest sleep of a thread waiting for another thread's page write (it is woken when a
/// write ends; the bound only limits what a missed wake-up could cost).
pub(super) const WRITE_WAIT: Duration = Duration::from_millis(1);

impl<P: Policy> BufferManager<P> {
    /// Writes the page in `frame` if it is dirty. A consistent copy is taken under a shared
    /// latch (`wait` decides whether to wait for it); swizzled swips in the copy are replaced
    /// by page ids; the dirty flag is cleared only if nothing changed since the copy.
    pub(crate) fn write_back(&self, frame: FrameId, wait: bool) -> Result<bool> {
        let header = self.frame(frame);
        loop {
            let seen = self.writes_finished.count();
            if header.try_start_writing() {
                break;
            }
            if !wait {
                return Ok(false);
            }
            self.writes_finished.wait_past(seen, WRITE_WAIT);
        }
        let written = self.write_back_claimed(frame, wait);
        header.finish_writing();
        self.writes_finished.notify();
        written
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
        drop(shared);
        // The WAL rule: the records describing this image are durable before it is written.
        if let Some(log) = &self.log {
            log.wait_durable(page_format::lsn(&image))?;
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

    /// Writes dirty cooling pages from the old half of the FIFO (the background writer's
    /// work). Returns how many were written.
    ///
    /// The young half is left alone: a page unswizzled moments ago is the one most likely to
    /// be touched and dirtied again (a hot page the random choice happened to hit), and
    /// writing it then is wasted. Eviction takes frames from the old end only, so the old
    /// half is all the writer has to keep clean.
    pub(crate) fn write_cooling_pages(&self, limit: usize) -> usize {
        let candidates = {
            let stage = self.cooling.lock();
            stage.oldest_frames(&self.pool, stage.len().div_ceil(2))
        };
        let mut written = 0;
        for frame in candidates {
            if written == limit {
                break;
            }
            if self.frame(frame).is_dirty() && matches!(self.write_back(frame, false), Ok(true)) {
                written += 1;
            }
        }
        self.count(Counter::BackgroundWrites, written as u64);
        written
    }

    /// Writes every dirty page and syncs the storage.
    pub(crate) fn flush(&self) -> Result<()> {
        let touched = self.fresh.load(Ordering::Acquire);
        for frame in 0..touched {
            if self.frame(frame).is_dirty() {
                self.write_back(frame, true)?;
            }
        }
        self.storage
            .sync()
            .map_err(|e| Error::io("syncing the page file", e))
    }
}
