//! Synchronization primitives: the hybrid latch every buffer frame carries, and the `Restart`
//! value that optimistic operations return when they must start over.
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

mod latch;

pub(crate) use latch::{ExclusiveGuard, HybridLatch, SharedGuard};

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
    Corrupt { page_id: u64 },
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
