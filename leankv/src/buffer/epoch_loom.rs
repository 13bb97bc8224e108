//! Loom models of epoch-based frame reclamation, on the real `Epochs` (its atomics, fences,
//! mutexes and thread-locals come from `crate::sync`, which are loom's under `cfg(loom)`).
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p leankv --release
//! --lib loom` (or `.ci/concurrency-checks`).
//!
//! What is modelled: the protocol the buffer manager builds on `Epochs`, cut down to one frame
//! and one swip. A *reader* pins, loads the swip (an atomic, like the real `Swip`) and, if it
//! still points at the frame, reads the frame's bytes (a `loom::cell::UnsafeCell`). A *deleter*
//! makes the frame unreachable (stores a null swip, release, as `set_swip` does), then
//! `retire`s it, as `BufferManager::delete_page` does. Whoever later gets the frame back from
//! `reuse_retired` or `reclaim_orphans` writes its bytes, as `allocate_page` does. Loom reports
//! the write unless the reader's read happens-before it: a frame is never handed out while a
//! thread that could still reach it (pinned before the retirement) is pinned.
//!
//! Not modelled: the page latches (an optimistic reader reads the swip without them here, the
//! worst case for the epochs), the cooling stage (`try_unswizzle`, `evict_batch`, which record
//! and compare `cooling_epoch` themselves with the same `reclaim_bound`), and more than one
//! frame. Loom treats `fence(SeqCst)` as a point where all threads' views meet (stronger than
//! C++20's fence, so a pass here is evidence, not proof, of soundness under the language
//! model), and `SeqCst` loads as acquire loads (weaker: could only cause false alarms).

use super::{Epochs, FrameId};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::loom_latch::{model, settle};
use loom::cell::UnsafeCell;
use loom::thread;
use std::mem::ManuallyDrop;
use std::sync::Arc;

const FRAME: FrameId = 7;
const NULL_SWIP: u64 = u64::MAX;

/// The shared state of one model run: the registry, one swip pointing at `FRAME`, and the
/// frame's bytes.
#[derive(Clone)]
struct World {
    epochs: Arc<Epochs>,
    swip: loom::sync::Arc<AtomicU64>,
    bytes: loom::sync::Arc<UnsafeCell<u64>>,
}

impl World {
    fn new() -> Self {
        World {
            epochs: Epochs::new(),
            swip: loom::sync::Arc::new(AtomicU64::new(FRAME as u64)),
            bytes: loom::sync::Arc::new(UnsafeCell::new(0)),
        }
    }

    /// One reader operation: pin, follow the swip, read the frame if it was reachable.
    fn read(&self) {
        // Not dropped while unwinding: a loom atomic touched after loom reported a failure
        // aborts the test binary instead of failing the test.
        let guard = ManuallyDrop::new(self.epochs.pin());
        if self.swip.load(Ordering::Acquire) == FRAME as u64 {
            // SAFETY: reachable while pinned, so not reused yet; that is what loom checks.
            let _ = self.bytes.with(|p| unsafe { *p });
        }
        drop(ManuallyDrop::into_inner(guard));
    }

    /// Makes the frame unreachable and retires it, inside an operation.
    fn delete(&self) {
        let guard = ManuallyDrop::new(self.epochs.pin());
        self.swip.store(NULL_SWIP, Ordering::Release);
        self.epochs.retire(FRAME);
        drop(ManuallyDrop::into_inner(guard));
    }

    /// The next operation of the thread that retired the frame: allocating, it reuses a frame
    /// from its own cache if the last computed bound allows.
    fn allocate(&self) {
        let guard = ManuallyDrop::new(self.epochs.pin());
        if let Some(frame) = self.epochs.reuse_retired() {
            self.reuse(frame);
        }
        drop(ManuallyDrop::into_inner(guard));
    }

    /// The frame has been handed out again: the new owner writes its bytes.
    fn reuse(&self, frame: FrameId) {
        assert_eq!(frame, FRAME);
        // SAFETY: no reader that could reach the frame is still pinned; that is what loom
        // checks.
        self.bytes.with_mut(|p| unsafe { *p = 1 });
    }
}

/// The per-thread path (§IV-I), one thread doing everything: the deleter retires the frame
/// into its own cache, moves the epoch on, computes the bound itself and reuses the frame in
/// its next operation, while a reader that may have pinned before the retirement runs.
#[test]
fn loom_epoch_retired_frame_reused_by_its_thread_only_after_pinned_readers() {
    model(|spawned_first| {
        let world = World::new();
        let reader = {
            let world = world.clone();
            thread::spawn(move || world.read())
        };
        settle(spawned_first);
        world.delete();
        world.epochs.advance();
        world.epochs.reclaim_bound();
        world.allocate();
        reader.join().unwrap();
    });
}

/// The per-thread path with the bound computed by another thread (`evict_batch` runs
/// `reclaim_bound` on whichever thread evicts; `reuse_retired` reads the result).
fn bound_from_other_thread(same_operation: bool, spawned_first: bool) {
    let world = World::new();
    let reader = {
        let world = world.clone();
        thread::spawn(move || world.read())
    };
    let evictor = {
        let world = world.clone();
        thread::spawn(move || {
            world.epochs.advance();
            world.epochs.reclaim_bound();
        })
    };
    settle(spawned_first);
    if same_operation {
        // Delete and allocate inside one pin (e.g. a structure change that frees one page and
        // needs another): no pin, and so no fence, between `retire` and `reuse_retired`.
        let guard = ManuallyDrop::new(world.epochs.pin());
        world.delete();
        world.allocate();
        drop(ManuallyDrop::into_inner(guard));
    } else {
        world.delete();
        world.allocate();
    }
    reader.join().unwrap();
    evictor.join().unwrap();
}

/// The shared path (`evict_batch`): the deleter retires the frame and exits, its cache moves
/// to the orphan list; another thread advances the epoch, computes the bound and reclaims
/// orphans below it, while a reader runs.
fn orphan_path(spawned_first: bool) {
    let world = World::new();
    let reader = {
        let world = world.clone();
        thread::spawn(move || world.read())
    };
    let deleter = {
        let world = world.clone();
        thread::spawn(move || world.delete())
    };
    settle(spawned_first);
    world.epochs.advance();
    let bound = world.epochs.reclaim_bound();
    for frame in world.epochs.reclaim_orphans(bound) {
        world.reuse(frame);
    }
    reader.join().unwrap();
    deleter.join().unwrap();
}

/// The bound computed on another thread, `reuse_retired` in the same operation as `retire`:
/// safe (the deleter's own pin holds the bound at or below the retirement epoch until it
/// unpins).
#[test]
fn loom_epoch_reuse_in_same_operation_with_bound_from_other_thread() {
    model(|spawned_first| bound_from_other_thread(true, spawned_first));
}

/// The bound computed on another thread, `reuse_retired` in a later operation, and the orphan
/// path. Both need the `SeqCst` fence `retire` places between making the frame unreachable and
/// reading the epoch: without it (as the code was) loom found a reader that loaded the old swip
/// still reading the frame when it was handed out again. The reader's fence can come after
/// the evictor's in the SC order (so the evictor read the reader's slot as idle) and yet before
/// any fence of the deleter's that follows its swip store (so the reader still sees the old
/// swip). C++20 allows it on any target; on x86 the locked instructions in `delete_page`
/// happened to order them.
#[test]
fn loom_epoch_bound_from_other_thread() {
    model(|spawned_first| bound_from_other_thread(false, spawned_first));
}

#[test]
fn loom_epoch_orphan_path() {
    model(|spawned_first| orphan_path(spawned_first));
}
