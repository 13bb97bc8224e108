//! Replacement: finding free frames. While never-used frames last nothing is tracked; then
//! random hot pages are unswizzled into the cooling FIFO (children before parents), and frames
//! are freed from its old end once no thread can still read them, dirty pages written first.
//!
//! Invariants: only a page without swizzled children leaves the hot state; a frame is freed only
//! when its cooling epoch is older than every running operation's; a thread that waits for
//! another thread's write sleeps on `writes_finished` instead of spinning.

use super::policy::Policy;
use super::*;
use write_back::WRITE_WAIT;

/// Longest chain of swizzled pages followed when choosing a page to unswizzle; a bound so that
/// even a corrupt parent cycle cannot loop forever.
const MAX_DEPTH: usize = 64;

/// Bytes of never-used frames whose memory [`BufferManager::populate_ahead`] keeps populated.
pub(super) const POPULATE_AHEAD: usize = 64 << 20;

/// How far [`BufferManager::populate_ahead`] got: frames below `populated` have their memory,
/// and the count of frames ever used was `seen` at its last call.
pub(crate) struct PopulateAhead {
    pub(super) populated: FrameId,
    pub(super) seen: FrameId,
}

/// Rounds of eviction a thread tries before declaring the pool exhausted.
pub(super) const MAX_EVICTION_ROUNDS: u32 = 100_000;

/// What one round of [`BufferManager::evict_batch`] achieved.
pub(super) enum Eviction {
    /// Frames were freed or a dirty page written: try again at once.
    Progress,
    /// The pages to free are being written by other threads; `seen` is the count of finished
    /// writes taken before looking.
    WritesPending { seen: u64 },
    /// Nothing could be done now (contended latches, pages too young, nothing to cool).
    Stalled,
}

impl<P: Policy> BufferManager<P> {
    /// Hands the page in `frame`, which a scan brought in and has finished reading, straight
    /// back to the cooling stage (the scan's hint that it will not be read again soon), so
    /// that scans replace cooling pages rather than the hot working set. Only once the pool
    /// is full; outside any epoch; skipped if a latch is contended or the page has swizzled
    /// children.
    pub(crate) fn cool_scanned(&self, frame: FrameId) {
        // While never-used frames remain, nothing is replaced and a scan displaces nothing:
        // its pages stay hot like any other (a warm-up scan warms up).
        if self.fresh.load(Ordering::Acquire) < self.frame_count() {
            return;
        }
        let cooled = if P::SWIZZLING {
            self.try_unswizzle(frame, false)
        } else {
            self.try_untranslate(frame)
        };
        if cooled {
            self.count(Counter::ScanCooled, 1);
        }
    }

    /// Where [`Self::populate_ahead`] starts: nothing populated ahead yet, and the pool as
    /// used now (a pool that does not grow is never populated ahead).
    pub(crate) fn populate_from_here(&self) -> PopulateAhead {
        let fresh = self.fresh.load(Ordering::Acquire);
        PopulateAhead {
            populated: fresh,
            seen: fresh,
        }
    }

    /// Populates the memory of the never-used frames to be handed out next (see
    /// [`Pool::populate`]) while the pool grows, keeping up to [`POPULATE_AHEAD`] bytes of them
    /// ready (an eighth of the pool at most), topped up once half of it is used. The background
    /// writer calls it at every wake, so the kernel's zeroing runs there, not in the thread that
    /// needs the frame. Once the kernel refuses (no such advice, or memory short), it stops for
    /// good: populating ahead is worth no memory pressure. Returns whether the pool grew since
    /// the last call (there may be more to do soon).
    pub(crate) fn populate_ahead(&self, state: &mut PopulateAhead) -> bool {
        let frames = self.frame_count();
        let ahead = (POPULATE_AHEAD.min(self.pool.mapping_len() / 8) / self.pool.stride()) as u32;
        let fresh = self.fresh.load(Ordering::Acquire);
        let grew = fresh != std::mem::replace(&mut state.seen, fresh);
        // In batches of half the window or more, not a little at every wake: topping up ~8 MiB
        // per wake cost TPC-C 1 thread 6% and raised its p99 by a fifth against no populating
        // at all, where batches gained 9% (the madvise holds the process's memory map shared
        // for its length: a few ms per batch).
        if !grew || state.populated >= frames || state.populated.saturating_sub(fresh) > ahead / 2 {
            return grew;
        }
        let end = fresh.saturating_add(ahead).min(frames);
        match self.pool.populate(state.populated.max(fresh)..end) {
            Ok(()) => state.populated = end,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => state.populated = frames,
        }
        true
    }

