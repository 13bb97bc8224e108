//! The hybrid latch: optimistic reads (version + validate), shared and exclusive locking, all in
//! one 64-bit word. Layout and the reasoning about optimistic reads are in the parent module.
//!
//! Invariants: the version only grows (it survives frame reuse, so a stale version can never
//! validate against a recycled frame); the exclusive bit and a non-zero shared count are never
//! set together; only the exclusive holder bumps the version.

use super::atomic::{fence, yield_now, AtomicU64, Backoff, Ordering};
use super::{Attempt, Restart};

const SHARED_MASK: u64 = 0xFFFF;
const EXCLUSIVE_BIT: u64 = 1 << 16;
const VERSION_UNIT: u64 = 1 << 17;
/// The bits an optimistic reader compares: version and exclusive bit.
const VALIDATION_MASK: u64 = !SHARED_MASK;

/// A latch supporting optimistic, shared and exclusive access. See the module docs.
#[derive(Default)]
#[repr(transparent)]
pub(crate) struct HybridLatch {
    word: AtomicU64,
}

impl HybridLatch {
    /// Starts an optimistic read: returns the version to validate against later, or a restart
    /// if a writer holds the latch (after a short wait, since writers are brief).
    #[inline]
    pub(crate) fn optimistic(&self) -> Attempt<u64> {
        let word = self.word.load(Ordering::Acquire);
        if word & EXCLUSIVE_BIT == 0 {
            return Ok(word & VALIDATION_MASK);
        }
        self.optimistic_slow()
    }

    #[cold]
    fn optimistic_slow(&self) -> Attempt<u64> {
        let backoff = Backoff::new();
        while !backoff.is_completed() {
            backoff.snooze();
            let word = self.word.load(Ordering::Acquire);
            if word & EXCLUSIVE_BIT == 0 {
                return Ok(word & VALIDATION_MASK);
            }
        }
        Err(Restart::Conflict)
    }

    /// Checks that nothing was written since `version` was taken. The acquire fence keeps the
    /// reads of the protected data before the re-load of the latch word.
    #[inline]
    pub(crate) fn validate(&self, version: u64) -> Attempt<()> {
        fence(Ordering::Acquire);
        if self.word.load(Ordering::Relaxed) & VALIDATION_MASK == version {
            Ok(())
        } else {
            Err(Restart::Conflict)
        }
    }

    /// The current version (exclusive bit cleared), for diagnostics and write-back checks.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.word.load(Ordering::Acquire) & VALIDATION_MASK & !EXCLUSIVE_BIT
    }

    /// Turns an optimistic read at `version` into exclusive ownership, failing if anything
    /// happened in between or a shared holder is present.
    #[inline]
    pub(crate) fn try_upgrade(&self, version: u64) -> Attempt<ExclusiveGuard<'_>> {
        debug_assert_eq!(version & EXCLUSIVE_BIT, 0);
        match self.word.compare_exchange(
            version,
            version | EXCLUSIVE_BIT,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                // Writes to the protected data must not become visible before the exclusive bit.
                fence(Ordering::Release);
                Ok(ExclusiveGuard { latch: self })
            }
            Err(_) => Err(Restart::Conflict),
        }
    }

    /// Takes the latch exclusively without waiting, or returns `None`.
    pub(crate) fn try_lock_exclusive(&self) -> Option<ExclusiveGuard<'_>> {
        let word = self.word.load(Ordering::Relaxed);
        if word & (EXCLUSIVE_BIT | SHARED_MASK) != 0 {
            return None;
        }
        self.try_upgrade(word).ok()
    }

    /// Takes the latch exclusively, waiting as long as needed.
    pub(crate) fn lock_exclusive(&self) -> ExclusiveGuard<'_> {
        let backoff = Backoff::new();
        loop {
            if let Some(guard) = self.try_lock_exclusive() {
                return guard;
            }
            snooze_or_yield(&backoff);
        }
    }

    /// Takes the latch in shared mode without waiting, or returns `None`.
    pub(crate) fn try_lock_shared(&self) -> Option<SharedGuard<'_>> {
        let word = self.word.load(Ordering::Relaxed);
        if word & EXCLUSIVE_BIT != 0 || word & SHARED_MASK == SHARED_MASK {
            return None;
        }
        self.word
            .compare_exchange(word, word + 1, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SharedGuard { latch: self })
    }

    /// Takes the latch in shared mode, waiting as long as needed.
    pub(crate) fn lock_shared(&self) -> SharedGuard<'_> {
        let backoff = Backoff::new();
        loop {
            if let Some(guard) = self.try_lock_shared() {
                return guard;
            }
            snooze_or_yield(&backoff);
        }
    }
}

/// Spins briefly, then yields the CPU: on a machine with fewer cores than threads, a waiting
/// thread must let the holder run.
fn snooze_or_yield(backoff: &Backoff) {
    if backoff.is_completed() {
        yield_now();
    } else {
        backoff.snooze();
    }
}

