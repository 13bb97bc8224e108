//! Faulting pages in: resolving an unswizzled swip from the cooling stage or, through the
//! in-flight table, from storage, and checking every image read before anything uses it.
//!
//! Invariants: a read is registered only under the parent's latch (exclusive here, shared for
//! read-ahead) with the swip still unswizzled, so no page gets two frames; one read per page
//! at a time, the others wait on it; no I/O inside an epoch or under a latch; an image enters
//! the pool only after its checksum, its structure and (when it becomes hot) its place under
//! its parent were checked.

use super::policy::Policy;
use super::translation::TranslationShard;
use super::*;

impl<P: Policy> BufferManager<P> {
    /// Handles `Restart::Swizzle`: swizzles the swip at `offset` in frame `parent` if that
    /// frame still shows `version`, taking the page from the cooling stage, waiting for a read
    /// in flight, or reading it. If anything moved meanwhile, the restarted operation simply
    /// finds the new state.
    ///
    /// A read is only started while the parent is latched and its swip still unswizzled: a
    /// page has one swip, so it is then certainly not hot, and no second copy can be loaded.
    pub(super) fn resolve_swip(
        &self,
        parent: FrameId,
        version: u64,
        offset: usize,
        page_id: u64,
    ) -> Result<()> {
        let parent_header = self.frame(parent);
        let Ok(mut guard) = parent_header.latch.try_upgrade(version) else {
            return Ok(());
        };
        if parent_header.state() != FrameState::Hot {
            return Ok(());
        }
        let Some(swip) = self.page(parent).swip(offset) else {
            return Ok(());
        };
        if swip.word() != Swip::unswizzled_word(page_id) {
            return Ok(());
        }
        // Without swizzling the swip stays as it is; the translation table says what is hot.
        let mut shard = (!P::SWIZZLING).then(|| self.translation.shard(page_id));
        if shard
            .as_ref()
            .is_some_and(|shard| shard.contains_key(&page_id))
        {
            return Ok(());
        }
        let mut stage = self.cooling.lock();
        if let Some(frame) = stage.lookup(page_id) {
            self.check_child(parent, offset, frame)
                .map_err(|reason| Error::corruption(page_id, reason))?;
            stage.remove(&self.pool, frame, page_id);
            drop(stage);
            self.warm_up(parent, &mut guard, offset, frame, page_id, shard.as_mut());
            return Ok(());
        }
        if let Some(read) = stage.in_flight(page_id) {
            drop((stage, shard, guard));
            self.count(Counter::ReadWaits, 1);
            self.wait_for_read(&read);
            return Ok(());
        }
        if stage.is_resident(page_id) {
            // Hot under another swip: two references to one page.
            return Err(Error::corruption(
                page_id,
                "page referenced from two places",
            ));
        }
        let read = stage.start_read(page_id);
        drop((stage, shard, guard));
        self.complete_read(page_id, &read)
    }

    /// Makes the page `page_id` in `frame`, just taken out of the cooling stage, hot under the
    /// exclusively latched `parent`: swizzles the swip at `offset` (or, without swizzling,
    /// enters the page in the translation `shard`).
    fn warm_up(
        &self,
        parent: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        offset: usize,
        frame: FrameId,
        page_id: u64,
        shard: Option<&mut TranslationShard<'_>>,
    ) {
        let header = self.frame(frame);
        if header.cooling_epoch.load(Ordering::Relaxed) != 0 {
            self.count(Counter::CoolingHits, 1);
        }
        header.set_parent(Some(parent));
        header.set_state(FrameState::Hot);
        match shard {
            Some(shard) => {
                shard.insert(page_id, frame);
            }
            None => self
                .page_mut(parent, guard)
                .set_swip(offset, Swip::swizzled(frame)),
        }
        self.made_hot(frame);
    }

    /// The child `page_id` at swip `offset` of the exclusively latched `parent`, if it is in
    /// memory: hot already, or in the cooling stage (then made hot). `None` if it must be read
    /// (or is being read). A cooling page that does not fit its place is corruption.
    pub(crate) fn child_in_memory(
        &self,
        parent: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        offset: usize,
        word: u64,
    ) -> Attempt<Option<FrameId>> {
        let page_id = match self.child(word) {
            Some(SwipTarget::Frame(frame)) => return Ok(Some(frame)),
            Some(SwipTarget::Page(page_id)) => page_id,
            None => {
                return Err(Restart::Corrupt {
                    page_id: self.frame(parent).page_id(),
                    reason: "malformed child reference",
                })
            }
        };
        let mut shard = (!P::SWIZZLING).then(|| self.translation.shard(page_id));
        if shard
            .as_ref()
            .is_some_and(|shard| shard.contains_key(&page_id))
        {
            return Ok(None);
        }
        let mut stage = self.cooling.lock();
        let Some(frame) = stage.lookup(page_id) else {
            return Ok(None);
        };
        if self.check_child(parent, offset, frame).is_err() {
            return Err(Restart::Corrupt {
                page_id,
                reason: "a cooling page does not fit its place under its parent",
            });
        }
        stage.remove(&self.pool, frame, page_id);
        drop(stage);
        self.warm_up(parent, guard, offset, frame, page_id, shard.as_mut());
        Ok(Some(frame))
    }