    pub(super) fn pop_free_frame(&self) -> Option<FrameId> {
        if let Some(frame) = self.free_frames.lock().pop() {
            return Some(frame);
        }
        self.fresh
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |fresh| {
                (fresh < self.frame_count()).then_some(fresh + 1)
            })
            .ok()
    }

    /// A free frame for this thread, evicting as needed. Outside any epoch, no latches held.
    pub(super) fn obtain_frame(&self) -> Result<FrameId> {
        debug_assert!(
            !self.epochs.is_pinned(),
            "eviction inside an epoch could wait on itself"
        );
        for round in 0..MAX_EVICTION_ROUNDS {
            if let Some(frame) = self
                .pop_free_frame()
                .or_else(|| self.epochs.reuse_retired())
            {
                return Ok(frame);
            }
            if !P::EVICTS {
                break;
            }
            match self.evict_batch()? {
                Eviction::Progress => {}
                // The frames to free are being written by others: sleep until a write ends.
                Eviction::WritesPending { seen } => {
                    self.writes_finished.wait_past(seen, WRITE_WAIT);
                }
                Eviction::Stalled if round > 8 => std::thread::yield_now(),
                Eviction::Stalled => {}
            }
        }
        Err(Error::PoolExhausted {
            frames: self.frame_count() as usize,
        })
    }

    /// One round of replacement: reclaim retired frames, keep the cooling stage filled, and
    /// free frames from its old end (writing dirty ones first).
    pub(super) fn evict_batch(&self) -> Result<Eviction> {
        let bound = self.epochs.reclaim_bound();
        let reclaimed = self.epochs.reclaim_orphans(bound);
        if !reclaimed.is_empty() {
            self.free_frames.lock().extend(reclaimed);
            return Ok(Eviction::Progress);
        }
        // Frames deleted in the current epoch become reclaimable only once it moves on, which
        // cooling does not cause when nothing is left to cool (after many pages were deleted).
        if self.epochs.retired_waiting() {
            self.epochs.advance();
        }
        // One refiller at a time, a few batches per call: evictors that each cooled the whole
        // deficit they saw could together cool up to one target per thread (16 threads: more
        // than the pool) when the pool first fills; TPC-C on 16 cores then fell to 0 tps.
        if let Some(_refilling) = self.cooling_refill.try_lock() {
            let cooling = self.cooling.lock().len();
            if cooling < self.cooling_target {
                self.cool_pages((self.cooling_target - cooling).min(self.eviction_batch * 4));
            }
        }
        let mut freed = Vec::with_capacity(self.eviction_batch);
        let mut dirty = Vec::new();
        let mut too_young = false;
        {
            let mut stage = self.cooling.lock();
            let bound = self.epochs.reclaim_bound();
            let mut next = stage.oldest();
            for _ in 0..self.eviction_batch * 4 {
                let Some(frame) = next else { break };
                next = stage.younger_than(&self.pool, frame);
                let header = self.frame(frame);
                if header.is_dirty() {
                    dirty.push(frame);
                    continue;
                }
                if header.cooling_epoch.load(Ordering::Relaxed) >= bound {
                    too_young = true;
                    continue;
                }
                let Some(guard) = header.latch.try_lock_exclusive() else {
                    continue;
                };
                if header.is_dirty() || header.is_writing() {
                    continue;
                }
                stage.remove(&self.pool, frame, header.page_id());
                stage.release(header.page_id());
                header.set_page_id(&guard, NO_PAGE);
                header.set_parent(None);
                header.set_state(FrameState::Free);
                freed.push(frame);
                if freed.len() == self.eviction_batch {
                    break;
                }
            }
        }
        if too_young && freed.is_empty() {
            self.epochs.advance();
        }
        if !dirty.is_empty() {
            if let Some(writer) = self.writer.lock().as_ref() {
                writer.wake();
            }
        }
        if !freed.is_empty() {
            self.count(Counter::Evictions, freed.len() as u64);
            self.free_frames.lock().extend(freed);
            return Ok(Eviction::Progress);
        }
        if dirty.is_empty() {
            return Ok(Eviction::Stalled);
        }
        // Write the oldest dirty pages nobody is writing yet (several evicting threads write
        // side by side); if others write them all, wait for those writes.
        let seen = self.writes_finished.count();
        let mut written = 0;
        for &frame in &dirty {
            if written == self.eviction_batch {
                break;
            }
            if self.write_back(frame, false)? {
                written += 1;
            }
        }
        Ok(if written > 0 {
            Eviction::Progress
        } else if dirty.iter().any(|&frame| self.frame(frame).is_writing()) {
            Eviction::WritesPending { seen }
        } else {
            Eviction::Stalled
        })
    }

    /// Moves up to `wanted` hot pages into the cooling stage: random ones, or with LRU
    /// replacement the least recently used.
    fn cool_pages(&self, wanted: usize) {
        let mut cooled = 0;
        if P::LEAN_EVICTION {
            let touched = self.fresh.load(Ordering::Acquire);
            if touched == 0 {
                return;
            }
            for _ in 0..wanted * 8 {
                if cooled == wanted {
                    break;
                }
                if self.try_unswizzle(fastrand::u32(..touched), true) {
                    cooled += 1;
                }
            }
        } else {
            let victims = self.lru.lock().oldest(wanted * 8);
            for victim in victims {
                if cooled == wanted {
                    break;
                }
                if self.try_unswizzle(victim, false) {
                    cooled += 1;
                }
            }
        }
    }

    /// Tries to move the page in frame `start` from hot to cooling, or, with
    /// `follow_children`, a swizzled descendant of it if it has one (children go first). Only
    /// non-blocking latch attempts: contended candidates are simply skipped.
    pub(super) fn try_unswizzle(&self, start: FrameId, follow_children: bool) -> bool {
        if !P::SWIZZLING {
            return self.try_untranslate(start);
        }
        let mut candidate = start;
        for _ in 0..MAX_DEPTH {
            let header = self.frame(candidate);
            let Some(_shared) = header.latch.try_lock_shared() else {
                return false;
            };
            if header.state() != FrameState::Hot {
                return false;
            }
            match self.swizzled_child(candidate) {
                Some(_) if !follow_children => return false,
                Some(child) => candidate = child,
                None => break,
            }
        }
        let header = self.frame(candidate);
        let Some(parent) = header.parent() else {
            return self.try_cool_unused_root(candidate);
        };
        let parent_header = self.frame(parent);
        let Some(mut parent_guard) = parent_header.latch.try_lock_exclusive() else {
            return false;
        };
        if parent_header.state() != FrameState::Hot {
            return false;
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot
            || header.parent() != Some(parent)
            || self.swizzled_child(candidate).is_some()
        {
            return false;
        }
        let Some(offset) = self.find_child_swip(parent, candidate) else {
            debug_assert!(false, "frame {candidate} not found in its parent {parent}");
            return false;
        };
        let page_id = header.page_id();
        let mut stage = self.cooling.lock();
        header.set_state(FrameState::Cooling);
        self.page_mut(parent, &mut parent_guard)
            .set_swip(offset, Swip::unswizzled(page_id));
        header
            .cooling_epoch
            .store(self.epochs.epoch_after_unlink(), Ordering::Relaxed);
        stage.push_newest(&self.pool, candidate, page_id);
        drop(stage);
        drop(guard);
        self.cooled(candidate);
        true
    }

    /// `try_unswizzle` without swizzling: the hot page in `frame` leaves the translation
    /// table for the cooling stage. Its parent holds a page id either way and is not touched.
    fn try_untranslate(&self, frame: FrameId) -> bool {
        let header = self.frame(frame);
        if header.parent().is_none() {
            return self.try_cool_unused_root(frame);
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot || header.parent().is_none() {
            return false;
        }
        let page_id = header.page_id();
        let mut shard = self.translation.shard(page_id);
        let removed = shard.remove(&page_id);
        debug_assert_eq!(removed, Some(frame), "hot page {page_id} not translated");
        let mut stage = self.cooling.lock();
        header
            .cooling_epoch
            .store(self.epochs.current(), Ordering::Relaxed);
        header.set_state(FrameState::Cooling);
        stage.push_newest(&self.pool, frame, page_id);
        drop((stage, shard, guard));
        self.cooled(frame);
        true
    }

    /// Moves the root in `frame` to the cooling stage if no handle uses its tree and none of
    /// its children is hot. Roots in use stay hot. No swip refers to a root (its tree finds
    /// it again by page id, see [`Self::reclaim_root`]), so no parent changes.
    fn try_cool_unused_root(&self, frame: FrameId) -> bool {
        let header = self.frame(frame);
        if !header.is_unused_root() {
            return false;
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot
            || !header.is_unused_root()
            || header.parent().is_some()
            || self.swizzled_child(frame).is_some()
        {
            return false;
        }
        let page_id = header.page_id();
        let mut stage = self.cooling.lock();
        header
            .cooling_epoch
            .store(self.epochs.current(), Ordering::Relaxed);
        header.set_unused_root(&guard, false);
        header.set_state(FrameState::Cooling);
        stage.push_newest(&self.pool, frame, page_id);
        drop((stage, guard));
        self.cooled(frame);
        true
    }

    /// Bookkeeping after the page in `frame` went from hot to cooling.
    fn cooled(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().remove(frame);
        }
        self.count(Counter::Unswizzles, 1);
    }

    pub(super) fn child_iterator(&self, page: PageView<'_>) -> Option<ChildIterator> {
        let page_type = page_format::page_type(page.all())?;
        self.kinds[page_type as usize]?.children
    }

    /// Some swizzled child of the page in `frame` (caller holds a latch on it).
    fn swizzled_child(&self, frame: FrameId) -> Option<FrameId> {
        let page = self.page(frame);
        let iterate = self.child_iterator(page)?;
        let mut found = None;
        iterate(page, &mut |offset| {
            if let Some(SwipTarget::Frame(child)) =
                page.swip(offset).and_then(|s| s.target(self.frame_count()))
            {
                found = Some(child);
            }
            found.is_none()
        });
        found
    }

    /// Offset of the swip in `parent` that points to frame `child`.
    fn find_child_swip(&self, parent: FrameId, child: FrameId) -> Option<usize> {
        let page = self.page(parent);
        let iterate = self.child_iterator(page)?;
        let wanted = Swip::swizzled_word(child);
        let mut found = None;
        iterate(page, &mut |offset| {
            if page.swip(offset).is_some_and(|s| s.word() == wanted) {
                found = Some(offset);
            }
            found.is_none()
        });
        found
    }
}
