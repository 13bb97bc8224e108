//! Epoch-based reclamation of frames (paper §IV-G), and the per-thread slots it rests on.
//!
//! A global epoch counter and one slot per thread holding that thread's *local* epoch: the
//! global value when its current operation began, or `IDLE` between operations. A frame whose
//! page was unswizzled or deleted at epoch `e` may be reused only when every thread's local
//! epoch is past `e`; no optimistic reader can then still be looking at it. Deleted frames go to
//! a small per-thread cache first and are reused by their thread (paper §IV-I); overflow, and
//! the caches of threads that exit, move to a shared orphan list that eviction drains.
//!
//! The same slot carries the thread's statistics counters: written only by the owning thread
//! (plain load + store, no shared cache line is written on the hot path), summed on read.
//!
//! Invariants: a thread's local epoch is only written by that thread; it is stored *before* the
//! thread reads any swip (store + SeqCst fence), and every reclamation check reads the local
//! epochs *after* the frame was made unreachable (SeqCst fence), so a reader either is seen
//! by the check or cannot reach the frame. Slots are never freed while the registry lives.

use super::frame::FrameId;
use super::stats::{Counter, COUNTER_COUNT};
use crate::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::sync::{thread_local, Mutex};
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

/// Local epoch of a thread that is not inside an operation.
const IDLE: u64 = u64::MAX;
/// Deleted frames a thread keeps for its own reuse before handing them to the orphan list.
const RETIRED_CACHE: usize = 16;

// Plain `std` even under loom: a registry tag, not part of the protocol (loom atomics cannot
// be statics).
static NEXT_REGISTRY_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[derive(Clone, Copy)]
struct Retired {
    frame: FrameId,
    epoch: u64,
}

/// One thread's epoch, counters and retired-frame cache.
pub(crate) struct ThreadSlot {
    local: CachePadded<AtomicU64>,
    /// Nesting depth of `pin` calls; only the owning thread touches it.
    depth: AtomicU32,
    in_use: AtomicBool,
    counters: [AtomicU64; COUNTER_COUNT],
    retired: Mutex<VecDeque<Retired>>,
}

impl ThreadSlot {
    fn new() -> Self {
        ThreadSlot {
            local: CachePadded::new(AtomicU64::new(IDLE)),
            depth: AtomicU32::new(0),
            in_use: AtomicBool::new(true),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            retired: Mutex::new(VecDeque::new()),
        }
    }

    /// Adds to one of this thread's counters. Only the owning thread calls this, so a plain
    /// load and store suffice (no locked instruction, no shared line written).
    #[inline]
    pub(crate) fn count(&self, counter: Counter, amount: u64) {
        let cell = &self.counters[counter as usize];
        cell.store(cell.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
    }
}

/// The epoch registry of one buffer manager.
pub(crate) struct Epochs {
    id: u64,
    global: CachePadded<AtomicU64>,
    slots: Mutex<Vec<Arc<ThreadSlot>>>,
    orphans: Mutex<Vec<Retired>>,
    /// The largest reclamation bound computed so far (see `reclaim_bound`).
    known_bound: AtomicU64,
}

struct LocalEntry {
    registry_id: u64,
    registry: Weak<Epochs>,
    slot: Arc<ThreadSlot>,
}

impl Drop for LocalEntry {
    fn drop(&mut self) {
        self.slot.local.store(IDLE, Ordering::Release);
        self.slot.depth.store(0, Ordering::Relaxed);
        if let Some(registry) = self.registry.upgrade() {
            let mut retired = self.slot.retired.lock();
            registry.orphans.lock().extend(retired.drain(..));
        }
        self.slot.in_use.store(false, Ordering::Release);
    }
}

thread_local! {
    static LOCAL_SLOTS: RefCell<Vec<LocalEntry>> = const { RefCell::new(Vec::new()) };
}

impl Epochs {
    pub(crate) fn new() -> Arc<Epochs> {
        Arc::new(Epochs {
            id: NEXT_REGISTRY_ID.fetch_add(1, Ordering::Relaxed),
            global: CachePadded::new(AtomicU64::new(1)),
            slots: Mutex::new(Vec::new()),
            orphans: Mutex::new(Vec::new()),
            known_bound: AtomicU64::new(0),
        })
    }

