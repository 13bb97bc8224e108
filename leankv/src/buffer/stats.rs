//! Names of the buffer manager's per-thread event counters (summed into `crate::Stats`).
//!
//! Invariant: counting never takes a lock or touches another thread's cache line on the hot
//! path; the sums are exact once the counted operations have ended.

/// An event the buffer manager counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Pages read from storage.
    PageReads,
    /// Pages written to storage.
    PageWrites,
    /// Frames taken from the cooling stage for reuse.
    Evictions,
    /// Hot pages unswizzled into the cooling stage.
    Unswizzles,
    /// Cooling pages swizzled again without I/O.
    CoolingHits,
    /// Optimistic operations restarted after a failed validation.
    Restarts,
    /// Operations that fell back to pessimistic latching.
    PessimisticFallbacks,
    /// Pages written by the background writer (included in `PageWrites`).
    BackgroundWrites,
    /// Threads that waited for another thread's read of the same page.
    ReadWaits,
    /// Pages read ahead of a scan by the prefetch threads (included in `PageReads`).
    PrefetchReads,
    /// Leaves a scan brought into memory and handed straight back to the cooling stage.
    ScanCooled,
    /// Bytes of large values written to their own pages.
    BlobBytesWritten,
    /// Bytes of large values read from their own pages.
    BlobBytesRead,
}

pub(crate) const COUNTER_COUNT: usize = 13;
