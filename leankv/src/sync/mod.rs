//! Synchronization primitives: the hybrid latch every buffer frame carries, the `Restart`
//! value that optimistic operations return when they must start over, and an event to sleep on
//! while another thread finishes work this one needs.
//!
//! # Reading page bytes under an optimistic latch
//!
//! An optimistic reader reads a page while a writer may be changing it, and only afterwards
//! checks (validates) that the latch version did not move. Under Rust's memory model such a read
//! racing a non-atomic write is a data race, exactly the "seqlock problem"; there is no sound,
//! fast way today to `memcmp` or `memcpy` bytes that another thread may write. We decide:
//!
//! * Page bytes are reached only through [`crate::buffer::PageView`] (raw pointer + length),
//!   whose accessors bounds-check every offset, so torn data can never make a read leave the
//!   page. All loops over page contents are bounded by the page size.
//! * Scalars (slot fields, lengths, swips) are read with plain loads through raw pointers, key
//!   bytes through short-lived slices. Nothing read optimistically is acted upon (dereferenced
//!   as a pointer, used to write, or returned to a caller) before the latch version has been
//!   validated with an acquire fence followed by a load of the latch word.
//! * The cost of this decision is nil at run time; the price is that the abstract machine
//!   considers the racy reads undefined. Every optimistic B-tree of this design in C++ and Rust
//!   makes the same trade; a relaxed-atomic byte copy would be sound but several times slower on
//!   the hot path. Swips, the only words written concurrently with readers that then
//!   *dereference* them, are `AtomicU64` and always accessed atomically.
//!
//! # Latch word
//!
//! One `AtomicU64`: bits 0..16 count shared holders, bit 16 is the exclusive bit, bits 17..64
//! are the version, bumped by every exclusive unlock. Optimistic readers compare the version and
//! exclusive bits only, so shared holders (who never write) do not invalidate them.

pub(crate) mod append_ring;
pub(crate) mod atomic;
mod event;
mod latch;
#[cfg(all(test, loom))]
pub(crate) mod loom_latch;

pub(crate) use event::Event;
pub(crate) use latch::{ExclusiveGuard, HybridLatch, SharedGuard};

/// Asks the processor to bring the cache lines of the `len` bytes at `start` close, to be
/// written soon. A hint only: nothing is read or written (the bytes need not be valid), and
/// targets without such an instruction do nothing.
#[inline]
pub(crate) fn prefetch_for_write(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..len).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: a prefetch never faults and changes no memory, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_ET0>(start.wrapping_add(offset).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// Asks the processor to bring every cache line of the `len` bytes at `start` close, to be
/// read soon: loads that would each wait for memory in turn (a binary search's probes) then
/// wait once, together. A hint only, as [`prefetch_for_write`].
#[inline]
pub(crate) fn prefetch_for_read(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let into_line = start.addr() % 64;
        let first_line = start.wrapping_sub(into_line);
        for offset in (0..into_line + len).step_by(64) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch never faults and changes no memory, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first_line.wrapping_add(offset).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

// The mutex of the code that loom models (`buffer::epoch`): `parking_lot::Mutex` normally,
// under `cfg(loom)` loom's mutex behind the same interface (`lock` returns the guard). A
// `parking_lot` lock contended under loom would block the one OS thread loom runs on.
#[cfg(loom)]
pub(crate) use loom_shim::Mutex;
#[cfg(not(loom))]
pub(crate) use parking_lot::Mutex;

/// `thread_local!` of the code that loom models: under `cfg(loom)` loom's, whose values are
/// per model thread (loom runs all model threads on one OS thread). Loom's macro does not take
/// a `const { .. }` initializer, and a value whose drop touches loom atomics must not be
/// dropped while loom unwinds from a failed model (that aborts the test binary); this one
/// drops the `const` and leaks values dropped during a panic.
#[cfg(loom)]
macro_rules! loom_thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr } $(;)?) => {
        $crate::sync::thread_local!($(#[$attr])* $vis static $name: $t = $init);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr $(;)?) => {
        $(#[$attr])* $vis static $name: $crate::sync::loom_shim::LocalKey<$t> = {
            loom::thread_local!(
                static INNER: $crate::sync::loom_shim::LeakOnPanic<$t> =
                    $crate::sync::loom_shim::LeakOnPanic::new($init)
            );
            $crate::sync::loom_shim::LocalKey(&INNER)
        };
    };
}
#[cfg(loom)]
pub(crate) use loom_thread_local as thread_local;
#[cfg(not(loom))]
pub(crate) use std::thread_local;

#[cfg(loom)]
pub(crate) mod loom_shim {
    use std::mem::ManuallyDrop;

    /// `std::thread::LocalKey`'s `with`, over a loom thread-local.
    pub(crate) struct LocalKey<T: 'static>(
        pub(crate) &'static loom::thread::LocalKey<LeakOnPanic<T>>,
    );

    impl<T: 'static> LocalKey<T> {
        pub(crate) fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
            self.0.with(|value| f(&value.0))
        }
    }

    /// A value that is dropped normally, but leaked when dropped during a panic.
    pub(crate) struct LeakOnPanic<T>(ManuallyDrop<T>);

    impl<T> LeakOnPanic<T> {
        pub(crate) fn new(value: T) -> Self {
            LeakOnPanic(ManuallyDrop::new(value))
        }
    }

    impl<T> Drop for LeakOnPanic<T> {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                // SAFETY: dropped once, here; the field is not used afterwards.
                unsafe { ManuallyDrop::drop(&mut self.0) }
            }
        }
    }

    /// `loom::sync::Mutex` with `parking_lot`'s infallible `lock`.
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().expect("a loom model thread panicked")
        }
    }
}

/// Why an internal operation has to start over. Restarts are ordinary values handled by one
/// bounded retry loop per public operation; they never unwind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restart {
    /// A latch validation or upgrade failed: someone changed what we read.
    Conflict,
    /// A new page was needed but no free frame was at hand; free some outside the epoch.
    NeedFrames,
    /// An unswizzled swip was met: bring page `page_id` in (from the cooling stage or disk) and
    /// swizzle the swip at byte `offset` of frame `frame`, provided that frame's latch still
    /// shows `version`.
    Swizzle {
        frame: u32,
        version: u64,
        offset: u32,
        page_id: u64,
    },
    /// Page `page_id` is structurally broken (a check failed on consistent data): the
    /// operation ends with `Error::Corruption`.
    Corrupt { page_id: u64, reason: &'static str },
    /// The tree was dropped: the operation ends with `Error::TreeDropped`.
    Dropped,
}

/// How an operation latches the pages it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LatchMode {
    /// Read without latching and validate; the default.
    Optimistic,
    /// Shared latches with lock coupling: the fallback after repeated failed validations,
    /// which cannot starve.
    Pessimistic,
}

/// Result of an internal operation that may need to restart.
pub(crate) type Attempt<T> = std::result::Result<T, Restart>;
