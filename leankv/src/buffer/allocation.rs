//! Pages coming into being and going away: allocating a page into a fresh frame, deleting a
//! page (its frame retired through the epochs, its id back to the free list), and the roots of
//! trees, which no swip references and which leave the pool only while no handle uses them.
//!
//! Invariant: a page id is either allocated and held by at most one frame, or on the free list,
//! never both (the cooling stage's resident set refuses a second copy).

use super::policy::Policy;
use super::*;
use eviction::MAX_EVICTION_ROUNDS;

impl<P: Policy> BufferManager<P> {
    /// A new, empty page of `page_type` whose swip will live in frame `parent` (`None` for a
    /// root), exclusively latched, hot and dirty. Inside `run` only.
    pub(crate) fn allocate_page(
        &self,
        page_type: PageType,
        parent: Option<FrameId>,
    ) -> Attempt<(FrameId, ExclusiveGuard<'_>)> {
        debug_assert!(self.epochs.is_pinned());
        let frame = self
            .epochs
            .reuse_retired()
            .or_else(|| self.pop_free_frame())
            .ok_or(Restart::NeedFrames)?;
        let page_id = self.page_ids.lock().allocate();
        if !self.cooling.lock().admit(page_id) {
            // Only a damaged free-page list hands out a page in use; the id stays allocated.
            self.free_frames.lock().push(frame);
            return Err(Restart::Corrupt {
                page_id,
                reason: "the free-page list holds a page in use",
            });
        }
        let header = self.frame(frame);
        // SAFETY: the frame came from the free list or this thread's retired cache and is
        // reachable from nowhere until the caller links it into a parent. Threads that probe
        // frames by number (random cooling, the writer) read only its state, which is `Free`.
        let bytes = unsafe { self.pool.page_bytes_unpublished(frame) };
        bytes.fill(0);
        page_format::init_header(bytes, page_type, page_id);
        // Not `try_lock`: random cooling and the background writer latch frames by number
        // and may briefly hold a free one while they see it is not theirs to touch.
        let guard = header.latch.lock_exclusive();
        header.set_page_id(&guard, page_id);
        header.set_parent(parent);
        header.set_dirty(true);
        header.set_state(FrameState::Hot);
        if !P::SWIZZLING && parent.is_some() {
            self.translation.shard(page_id).insert(page_id, frame);
        }
        self.made_hot(frame);
        Ok((frame, guard))
    }

    /// Deletes the page in `frame` (removed from its parent by the caller): its page id becomes
    /// free and the frame is reused once no reader can see it any more.
    pub(crate) fn delete_page(&self, frame: FrameId, guard: ExclusiveGuard<'_>) {
        let header = self.frame(frame);
        debug_assert_eq!(header.state(), FrameState::Hot);
        let page_id = header.page_id();
        self.cooling.lock().release(page_id);
        if !P::SWIZZLING {
            self.translation.shard(page_id).remove(&page_id);
        }
        if !P::LEAN_EVICTION {
            self.lru.lock().remove(frame);
        }
        header.set_page_id(&guard, NO_PAGE);
        header.set_state(FrameState::Free);
        header.set_dirty(false);
        header.set_parent(None);
        drop(guard);
        // An image of the page copied before the delete may still be on its way to the disk:
        // were the id handed out and the new page written first, the old image would land over
        // it. A writer that claims the frame from now on finds no page to write.
        let mut deferred = self.deleted_while_writing.lock();
        if header.is_writing() {
            deferred.push((frame, page_id));
        } else {
            drop(deferred);
            self.page_ids.lock().free_deleted(page_id);
        }
        self.epochs.retire(frame);
    }

    /// Frees the ids of pages deleted while being written whose writes have ended (called
    /// after every write).
    pub(super) fn free_written_deleted_pages(&self) {
        let mut deferred = self.deleted_while_writing.lock();
        if deferred.is_empty() {
            return;
        }
        let mut ids = self.page_ids.lock();
        deferred.retain(|&(frame, page_id)| {
            let writing = self.frame(frame).is_writing();
            if !writing {
                ids.free_deleted(page_id);
            }
            writing
        });
    }

