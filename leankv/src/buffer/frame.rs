//! The frame header and its life cycle (paper Fig. 3): free, hot (reached through a swizzled
//! swip), cooling (unswizzled, in the cooling FIFO), and back to free when evicted.
//!
//! Invariants: a frame's page id changes only under its exclusive latch; a hot frame's parent
//! link names the frame whose page holds its swip (none for roots); at most one write-back of a
//! frame runs at a time (`writing`), so an older image never lands after a newer one.

use crate::sync::{ExclusiveGuard, HybridLatch};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Bytes reserved in front of each page for the frame header (and alignment padding).
pub(crate) const FRAME_HEADER_AREA: usize = 512;

/// Index of a frame in the pool.
pub(crate) type FrameId = u32;
/// `parent` value of a frame that has no parent frame (a tree root, or not linked).
pub(crate) const NO_PARENT: u32 = 0;
/// `page_id` value of a frame that holds no page (page 0 is the superblock, never pooled).
pub(crate) const NO_PAGE: u64 = 0;

/// Life-cycle state of a frame (paper Fig. 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameState {
    /// Holds no page; on the free list, a thread's retired cache, or never used.
    Free = 0,
    /// Reached through a swizzled swip.
    Hot = 1,
    /// Swip unswizzled, page still here, in the cooling FIFO (or just loaded, awaiting swizzle).
    Cooling = 2,
}

/// The header of a frame. All fields are atomics: they are read without latches by the
/// replacement code and the background writer, which then confirm what they read under the
/// latch or the cooling-stage mutex.
#[repr(C, align(64))]
pub(crate) struct Frame {
    pub(crate) latch: HybridLatch,
    /// Changes only under this frame's exclusive latch.
    page_id: AtomicU64,
    /// Global epoch when the page was unswizzled (cooling pages only).
    pub(crate) cooling_epoch: AtomicU64,
    /// Frame id + 1 of the frame whose page holds this page's swip; `NO_PARENT` for roots.
    parent: AtomicU32,
    /// Intrusive links of the cooling FIFO, guarded by the cooling-stage mutex.
    pub(crate) fifo_prev: AtomicU32,
    pub(crate) fifo_next: AtomicU32,
    /// When the frame entered the cooling FIFO (its push number), guarded by the same mutex:
    /// tells the background writer's cursor whether it examined the frame already.
    pub(crate) fifo_seq: AtomicU64,
    state: AtomicU8,
    dirty: AtomicBool,
    /// Set while a write-back of this frame is in progress: at most one at a time, so that
    /// an older image can never land on disk after a newer one.
    writing: AtomicBool,
    /// Set on a hot tree root that no handle uses: replacement may cool it like any other
    /// page (once its children are cooled). Changes only under the exclusive latch.
    unused_root: AtomicBool,
    /// The leaf's latest inserts, a hint for where to split it (`btree/split.rs`): the slot
    /// right after the latest new key (low 16 bits) and how many keys in a row each went right
    /// after the one before (high 16 bits; 0: none since the page came here). A split carries
    /// it on into the half that holds that slot. Changed under the exclusive latch; in memory
    /// only: a stale one costs fill, never correctness.
    inserts: AtomicU32,
    /// The staging mark of the page's latest staged change (see `wal/staging.rs`; 0: none):
    /// set under the exclusive latch, cleared by a later change logged directly (whose LSN
    /// covers it) and with the page id. Once published it may stay, stale and harmless.
    staged: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Frame>() <= FRAME_HEADER_AREA);

impl Frame {
    pub(crate) fn page_id(&self) -> u64 {
        self.page_id.load(Ordering::Acquire)
    }

    /// Caller holds the exclusive latch (debug-checked by the guard argument).
    pub(crate) fn set_page_id(&self, _guard: &ExclusiveGuard<'_>, page_id: u64) {
        self.page_id.store(page_id, Ordering::Release);
        self.staged.store(0, Ordering::Release);
        self.inserts.store(0, Ordering::Relaxed);
    }

