//! Buffer-management policies: the engine as the paper builds it ([`Lean`]), the ablations of
//! its Fig. 7 and an in-memory baseline, chosen by a type parameter of `Db`.
//!
//! Every choice is an associated constant, so each policy compiles to its own code: the default
//! engine carries no test of a flag on its hot path, and the baselines carry none of leankv's
//! shortcuts. The ablations exist to measure what each of the paper's three techniques is worth
//! (`leankv-bench`); users want [`Lean`], which is what `Db` means without a parameter.

/// How the buffer manager translates page references, chooses victims and synchronizes. The
/// defaults are the engine's own choices; a policy states only where it differs.
pub trait Policy: Send + Sync + 'static {
    /// Name used in benchmark output.
    const NAME: &'static str;
    /// Pages in memory are reached through swizzled swips (`true`), or every reference stays
    /// a page id translated through a global, sharded hash table of resident pages (`false`).
    const SWIZZLING: bool = true;
    /// Victims are chosen by random unswizzling into the cooling FIFO (`true`), or in
    /// least-recently-used order, which records every page access in a global LRU list
    /// (`false`).
    const LEAN_EVICTION: bool = true;
    /// Readers validate versions instead of latching (`true`), or every access takes a shared
    /// or exclusive latch, lock coupling down the tree (`false`).
    const OPTIMISTIC: bool = true;
    /// Pages leave memory when the pool is full (`true`); `false` is a plain in-memory tree:
    /// child references are frame indexes with no tag to test, and a full pool is an error.
    const EVICTS: bool = true;
    /// Every page access is appended to an access trace (`Db::take_access_trace`), for the
    /// replacement-policy simulator.
    const TRACE: bool = false;
    /// The pool is a shared mapping of a file in the database directory, paged by the kernel
    /// (with `EVICTS = false`: the `mmap` baseline).
    const POOL_IN_FILE: bool = false;
}

/// The engine of the LeanStore paper: swizzling, random unswizzling + cooling FIFO,
/// optimistic latches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lean;

impl Policy for Lean {
    const NAME: &'static str = "leankv";
}

// The policies below serve the benchmarks only (feature `ablations`).

#[cfg(feature = "ablations")]
/// leankv with any of its three techniques switched off (paper Fig. 7).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ablated<const SWIZZLING: bool, const LEAN_EVICTION: bool, const OPTIMISTIC: bool>;

#[cfg(feature = "ablations")]
impl<const S: bool, const E: bool, const O: bool> Policy for Ablated<S, E, O> {
    const NAME: &'static str = match (S, E, O) {
        (true, true, true) => "leankv",
        (false, true, true) => "hash-table",
        (true, false, true) => "lru",
        (true, true, false) => "pessimistic",
        (false, false, false) => "traditional",
        (false, false, true) => "hash-table+lru",
        (false, true, false) => "hash-table+pessimistic",
        (true, false, false) => "lru+pessimistic",
    };
    const SWIZZLING: bool = S;
    const LEAN_EVICTION: bool = E;
    const OPTIMISTIC: bool = O;
}

#[cfg(feature = "ablations")]
/// Page translation through a hash table instead of swips.
pub type HashTable = Ablated<false, true, true>;
#[cfg(feature = "ablations")]
/// LRU replacement instead of random unswizzling and the cooling FIFO.
pub type Lru = Ablated<true, false, true>;
#[cfg(feature = "ablations")]
/// Shared and exclusive latches instead of optimistic ones.
pub type Pessimistic = Ablated<true, true, false>;
#[cfg(feature = "ablations")]
/// All three techniques off: a traditional buffer manager (the paper's "baseline").
pub type Traditional = Ablated<false, false, false>;

#[cfg(feature = "ablations")]
/// [`Lean`] that also records the page id of every page access, in order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Traced;

#[cfg(feature = "ablations")]
impl Policy for Traced {
    const NAME: &'static str = "leankv-traced";
    const TRACE: bool = true;
}

#[cfg(feature = "ablations")]
/// The same tree with its nodes in an `mmap`ed file and no replacement of its own: the kernel
/// decides what stays in memory (as LMDB-style engines do). The pool must be sized for all
/// data; it costs address space and disk, and memory only as the kernel keeps pages.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mmap;

#[cfg(feature = "ablations")]
impl Policy for Mmap {
    const NAME: &'static str = "mmap";
    const EVICTS: bool = false;
    const POOL_IN_FILE: bool = true;
}

#[cfg(feature = "ablations")]
/// The same tree on plain memory, with no replacement at all: the pool must hold all data.
#[derive(Debug, Clone, Copy, Default)]
pub struct InMemory;

#[cfg(feature = "ablations")]
impl Policy for InMemory {
    const NAME: &'static str = "inmem";
    const EVICTS: bool = false;
}