    /// Lets every thread's eviction reuse the frames of the pages this thread deleted (after
    /// deleting many at once).
    pub(crate) fn share_deleted_frames(&self) {
        self.epochs.share_retired();
    }

    /// Whether `header`'s frame still holds root `page_id` hot (caller holds its latch).
    fn holds_root(header: &Frame, page_id: u64) -> bool {
        header.state() == FrameState::Hot
            && header.page_id() == page_id
            && header.parent().is_none()
    }

    /// Marks the hot root `page_id` in `frame` as used by no one: replacement may now cool it
    /// once its children are cooled. Its tree calls [`Self::reclaim_root`] before use.
    pub(crate) fn release_root(&self, frame: FrameId, page_id: u64) {
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        if Self::holds_root(header, page_id) {
            header.set_unused_root(&guard, true);
        }
    }

    /// The frame of root `page_id` for a tree about to be used again: `frame`, where it was
    /// released, if it is still hot there, or wherever [`Self::load_root`] brings it.
    pub(crate) fn reclaim_root(
        &self,
        frame: FrameId,
        page_id: u64,
        accept: PageCheck,
    ) -> Result<FrameId> {
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        if Self::holds_root(header, page_id) {
            header.set_unused_root(&guard, false);
            return Ok(frame);
        }
        drop(guard);
        self.load_root(page_id, accept)
    }

    /// Brings in the page `page_id` for a tree root: hot, no parent, never unswizzled. Each
    /// root is loaded once per open database (the caller keeps it), so no other copy exists.
    /// `accept` checks that the page can be a root.
    pub(crate) fn load_root(&self, page_id: u64, accept: PageCheck) -> Result<FrameId> {
        for _ in 0..MAX_EVICTION_ROUNDS {
            let mut stage = self.cooling.lock();
            if let Some(frame) = stage.lookup(page_id) {
                accept(self.page(frame)).map_err(|reason| Error::corruption(page_id, reason))?;
                stage.remove(&self.pool, frame, page_id);
                drop(stage);
                let header = self.frame(frame);
                header.set_parent(None);
                header.set_state(FrameState::Hot);
                self.made_hot(frame);
                return Ok(frame);
            }
            if let Some(read) = stage.in_flight(page_id) {
                drop(stage);
                self.wait_for_read(&read);
                continue;
            }
            if stage.is_resident(page_id) {
                return Err(Error::corruption(
                    page_id,
                    "tree root referenced from two places",
                ));
            }
            let read = stage.start_read(page_id);
            drop(stage);
            self.complete_read(page_id, &read)?;
        }
        // Read again and again, and evicted each time before it could be taken.
        Err(Error::PoolExhausted {
            frames: self.frame_count() as usize,
        })
    }

    /// Page count (allocation high-water mark) and the free pages: the free list and the
    /// deleted pages whose ids are not handed out again yet.
    pub(crate) fn page_allocation(&self) -> (u64, Vec<u64>) {
        self.with_page_allocation(|page_count, free| (page_count, free.to_vec()))
    }

    /// Calls `use_it` with the page count and the free pages (see [`Self::page_allocation`])
    /// while no page id can be handed out: how the free list is saved into pages of its own
    /// without one of them being allocated, and written over, meanwhile.
    pub(crate) fn with_page_allocation<R>(&self, use_it: impl FnOnce(u64, &[u64]) -> R) -> R {
        let deferred = self.deleted_while_writing.lock();
        let ids = self.page_ids.lock();
        let mut free = ids.free_pages();
        // Deleted pages whose ids are not handed out yet are free too.
        free.extend(ids.being_freed());
        free.extend(deferred.iter().map(|&(_, page_id)| page_id));
        free.sort_unstable();
        free.dedup();
        use_it(ids.page_count(), &free)
    }
}
