//! Page I/O behind one seam.
//!
//! Everything leankv reads from or writes to its page file goes through the [`Storage`] trait:
//! the real file ([`FileStorage`], direct I/O where the file system allows it) and, with
//! feature `testing`, a memory-backed one (`MemoryStorage`) and a fault-injecting wrapper
//! (`FaultyStorage`) that tests use to make reads and writes fail, come up short or hit a full
//! device. This module also owns the
//! on-disk formats below the tree: the page header with its checksum (`page`), the superblock
//! (`superblock`) and buffers aligned for direct I/O.
//!
//! Invariant: no bytes read through this module are trusted before `page::verify` (or the
//! superblock's own check) has accepted them.

#[cfg(feature = "testing")]
mod crash;
#[cfg(feature = "testing")]
mod fault;
mod file;
#[cfg(feature = "testing")]
mod memory;
pub(crate) mod page;
pub(crate) mod superblock;

#[cfg(feature = "testing")]
pub use crash::{
    CrashSimulator, CrashStats, Recovered, RecoveredFile, Recovery, RecoveryReport,
    SimulatedStorage, SECTOR_SIZE,
};
#[cfg(feature = "testing")]
pub use fault::{FaultKind, FaultyStorage};
pub use file::FileStorage;
#[cfg(feature = "testing")]
pub use memory::MemoryStorage;

/// Alignment of every buffer handed to [`Storage`]: the logical block size direct I/O needs.
pub const IO_ALIGNMENT: usize = 512;

/// Where the pages of a database live. Offsets and lengths are multiples of the page size;
/// buffers are aligned to 512 bytes (the logical block size direct I/O needs).
pub trait Storage: Send + Sync + 'static {
    /// Fills `buf` from `offset`; reading past the end is an `UnexpectedEof` error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// Writes all of `buf` at `offset`, growing the storage as needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
    /// Grows the storage to at least `len` bytes, zero-filled; never shrinks it and never
    /// changes bytes already there (concurrent writes beyond `len` stay).
    fn extend_to(&self, len: u64) -> std::io::Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> std::io::Result<()>;
    /// Drops the bytes beyond `len`, releasing their space (a shorter storage stays as it is).
    /// Callers shrink only storage whose dropped bytes nothing will read again, so a crash
    /// that undoes the shrinking (the old bytes come back) is harmless.
    fn shrink_to(&self, len: u64) -> std::io::Result<()>;
    /// Current size in bytes.
    fn len(&self) -> std::io::Result<u64>;
    /// True when the storage holds no bytes.
    fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// How pages reach the device (reported in `Stats`).
    fn mode(&self) -> IoMode;
    /// A second handle on the file the pages live in, for the reads the buffer manager's
    /// read-ahead submits in batches (io_uring) instead of one [`read_at`](Self::read_at) at
    /// a time. `None` (the default) keeps every read on `read_at`, as a storage that keeps
    /// its pages elsewhere or injects faults needs.
    fn file_for_batched_reads(&self) -> Option<std::fs::File> {
        None
    }
}

/// How page I/O reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// `O_DIRECT`: the OS page cache is bypassed, the pool is the only cache.
    Direct,
    /// Buffered I/O: the file system does not support `O_DIRECT` (or it was turned off), so
    /// pages may be cached twice.
    Buffered,
    /// Pages live in memory (tests, benchmarks).
    Memory,
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Direct => "direct",
            IoMode::Buffered => "buffered",
            IoMode::Memory => "memory",
        })
    }
}

/// Alignment of the start of an [`AlignedBuf`] in memory: a file-system block, more than
/// direct I/O needs ([`IO_ALIGNMENT`]). ext4 counts a direct write from a buffer that is not
/// block-aligned as unaligned, and writes one into preallocated blocks with the inode's lock
/// held exclusively, after waiting for every direct I/O of the file (reads included).
const BUFFER_ALIGNMENT: usize = 4096;

/// A zeroed byte buffer whose start is aligned to [`BUFFER_ALIGNMENT`] (so also to
/// [`IO_ALIGNMENT`]), built from safe code by over-allocating and slicing.
pub(crate) struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub(crate) fn new(len: usize) -> Self {
        let bytes = vec![0u8; len + BUFFER_ALIGNMENT];
        let misalignment = bytes.as_ptr() as usize % BUFFER_ALIGNMENT;
        let start = (BUFFER_ALIGNMENT - misalignment) % BUFFER_ALIGNMENT;
        AlignedBuf { bytes, start, len }
    }

    /// The most bytes it holds without reallocating.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.len() - self.start
    }

    /// Makes it `len` bytes long (at most its capacity), holding what it held before.
    pub(crate) fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity(), "{len} bytes exceed the buffer");
        self.len = len;
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        for len in [512, 4096, 16384] {
            let buf = AlignedBuf::new(len);
            assert_eq!(buf.as_ptr() as usize % BUFFER_ALIGNMENT, 0);
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|&b| b == 0));
        }
    }
}
