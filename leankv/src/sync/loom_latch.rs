//! Loom models of the hybrid latch: every interleaving (up to a preemption bound) and every
//! value the C11 memory model lets a relaxed or acquire load return, of two or three threads
//! using the real `HybridLatch` (its atomics, fences and spin loops come from `sync::atomic`,
//! which are loom's under `cfg(loom)`).
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p leankv --release
//! --lib loom` (or `.ci/concurrency-checks`). `LOOM_MAX_PREEMPTIONS` overrides the bound.
//!
//! Protected data is modelled two ways: data only touched under a lock is a
//! `loom::cell::UnsafeCell`, on which loom reports any access not ordered by happens-before
//! (so mutual exclusion *and* the acquire/release pairing are checked); data an optimistic
//! reader reads while a writer may write it is a pair of relaxed `AtomicU64`s, since such a
//! read is a race by design and only the validation decides whether it may be used.

use super::atomic::{AtomicU64, Ordering};
use super::HybridLatch;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// Checks `f` twice: once with the model's main thread running first, once with it yielding
/// right after spawning (`spawned_first`), so that the spawned threads run first in loom's
/// initial execution. Loom 0.7's partial-order reduction misses interleavings depending on
/// that initial order (tokio-rs/loom#392, #166: a thread whose first access is a load can hide
/// an earlier thread's load from the race check); with one order only, the upgrade model below
/// passes even against a `try_upgrade` that ignores the version. The preemption bound is 3
/// unless `LOOM_MAX_PREEMPTIONS` says otherwise.
pub(crate) fn model(f: impl Fn(bool) + Sync + Send + 'static) {
    let f = std::sync::Arc::new(f);
    for spawned_first in [false, true] {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        let f = f.clone();
        builder.check(move || f(spawned_first));
    }
}

/// Called by a model's main thread after spawning: lets the spawned threads go first in
/// loom's initial execution when `spawned_first`.
pub(crate) fn settle(spawned_first: bool) {
    if spawned_first {
        thread::yield_now();
    }
}

/// Reads a latch-protected cell; loom reports it if a write is not ordered with it.
fn read(cell: &UnsafeCell<u64>) -> u64 {
    // SAFETY: callers hold a latch that excludes writers; that is what loom checks.
    cell.with(|p| unsafe { *p })
}

/// Adds to a latch-protected cell; loom reports it if any other access is not ordered with it.
fn add(cell: &UnsafeCell<u64>, amount: u64) {
    // SAFETY: callers hold the latch exclusively; that is what loom checks.
    cell.with_mut(|p| unsafe { *p += amount })
}

/// An exclusive holder excludes every other exclusive and shared holder: two writers and a
/// shared reader touch one unsynchronized cell, which loom flags unless each access
/// happens-before the next. Each writer adds to the cell; the final sum shows no update got
/// lost. The writers use `try_lock_exclusive` (the step `lock_exclusive` repeats) and the
/// reader `lock_shared`: loom explores spin loops poorly, one waiter at a time is what it can
/// do in seconds.
#[test]
fn loom_exclusive_excludes_exclusive_and_shared() {
    model(|spawned_first| {
        let latch = Arc::new(HybridLatch::default());
        let cell = Arc::new(UnsafeCell::new(0u64));
        let writer = {
            let (latch, cell) = (latch.clone(), cell.clone());
            thread::spawn(move || {
                if let Some(_guard) = latch.try_lock_exclusive() {
                    // The exclusive latch is held.
                    add(&cell, 1);
                    1
                } else {
                    0
                }
            })
        };
        let reader = {
            let (latch, cell) = (latch.clone(), cell.clone());
            thread::spawn(move || {
                let guard = latch.lock_shared();
                let version = guard.version();
                // A shared latch excludes writers.
                let seen = read(&cell);
                assert!(matches!(seen, 0 | 1 | 10 | 11));
                // No writer can enter, so the version cannot move.
                assert_eq!(guard.version(), version);
            })
        };
        settle(spawned_first);
        let mut expected = 0;
        if let Some(_guard) = latch.try_lock_exclusive() {
            add(&cell, 10);
            expected += 10;
        }
        expected += writer.join().unwrap();
        reader.join().unwrap();
        let _guard = latch.lock_exclusive();
        assert_eq!(read(&cell), expected, "an update was lost");
    });
}

