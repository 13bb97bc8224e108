//! # leankv
//!
//! An embedded, ordered key-value storage engine built on a LeanStore-style buffer manager:
//! in-memory speed while the working set fits in the buffer pool, and graceful degradation
//! when the data grows beyond it onto an SSD.
//!
//! * Pages reference each other through *swips*, which hold a frame index while the page is in
//!   memory, so a hit costs one branch instead of a hash-table lookup.
//! * Replacement tracks nothing on hits: random pages are unswizzled into a *cooling* FIFO, from
//!   whose old end frames are reclaimed; a cooling page touched again returns without I/O.
//! * Optimistic latches and epoch-based reclamation keep readers from writing shared memory.
//! * A B+-tree with optimistic lock coupling, variable-size keys and values and fence keys
//!   provides the ordered map. Values may be up to 4 GiB - 1 long: those longer than a
//!   quarter page live in runs of pages of their own, read and written past the pool.
//!
//! ```
//! # fn main() -> leankv::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let db = leankv::Db::open(dir.path(), leankv::Options::default().pool_size(64 << 20))?;
//! let tree = db.open_tree("users")?;
//! tree.insert(b"key", b"value")?;
//! assert_eq!(tree.get(b"key")?, Some(b"value".to_vec()));
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! **Durability:** a write-ahead log makes every commit survive a crash as its [`Durability`]
//! level promises (by default within 10 ms); [`WriteBatch`] groups changes to one or more trees
//! into one atomic commit. Recovery runs at [`Db::open`].

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

// The README's examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;

mod batch;
mod blob;
mod btree;
mod buffer;
mod catalog;
mod checkpoint;
mod db;
mod error;
mod get_many;
mod io;
mod key_count;
mod open;
mod options;
mod range;
mod recovery;
mod shared;
mod sync;
mod transaction;
mod tree;
mod wal;

pub use batch::{Durability, WriteBatch};
pub use btree::check::{IntegrityReport, TreeSpace};
pub use db::{Db, RecoveryStats, Stats};
pub use error::{CompareAndSwapError, Error, Result};
pub use io::IoMode;
pub use options::{
    Options, DEFAULT_PAGE_SIZE, DEFAULT_SCAN_PREFETCH, MAX_KEY_SIZE, MAX_VALUE_SIZE,
    MIN_POOL_FRAMES,
};
pub use range::Range;
pub use transaction::Transaction;
pub use tree::Tree;

/// The buffer-management policies behind the benchmarks' ablations and baselines, the
/// database types generic over them, and the page file's name (feature `ablations`; not for
/// applications).
#[cfg(feature = "ablations")]
pub mod ablations {
    pub use crate::buffer::policy::*;
    pub use crate::db::Db;
    pub use crate::open::PAGE_FILE;
    pub use crate::range::Range;
    pub use crate::tree::Tree;
}

/// The storage seam under the page file, with in-memory and fault-injecting implementations,
/// for tests (feature `testing`; not for applications).
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::io::{
        CrashSimulator, CrashStats, FaultKind, FaultyStorage, FileStorage, MemoryStorage,
        Recovered, RecoveredFile, Recovery, RecoveryReport, SimulatedStorage, Storage, SECTOR_SIZE,
    };
}