    /// This thread's slot, registering the thread on first use.
    pub(crate) fn local_slot(self: &Arc<Self>) -> &ThreadSlot {
        let slot = LOCAL_SLOTS.with(|entries| {
            if let Some(entry) = entries
                .borrow()
                .iter()
                .find(|entry| entry.registry_id == self.id)
            {
                return Arc::as_ptr(&entry.slot);
            }
            let slot = self.claim_slot();
            let pointer = Arc::as_ptr(&slot);
            let mut entries = entries.borrow_mut();
            entries.retain(|entry| entry.registry.strong_count() > 0);
            entries.push(LocalEntry {
                registry_id: self.id,
                registry: Arc::downgrade(self),
                slot,
            });
            pointer
        });
        // SAFETY: `slots` holds an `Arc` to every slot it handed out until the registry is
        // dropped, and the returned reference cannot outlive `&self`.
        unsafe { &*slot }
    }

    fn claim_slot(&self) -> Arc<ThreadSlot> {
        let mut slots = self.slots.lock();
        for slot in slots.iter() {
            if slot
                .in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return slot.clone();
            }
        }
        let slot = Arc::new(ThreadSlot::new());
        slots.push(slot.clone());
        slot
    }

    /// Enters the current epoch for the duration of the returned guard (nests).
    #[inline]
    pub(crate) fn pin(self: &Arc<Self>) -> EpochGuard<'_> {
        let slot = self.local_slot();
        let depth = slot.depth.load(Ordering::Relaxed);
        slot.depth.store(depth + 1, Ordering::Relaxed);
        if depth == 0 {
            slot.local
                .store(self.global.load(Ordering::Relaxed), Ordering::Relaxed);
            // Publish the local epoch before reading any swip (pairs with `reclaim_bound`).
            fence(Ordering::SeqCst);
        }
        EpochGuard { slot }
    }

    /// True when this thread is inside an operation (used by debug assertions).
    pub(crate) fn is_pinned(self: &Arc<Self>) -> bool {
        self.local_slot().depth.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn current(&self) -> u64 {
        self.global.load(Ordering::Acquire)
    }

    /// The epoch to record for a frame the caller has just made unreachable (deleted or
    /// unswizzled). The `SeqCst` fence orders the unlinking store before the epoch read, and
    /// pairs with the fences of `pin` and `reclaim_bound`: a reader that can still see the old
    /// reference is pinned at or below the recorded epoch when the bound is computed (a loom
    /// model found readers missed without it).
    pub(crate) fn epoch_after_unlink(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.current()
    }

    /// Moves the global epoch forward, so frames retired until now can become reclaimable.
    pub(crate) fn advance(&self) {
        self.global.fetch_add(1, Ordering::AcqRel);
    }

    /// A frame retired at an epoch strictly below the returned bound is no longer visible to
    /// any thread. The bound is the minimum of the global epoch and every active local epoch.
    pub(crate) fn reclaim_bound(&self) -> u64 {
        let global = self.global.load(Ordering::SeqCst);
        // Frames were made unreachable before this point; read the local epochs after it.
        fence(Ordering::SeqCst);
        let bound = self
            .slots
            .lock()
            .iter()
            .map(|slot| slot.local.load(Ordering::SeqCst))
            .fold(global, u64::min);
        self.known_bound.fetch_max(bound, Ordering::AcqRel);
        bound
    }

    /// True when no thread is inside an operation.
    pub(crate) fn all_idle(&self) -> bool {
        fence(Ordering::SeqCst);
        self.slots
            .lock()
            .iter()
            .all(|slot| slot.local.load(Ordering::SeqCst) == IDLE)
    }

    /// Hands a deleted page's frame to reclamation: this thread's cache first.
    pub(crate) fn retire(self: &Arc<Self>, frame: FrameId) {
        let retired = Retired {
            frame,
            epoch: self.epoch_after_unlink(),
        };
        let mut cache = self.local_slot().retired.lock();
        cache.push_back(retired);
        if cache.len() > RETIRED_CACHE {
            let overflow: Vec<_> = cache.drain(..RETIRED_CACHE / 2).collect();
            self.orphans.lock().extend(overflow);
        }
    }

    /// A frame this thread retired that no one can see any more, if there is one.
    pub(crate) fn reuse_retired(self: &Arc<Self>) -> Option<FrameId> {
        let bound = self.known_bound.load(Ordering::Acquire);
        let mut cache = self.local_slot().retired.lock();
        match cache.front() {
            Some(oldest) if oldest.epoch < bound => cache.pop_front().map(|r| r.frame),
            _ => None,
        }
    }

    /// Hands this thread's retired frames to the orphan list, where any thread's eviction
    /// reclaims them: after deleting many pages at once, so that they do not wait for this
    /// thread's next allocations.
    pub(crate) fn share_retired(self: &Arc<Self>) {
        let mut cache = self.local_slot().retired.lock();
        self.orphans.lock().extend(cache.drain(..));
    }

    /// Whether deleted frames wait for the epoch to move on: orphans, or this thread's own.
    pub(crate) fn retired_waiting(self: &Arc<Self>) -> bool {
        !self.orphans.lock().is_empty() || !self.local_slot().retired.lock().is_empty()
    }

    /// Takes every orphaned retired frame that is reclaimable under `bound`.
    pub(crate) fn reclaim_orphans(&self, bound: u64) -> Vec<FrameId> {
        let mut orphans = self.orphans.lock();
        let mut reclaimed = Vec::new();
        orphans.retain(|retired| {
            let reclaimable = retired.epoch < bound;
            if reclaimable {
                reclaimed.push(retired.frame);
            }
            !reclaimable
        });
        reclaimed
    }

    /// Sums every thread's counters.
    pub(crate) fn counter_totals(&self) -> [u64; COUNTER_COUNT] {
        let mut totals = [0; COUNTER_COUNT];
        for slot in self.slots.lock().iter() {
            for (total, cell) in totals.iter_mut().zip(&slot.counters) {
                *total += cell.load(Ordering::Relaxed);
            }
        }
        totals
    }
}