/// `lock_exclusive` waits for a writer and a shared holder, then excludes them.
#[test]
fn loom_lock_exclusive_waits() {
    model(|spawned_first| {
        let latch = Arc::new(HybridLatch::default());
        let cell = Arc::new(UnsafeCell::new(0u64));
        let other = {
            let (latch, cell) = (latch.clone(), cell.clone());
            thread::spawn(move || {
                if let Some(_guard) = latch.try_lock_shared() {
                    // A shared latch excludes writers.
                    let _ = read(&cell);
                }
                if let Some(_guard) = latch.try_lock_exclusive() {
                    // The exclusive latch is held.
                    add(&cell, 1);
                }
            })
        };
        settle(spawned_first);
        {
            let _guard = latch.lock_exclusive();
            add(&cell, 10);
        }
        other.join().unwrap();
    });
}

/// An optimistic reader that validates never saw a write in progress: the writer changes a
/// pair of words from (0, 0) to (1, 1) and then to (2, 2) under the exclusive latch, with
/// relaxed stores; a reader reads the pair with relaxed loads between `optimistic` and
/// `validate`. Every validated pair must be equal, whichever store each load is allowed to
/// return. This depends on the release fence in `try_upgrade` and the acquire fence in
/// `validate`: without either, loom finds a validated torn pair.
#[test]
fn loom_validated_optimistic_read_is_never_torn() {
    model(|spawned_first| {
        let latch = Arc::new(HybridLatch::default());
        let words = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let writer = {
            let (latch, words) = (latch.clone(), words.clone());
            thread::spawn(move || {
                for n in 1..=2 {
                    let _guard = latch.lock_exclusive();
                    words[0].store(n, Ordering::Relaxed);
                    words[1].store(n, Ordering::Relaxed);
                }
            })
        };
        settle(spawned_first);
        for _ in 0..2 {
            let Ok(version) = latch.optimistic() else {
                continue;
            };
            let first = words[0].load(Ordering::Relaxed);
            let second = words[1].load(Ordering::Relaxed);
            if latch.validate(version).is_ok() {
                assert_eq!(first, second, "validated a torn read");
            }
        }
        writer.join().unwrap();
    });
}

/// `try_upgrade` fails after an intervening writer: a thread reads a counter optimistically
/// and, if its upgrade succeeds, writes back the value read plus 10 (read-modify-write through
/// an upgrade), while another thread adds 1 under the exclusive latch. If an upgrade could
/// succeed after the other write, that write would be lost; the final value shows it.
#[test]
fn loom_upgrade_fails_after_intervening_writer() {
    model(|spawned_first| {
        let latch = Arc::new(HybridLatch::default());
        let counter = Arc::new(AtomicU64::new(0));
        let writer = {
            let (latch, counter) = (latch.clone(), counter.clone());
            thread::spawn(move || {
                let _guard = latch.lock_exclusive();
                let value = counter.load(Ordering::Relaxed);
                counter.store(value + 1, Ordering::Relaxed);
            })
        };
        settle(spawned_first);
        let mut upgraded = false;
        if let Ok(version) = latch.optimistic() {
            let seen = counter.load(Ordering::Relaxed);
            if let Ok(_guard) = latch.try_upgrade(version) {
                // Holding the latch: nothing can have changed what we read.
                assert_eq!(counter.load(Ordering::Relaxed), seen);
                counter.store(seen + 10, Ordering::Relaxed);
                upgraded = true;
            }
        }
        writer.join().unwrap();
        let _guard = latch.lock_exclusive();
        let expected = if upgraded { 11 } else { 1 };
        assert_eq!(
            counter.load(Ordering::Relaxed),
            expected,
            "a write was lost"
        );
    });
}

/// A shared holder blocks upgrades and exclusive locking, and the version it sees is stable;
/// a failed `try_lock_shared`/`try_lock_exclusive` never leaves the word changed.
#[test]
fn loom_shared_blocks_upgrade() {
    model(|spawned_first| {
        let latch = Arc::new(HybridLatch::default());
        let cell = Arc::new(UnsafeCell::new(0u64));
        let reader = {
            let (latch, cell) = (latch.clone(), cell.clone());
            thread::spawn(move || {
                if let Some(guard) = latch.try_lock_shared() {
                    let version = guard.version();
                    // A shared latch excludes writers.
                    let seen = read(&cell);
                    assert_eq!(guard.version(), version);
                    assert_eq!(read(&cell), seen);
                }
            })
        };
        settle(spawned_first);
        if let Ok(version) = latch.optimistic() {
            if let Ok(_guard) = latch.try_upgrade(version) {
                add(&cell, 1);
            }
        }
        if let Some(_guard) = latch.try_lock_exclusive() {
            add(&cell, 1);
        }
        reader.join().unwrap();
    });
}
