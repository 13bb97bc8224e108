//! How operations reach pages: the retry loop every operation runs in ([`BufferManager::run`]),
//! which turns restarts into work (bringing a page in, freeing frames, switching to pessimistic
//! latching after repeated conflicts), and the reading of swips with its access recording.
//!
//! Invariant: an attempt runs inside an epoch and holds no latch when it returns; restarts are
//! resolved outside the epoch, where I/O may happen.

use super::policy::Policy;
use super::*;

/// Failed validations before an operation switches to pessimistic latching.
const OPTIMISTIC_ATTEMPTS: u32 = 16;

impl<P: Policy> BufferManager<P> {
    /// Where the child reference `word` (read from a page) leads: a resident frame, or a page
    /// that must be brought in (`Restart::Swizzle`). `None` for a malformed word. A frame found
    /// through the translation table may be reused at any moment: confirm it with
    /// [`Self::holds`] once its version or latch is taken.
    #[inline]
    pub(crate) fn child(&self, word: u64) -> Option<SwipTarget> {
        let frames = self.frame_count();
        if !P::EVICTS {
            return Swip::decode_swizzled(word, frames).map(SwipTarget::Frame);
        }
        let target = Swip::decode(word, frames)?;
        if P::SWIZZLING {
            return Some(target);
        }
        match target {
            SwipTarget::Page(page_id) => Some(
                self.translation
                    .lookup(page_id)
                    .map_or(target, SwipTarget::Frame),
            ),
            SwipTarget::Frame(_) => None,
        }
    }

    /// Whether `frame`, reached through [`Self::child`]`(word)`, still holds that page as a
    /// hot page. Always true with swizzling: a swizzled swip is changed only under its page's
    /// latch. Without, the frame may have gone cooling or been reused since the table lookup;
    /// both happen under the frame's exclusive latch, so a later validation of the version
    /// read before this check (or the latch held during it) makes the answer stick.
    #[inline]
    pub(crate) fn holds(&self, frame: FrameId, word: u64) -> bool {
        if P::SWIZZLING {
            return true;
        }
        let header = self.frame(frame);
        header.state() == FrameState::Hot && Swip::unswizzled_word(header.page_id()) == word
    }

    /// The reference a parent stores for the resident page in `frame`.
    #[inline]
    pub(crate) fn reference(&self, frame: FrameId) -> u64 {
        if P::SWIZZLING {
            Swip::swizzled_word(frame)
        } else {
            Swip::unswizzled_word(self.frame(frame).page_id())
        }
    }

    /// Records an access to the page in `frame` (LRU replacement and tracing only; free
    /// otherwise).
    #[inline]
    pub(crate) fn touch(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().touch(frame);
        }
        if P::TRACE {
            self.trace.lock().push(self.frame(frame).page_id());
        }
    }

    /// Links a page that just became hot into the LRU list (LRU replacement only).
    pub(super) fn made_hot(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().touch(frame);
        }
    }

    /// The page accesses recorded since the last call (tracing policies only).
    #[cfg(feature = "ablations")]
    pub(crate) fn take_trace(&self) -> Vec<u64> {
        std::mem::take(&mut *self.trace.lock())
    }

    /// Runs `attempt` until it succeeds, inside an epoch each time, resolving its restarts:
    /// bringing pages in, freeing frames, and after repeated conflicts switching it to
    /// pessimistic latching. This is the only loop in which buffer-managed operations run.
    pub(crate) fn run<T>(&self, mut attempt: impl FnMut(LatchMode) -> Attempt<T>) -> Result<T> {
        let mut conflicts = 0u32;
        loop {
            let outcome = {
                let guard = self.epochs.pin();
                if self.closed.load(Ordering::Relaxed) {
                    return Err(Error::Closed);
                }
                let mode = if P::OPTIMISTIC && conflicts < OPTIMISTIC_ATTEMPTS {
                    LatchMode::Optimistic
                } else {
                    LatchMode::Pessimistic
                };
                let outcome = attempt(mode);
                if matches!(outcome, Err(Restart::Conflict)) {
                    guard.slot().count(Counter::Restarts, 1);
                }
                outcome
            };
            match outcome {
                Ok(value) => return Ok(value),
                Err(Restart::Conflict) => {
                    conflicts += 1;
                    if conflicts == OPTIMISTIC_ATTEMPTS {
                        self.count(Counter::PessimisticFallbacks, 1);
                    }
                    if conflicts.is_multiple_of(4) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Err(Restart::NeedFrames) => {
                    let frame = self.obtain_frame()?;
                    self.free_frames.lock().push(frame);
                }
                Err(Restart::Swizzle {
                    frame,
                    version,
                    offset,
                    page_id,
                }) => self.resolve_swip(frame, version, offset as usize, page_id)?,
                Err(Restart::Corrupt { page_id, reason }) => {
                    return Err(Error::corruption(page_id, reason))
                }
                Err(Restart::Dropped) => return Err(Error::TreeDropped),
            }
        }
    }
}
