//! The one error type of the public API.
//!
//! Every variant is something a caller can act on: retry or free space (`Io`), restore from a
//! backup or run `check_integrity` (`Corruption`, `NotADatabase`, `NotClosedCleanly`), shorten the input
//! (`KeyTooLarge`, `ValueTooLarge`), fix the configuration (`InvalidOptions`), stop the other
//! process (`AlreadyOpen`), or write through the open transaction (`TransactionOpen`). Nothing a
//! caller passes in and nothing read from a file panics.

use std::path::PathBuf;

/// The result type of every fallible leankv call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in leankv.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported an I/O error (including a full device, `ErrorKind::StorageFull`).
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What leankv was doing.
        context: &'static str,
        /// The error from the operating system.
        #[source]
        source: std::io::Error,
    },

    /// A page read from disk failed a check: checksum, page id, page type or node structure.
    #[error("corrupt page {page_id}: {reason}")]
    Corruption {
        /// The page that failed the check.
        page_id: u64,
        /// Which check failed.
        reason: String,
    },

    /// The directory holds a file that is not a leankv database, or one of another format version.
    #[error("{path} is not a leankv database: {reason}")]
    NotADatabase {
        /// The offending file.
        path: PathBuf,
        /// Why it was rejected.
        reason: String,
    },

    /// The key is longer than this database allows.
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge {
        /// Length of the rejected key.
        len: usize,
        /// The limit for this database's page size.
        max: usize,
    },

    /// The value is longer than this database allows.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Length of the rejected value.
        len: usize,
        /// The limit for this database's page size.
        max: usize,
    },

    /// The options cannot work; the message says why.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// Another process (or another `Db` in this process) has the directory open.
    #[error("database at {path} is already open (lock file held)")]
    AlreadyOpen {
        /// The database directory.
        path: PathBuf,
    },

    /// The last process that had the database open without its write-ahead log
    /// (`Options::write_ahead_log(false)`) ended without closing it (a crash, a kill, power
    /// loss): changes since the last `flush` may be lost and the file may mix page versions.
    /// `Options::open_after_crash(true)` opens it anyway, to read what is there; run
    /// `check_integrity` before trusting it. (With the log, which is the default, a crash is
    /// recovered from at the next open instead.)
    #[error(
        "database at {path} was not closed cleanly (the last process crashed or was killed); \
         changes since its last flush may be lost and its pages may be inconsistent. Open it \
         with Options::open_after_crash(true) to salvage it, then run check_integrity"
    )]
    NotClosedCleanly {
        /// The database directory.
        path: PathBuf,
    },

    /// The database was closed; handles that outlive it return this.
    #[error("the database is closed")]
    Closed,

    /// The tree was dropped (`Db::drop_tree`); handles that outlive it return this.
    /// `Db::open_tree` with the same name creates a new, empty tree.
    #[error("the tree was dropped")]
    TreeDropped,

    /// The call would write to a database on which this thread has a [`Transaction`] open
    /// (`Tree::insert`, `Db::write`, `Db::flush` and `check_integrity`, creating or dropping a
    /// tree, a nested transaction): write through the transaction instead, or after it ends.
    ///
    /// [`Transaction`]: crate::Transaction
    #[error(
        "this thread has a transaction open on the database: write through the transaction, \
         or after it ends"
    )]
    TransactionOpen,

    /// No buffer frame could be freed: every frame is pinned by in-flight structure changes.
    /// The pool is too small for this many concurrent threads.
    #[error("buffer pool exhausted: no frame could be evicted ({frames} frames)")]
    PoolExhausted {
        /// Number of frames in the pool.
        frames: usize,
    },
}

impl Error {
    pub(crate) fn io(context: &'static str, source: std::io::Error) -> Self {
        Error::Io { context, source }
    }

    pub(crate) fn corruption(page_id: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            page_id,
            reason: reason.into(),
        }
    }
}

/// A [`Tree::compare_and_swap`](crate::Tree::compare_and_swap) that found another value than
/// the one expected, and so changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compare-and-swap found {} instead of the expected value", describe(.current))]
pub struct CompareAndSwapError {
    /// The value found (`None`: the key was absent).
    pub current: Option<Vec<u8>>,
    /// The value that was to be stored (`None`: the key was to be removed).
    pub proposed: Option<Vec<u8>>,
}

fn describe(value: &Option<Vec<u8>>) -> String {
    match value {
        Some(bytes) => format!("a value of {} bytes", bytes.len()),
        None => "no value".into(),
    }
}