/// Proof that this thread is inside an epoch; leaving happens on drop.
pub(crate) struct EpochGuard<'a> {
    slot: &'a ThreadSlot,
}

impl EpochGuard<'_> {
    pub(crate) fn slot(&self) -> &ThreadSlot {
        self.slot
    }
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        let depth = self.slot.depth.load(Ordering::Relaxed);
        debug_assert!(depth > 0);
        self.slot.depth.store(depth - 1, Ordering::Relaxed);
        if depth == 1 {
            self.slot.local.store(IDLE, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn frame_is_not_reclaimable_while_a_reader_is_inside_its_epoch() {
        let epochs = Epochs::new();
        let (entered, wait_entered) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        let reader = {
            let epochs = epochs.clone();
            std::thread::spawn(move || {
                let _guard = epochs.pin();
                entered.send(()).unwrap();
                wait_release.recv().unwrap();
            })
        };
        wait_entered.recv().unwrap();
        // Unswizzled "now", while the reader is inside.
        let retired_at = epochs.current();
        epochs.advance();
        epochs.advance();
        assert!(
            epochs.reclaim_bound() <= retired_at,
            "the reader pins the epoch it entered"
        );
        release.send(()).unwrap();
        reader.join().unwrap();
        assert!(epochs.reclaim_bound() > retired_at);
    }

    #[test]
    fn frames_retired_in_the_current_epoch_wait_for_an_advance() {
        let epochs = Epochs::new();
        let retired_at = epochs.current();
        assert!(epochs.reclaim_bound() <= retired_at);
        epochs.advance();
        assert!(epochs.reclaim_bound() > retired_at);
    }

    #[test]
    fn retired_frames_are_reused_by_their_thread_only_once_safe() {
        let epochs = Epochs::new();
        {
            let _guard = epochs.pin();
            epochs.retire(5);
            assert_eq!(epochs.reuse_retired(), None, "still inside the epoch");
        }
        epochs.advance();
        epochs.reclaim_bound();
        assert_eq!(epochs.reuse_retired(), Some(5));
        assert_eq!(epochs.reuse_retired(), None);
    }

    #[test]
    fn exiting_threads_leave_their_retired_frames_and_counts_behind() {
        let epochs = Epochs::new();
        {
            let epochs = epochs.clone();
            std::thread::spawn(move || {
                epochs.retire(3);
                epochs.local_slot().count(Counter::PageReads, 7);
            })
            .join()
            .unwrap();
        }
        epochs.advance();
        let bound = epochs.reclaim_bound();
        assert_eq!(epochs.reclaim_orphans(bound), vec![3]);
        assert_eq!(epochs.counter_totals()[Counter::PageReads as usize], 7);
        assert!(epochs.all_idle());
    }

    #[test]
    fn pins_nest() {
        let epochs = Epochs::new();
        let outer = epochs.pin();
        let inner = epochs.pin();
        drop(inner);
        assert!(epochs.is_pinned());
        assert!(!epochs.all_idle());
        drop(outer);
        assert!(epochs.all_idle());
    }
}

#[cfg(all(test, loom))]
#[path = "epoch_loom.rs"]
mod loom_model;