    /// Performs the read registered as `read`: loads the page into the cooling stage (where
    /// the restarted operation will swizzle it), then releases the threads waiting on it.
    pub(super) fn complete_read(&self, page_id: u64, read: &InFlightRead) -> Result<()> {
        debug_assert!(!self.epochs.is_pinned(), "no I/O inside an epoch");
        let loaded = self.read_page(page_id);
        self.end_read(page_id, read, loaded.as_ref().ok().copied());
        loaded.map(drop)
    }

    /// Ends the registered read of `page_id`: the page enters the cooling stage if it was
    /// loaded into `frame`, and the threads waiting on `read` go on.
    pub(super) fn end_read(&self, page_id: u64, read: &InFlightRead, frame: Option<FrameId>) {
        let mut stage = self.cooling.lock();
        stage.end_read(page_id);
        match frame {
            Some(frame) if stage.admit(page_id) => stage.push_newest(&self.pool, frame, page_id),
            Some(frame) => {
                // Allocated meanwhile through a damaged free-page list: this copy goes.
                let header = self.frame(frame);
                let guard = header.latch.lock_exclusive();
                header.set_page_id(&guard, NO_PAGE);
                header.set_state(FrameState::Free);
                drop(guard);
                self.free_frames.lock().push(frame);
            }
            None => {}
        }
        drop(stage);
        read.finish();
        if let Some(ring) = &self.ring_reads {
            ring.notify();
        }
    }

    /// Reads page `page_id` into a free frame, verifies it and returns the frame, latched by
    /// no one and in no table yet.
    fn read_page(&self, page_id: u64) -> Result<FrameId> {
        if !self.page_ids.lock().is_allocated(page_id) {
            return Err(Error::corruption(
                page_id,
                "referenced page lies beyond the end of the page file",
            ));
        }
        let frame = self.obtain_frame()?;
        // SAFETY: the frame was just taken from the free list and is published (pushed into
        // the cooling stage) only after this slice is dead.
        let bytes = unsafe { self.pool.page_bytes_unpublished(frame) };
        let offset = page_id * self.page_size() as u64;
        let checked = match self.storage.read_at(bytes, offset) {
            Ok(()) => self.check_image(bytes, page_id),
            Err(error) => Err(Error::io("reading a page", error)),
        };
        self.take_in(frame, page_id, checked)
    }

    /// Checks an image just read for `page_id`: checksum, id and type, then its contents.
    pub(super) fn check_image(&self, image: &[u8], page_id: u64) -> Result<()> {
        let page_type = page_format::verify(image, page_id)
            .map_err(|reason| Error::corruption(page_id, reason))?;
        match self.kinds[page_type as usize].and_then(|kind| kind.check) {
            Some(check) => check(PageView::from_slice(image))
                .map_err(|reason| Error::corruption(page_id, reason)),
            None => Ok(()),
        }
    }

    /// Checks that the (cooling) page in `child` may be swizzled at `offset` in `parent`.
    fn check_child(&self, parent: FrameId, offset: usize, child: FrameId) -> Result<(), String> {
        let parent_page = self.page(parent);
        let check = page_format::page_type(parent_page.all())
            .and_then(|page_type| self.kinds[page_type as usize])
            .and_then(|kind| kind.check_child);
        match check {
            Some(check) => check(parent_page, offset, self.page(child)),
            None => Ok(()),
        }
    }

    /// Makes `frame`, just filled with page `page_id` whose check ended as `checked`, a
    /// cooling page outside every table; on failure gives the frame back.
    pub(super) fn take_in<T>(
        &self,
        frame: FrameId,
        page_id: u64,
        checked: Result<T>,
    ) -> Result<FrameId> {
        if let Err(error) = checked {
            self.free_frames.lock().push(frame);
            return Err(error);
        }
        self.count(Counter::PageReads, 1);
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        header.set_page_id(&guard, page_id);
        header.set_parent(None);
        header.set_dirty(false);
        header.cooling_epoch.store(0, Ordering::Relaxed);
        header.set_state(FrameState::Cooling);
        Ok(frame)
    }
}
