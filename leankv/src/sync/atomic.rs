//! The atomics, fences and spin hints the latch and the epoch manager use, from one place, so
//! the same code runs on the real machine and under the [loom] model checker.
//!
//! Normally these are `std::sync::atomic`, `std::hint::spin_loop`, `std::thread::yield_now`
//! and `crossbeam_utils::Backoff`. Built with `RUSTFLAGS="--cfg loom"` they are loom's
//! instrumented versions, and [`Backoff`] becomes a short loop of `loom::thread::yield_now`
//! (loom runs every model thread on one OS thread: a spin that does not yield to loom never
//! ends). Only the latch (`sync::latch`) and the epochs (`buffer::epoch`) go through here; the
//! rest of the crate uses `std` directly and is not modelled.
//!
//! Loom's atomics cannot be created in a `const` or `static` (they register with the running
//! model), and cannot be used outside `loom::model`: under `cfg(loom)` only the loom models
//! (`cargo test --lib loom`) are meaningful.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Tells the processor (or loom's scheduler) that this thread is busy-waiting.
#[cfg(not(loom))]
#[allow(dead_code)] // used by tests and by code that spins without a `Backoff`
#[inline]
pub(crate) fn spin_loop() {
    std::hint::spin_loop();
}

/// Tells loom's scheduler that this thread is busy-waiting: another thread must run.
#[cfg(loom)]
#[allow(dead_code)]
pub(crate) fn spin_loop() {
    loom::hint::spin_loop();
}

#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Under loom: `crossbeam_utils::Backoff`'s interface, each step a loom yield, completed after
/// a few steps so that a waiter that gives up (`HybridLatch::optimistic`) is modelled too.
#[cfg(loom)]
pub(crate) struct Backoff {
    step: std::cell::Cell<u32>,
}

#[cfg(loom)]
impl Backoff {
    /// Steps before `is_completed`; small, each one is a scheduling point loom explores.
    const STEPS: u32 = 2;

    pub(crate) fn new() -> Self {
        Backoff {
            step: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
        self.step.set(self.step.get().saturating_add(1));
    }

    pub(crate) fn is_completed(&self) -> bool {
        self.step.get() >= Self::STEPS
    }
}