    /// How many keys in a row were inserted into the page in order, the last of them at
    /// `slot - 1`: so that a key at `slot` would continue the run (0 if none would). Read
    /// under the exclusive latch.
    pub(crate) fn in_order_before(&self, slot: usize) -> usize {
        match self.insert_run() {
            Some((next, run)) if next == slot => run,
            _ => 0,
        }
    }

    /// The run of keys arriving in order: the slot where a key would continue it, and how
    /// many keys in a row it holds (`None`: no run noted). Read under the exclusive latch.
    pub(crate) fn insert_run(&self) -> Option<(usize, usize)> {
        let inserts = self.inserts.load(Ordering::Relaxed);
        let run = (inserts >> 16) as usize;
        (run > 0).then_some(((inserts & 0xffff) as usize, run))
    }

    /// Notes that a new key was inserted at `slot`. Caller holds the exclusive latch.
    pub(crate) fn note_insert(&self, guard: &ExclusiveGuard<'_>, slot: usize) {
        let run = self.in_order_before(slot) + 1;
        self.set_insert_run(guard, Some((slot + 1, run)));
    }

    /// Sets (or with `None` forgets) the run of keys arriving in order as (the slot that
    /// would continue it, its length): after a split, the nodes that take the run's place carry
    /// it on at its new slot. Caller holds the exclusive latch.
    pub(crate) fn set_insert_run(&self, _guard: &ExclusiveGuard<'_>, run: Option<(usize, usize)>) {
        // Slots past 16 bits (no page has that many) are not noted.
        let noted = match run {
            Some((next, run)) if next <= 0xffff && run > 0 => (run.min(0xffff) << 16 | next) as u32,
            _ => 0,
        };
        self.inserts.store(noted, Ordering::Relaxed);
    }

    /// The staging mark of the page's latest staged change (0: none); read under a latch.
    pub(crate) fn staged_mark(&self) -> u64 {
        self.staged.load(Ordering::Acquire)
    }

    /// Caller holds the exclusive latch.
    pub(crate) fn set_staged_mark(&self, _guard: &ExclusiveGuard<'_>, mark: u64) {
        self.staged.store(mark, Ordering::Release);
    }

    pub(crate) fn state(&self) -> FrameState {
        match self.state.load(Ordering::Acquire) {
            1 => FrameState::Hot,
            2 => FrameState::Cooling,
            _ => FrameState::Free,
        }
    }

    /// Moves the frame to `state`. Every transition changes the state: free -> hot
    /// (allocated), free -> cooling (read in), hot <-> cooling, and back to free.
    pub(crate) fn set_state(&self, state: FrameState) {
        debug_assert_ne!(self.state(), state, "frame state transition to itself");
        self.state.store(state as u8, Ordering::Release);
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    pub(crate) fn set_dirty(&self, dirty: bool) {
        self.dirty.store(dirty, Ordering::Release);
    }

    /// Claims the right to write this frame back; false if a write-back is in progress.
    pub(crate) fn try_start_writing(&self) -> bool {
        self.writing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    pub(crate) fn finish_writing(&self) {
        self.writing.store(false, Ordering::Release);
    }

    pub(crate) fn is_writing(&self) -> bool {
        self.writing.load(Ordering::Acquire)
    }

    pub(crate) fn is_unused_root(&self) -> bool {
        self.unused_root.load(Ordering::Acquire)
    }

    /// Caller holds the exclusive latch.
    pub(crate) fn set_unused_root(&self, _guard: &ExclusiveGuard<'_>, unused: bool) {
        self.unused_root.store(unused, Ordering::Release);
    }

    pub(crate) fn parent(&self) -> Option<FrameId> {
        match self.parent.load(Ordering::Acquire) {
            NO_PARENT => None,
            link => Some(link - 1),
        }
    }

    pub(crate) fn set_parent(&self, parent: Option<FrameId>) {
        self.parent
            .store(parent.map_or(NO_PARENT, |p| p + 1), Ordering::Release);
    }
}