/// Exclusive ownership of a latch; dropping it bumps the version and releases the latch.
#[must_use]
pub(crate) struct ExclusiveGuard<'a> {
    latch: &'a HybridLatch,
}

impl ExclusiveGuard<'_> {
    /// Whether this guard holds `latch` (the proof `Pool::page_mut` asks for).
    pub(crate) fn holds(&self, latch: &HybridLatch) -> bool {
        std::ptr::eq(self.latch, latch)
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        // Clearing the exclusive bit and bumping the version in one add: EXCLUSIVE_BIT is set, so
        // adding EXCLUSIVE_BIT carries into the version field exactly once.
        debug_assert_ne!(self.latch.word.load(Ordering::Relaxed) & EXCLUSIVE_BIT, 0);
        const _: () = assert!(EXCLUSIVE_BIT + EXCLUSIVE_BIT == VERSION_UNIT);
        self.latch.word.fetch_add(EXCLUSIVE_BIT, Ordering::Release);
    }
}

/// Shared ownership of a latch: no writer can enter while it is held.
#[must_use]
pub(crate) struct SharedGuard<'a> {
    latch: &'a HybridLatch,
}

impl SharedGuard<'_> {
    /// The version of the data while this guard is held.
    pub(crate) fn version(&self) -> u64 {
        self.latch.version()
    }
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        debug_assert_ne!(self.latch.word.load(Ordering::Relaxed) & SHARED_MASK, 0);
        self.latch.word.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    #[test]
    fn exclusive_unlock_bumps_version_and_invalidates_readers() {
        let latch = HybridLatch::default();
        let v0 = latch.optimistic().unwrap();
        latch.validate(v0).unwrap();
        drop(latch.lock_exclusive());
        assert_eq!(latch.validate(v0), Err(Restart::Conflict));
        let v1 = latch.optimistic().unwrap();
        assert_eq!(v1, v0 + VERSION_UNIT);
    }

    #[test]
    fn shared_holders_do_not_invalidate_optimistic_readers_but_block_upgrades() {
        let latch = HybridLatch::default();
        let v = latch.optimistic().unwrap();
        let shared = latch.lock_shared();
        latch.validate(v).unwrap();
        assert!(latch.try_upgrade(v).is_err());
        assert!(latch.try_lock_exclusive().is_none());
        drop(shared);
        let guard = latch.try_upgrade(v).unwrap();
        assert!(latch.try_lock_shared().is_none());
        assert!(
            latch.optimistic().is_err(),
            "readers give up while a writer holds it"
        );
        drop(guard);
    }

    #[test]
    fn upgrade_fails_after_intervening_writer() {
        let latch = HybridLatch::default();
        let v = latch.optimistic().unwrap();
        drop(latch.lock_exclusive());
        assert!(latch.try_upgrade(v).is_err());
    }

    /// Optimistic readers race an exclusive writer that keeps two words equal. A reader that
    /// validates must never have seen them differ.
    ///
    /// Bounded by operation counts, never by time: the writer makes `WRITES` writes and each
    /// reader `ATTEMPTS` attempts, whatever the scheduling. It asserts safety only, not that
    /// any read validated or overlapped a write (on a loaded machine none may): with a broken
    /// `validate` (one that ignores the version) the readers validate torn pairs and it fails.
    #[test]
    fn optimistic_readers_never_validate_a_torn_read() {
        const WRITES: u64 = if cfg!(miri) { 50 } else { 20_000 };
        const ATTEMPTS: usize = if cfg!(miri) { 100 } else { 200_000 };
        const READERS: usize = 2;
        let latch = Arc::new(HybridLatch::default());
        let words = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let start = Arc::new(Barrier::new(READERS + 1));
        let writer = {
            let (latch, words, start) = (latch.clone(), words.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for n in 1..=WRITES {
                    let _guard = latch.lock_exclusive();
                    words[0].store(n, Ordering::Relaxed);
                    std::hint::spin_loop();
                    words[1].store(n, Ordering::Relaxed);
                }
            })
        };
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (latch, words, start) = (latch.clone(), words.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..ATTEMPTS {
                        let Ok(v) = latch.optimistic() else { continue };
                        let a = words[0].load(Ordering::Relaxed);
                        let b = words[1].load(Ordering::Relaxed);
                        if latch.validate(v).is_ok() {
                            assert_eq!(a, b, "validated a torn read");
                        }
                    }
                })
            })
            .collect();
        for reader in readers {
            reader.join().unwrap();
        }
        writer.join().unwrap();
        // Deterministic end state: every write happened once and bumped the version once.
        assert_eq!(words[0].load(Ordering::Relaxed), WRITES);
        assert_eq!(words[1].load(Ordering::Relaxed), WRITES);
        assert_eq!(latch.version(), WRITES * VERSION_UNIT);
    }
}
