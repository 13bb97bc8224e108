//! A storage wrapper that injects faults on command, for tests of every error path.
//!
//! Invariant: without a fault armed it behaves exactly like the storage it wraps.

use super::{IoMode, Storage};
use parking_lot::Mutex;
use std::io::{Error, ErrorKind, Result};
use std::sync::Arc;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The call fails with an I/O error of this kind.
    Fail(ErrorKind),
    /// The device is full (`ENOSPC`); only meaningful for writes.
    NoSpace,
    /// Only the first half of the buffer is transferred, yet the call reports success: a torn
    /// write (the old second half stays) or a short read (the second half reads as zeros).
    Short,
    /// The call panics: a bug on the I/O path, for tests of what a panicking thread leaves.
    Panic,
}

/// The planned faults of one direction (reads or writes).
#[derive(Debug, Default)]
struct Schedule {
    skip: u64,
    faults: u64,
    kind: Option<FaultKind>,
    attempts: u64,
}

impl Schedule {
    /// Counts an attempt and says whether it should misbehave.
    fn next(&mut self) -> Option<FaultKind> {
        self.attempts += 1;
        if self.faults == 0 {
            return None;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        self.faults -= 1;
        self.kind
    }

    fn plan(&mut self, skip: u64, count: u64, kind: FaultKind) {
        (self.skip, self.faults, self.kind) = (skip, count, Some(kind));
    }
}

/// Wraps a [`Storage`] and makes chosen reads or writes misbehave.
///
/// ```
/// use leankv::testing::{FaultKind, FaultyStorage, MemoryStorage, Storage};
/// use std::sync::Arc;
/// let storage = FaultyStorage::new(Arc::new(MemoryStorage::new()));
/// storage.fail_writes(0, 1, FaultKind::NoSpace);
/// assert!(storage.write_at(&[0; 512], 0).is_err());
/// assert!(storage.write_at(&[0; 512], 0).is_ok());
/// ```
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    reads: Mutex<Schedule>,
    writes: Mutex<Schedule>,
}

impl FaultyStorage {
    /// Wraps `inner`; no faults are planned yet.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        FaultyStorage {
            inner,
            reads: Mutex::new(Schedule::default()),
            writes: Mutex::new(Schedule::default()),
        }
    }

    /// After `skip` more successful reads, the next `count` reads misbehave as `kind`.
    pub fn fail_reads(&self, skip: u64, count: u64, kind: FaultKind) {
        self.reads.lock().plan(skip, count, kind);
    }

    /// After `skip` more successful writes, the next `count` writes misbehave as `kind`.
    pub fn fail_writes(&self, skip: u64, count: u64, kind: FaultKind) {
        self.writes.lock().plan(skip, count, kind);
    }

    /// Cancels every planned fault.
    pub fn heal(&self) {
        self.reads.lock().faults = 0;
        self.writes.lock().faults = 0;
    }

    /// Reads and writes attempted so far (faulty ones included).
    pub fn counts(&self) -> (u64, u64) {
        (self.reads.lock().attempts, self.writes.lock().attempts)
    }
}

fn error_for(kind: FaultKind) -> Error {
    match kind {
        FaultKind::Fail(kind) => Error::new(kind, "injected fault"),
        FaultKind::NoSpace => Error::from_raw_os_error(libc::ENOSPC),
        FaultKind::Short => unreachable!("short transfers do not fail"),
        FaultKind::Panic => panic!("injected panic on the I/O path"),
    }
}

impl Storage for FaultyStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let fault = self.reads.lock().next();
        match fault {
            None => self.inner.read_at(buf, offset),
            Some(FaultKind::Short) => {
                let half = buf.len() / 2;
                let mut full = super::AlignedBuf::new(buf.len());
                self.inner.read_at(&mut full, offset)?;
                buf[..half].copy_from_slice(&full[..half]);
                buf[half..].fill(0);
                Ok(())
            }
            Some(kind) => Err(error_for(kind)),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let fault = self.writes.lock().next();
        match fault {
            None => self.inner.write_at(buf, offset),
            Some(FaultKind::Short) => {
                // The old bytes of the second half stay: a torn write.
                let half = buf.len() / 2;
                let mut torn = super::AlignedBuf::new(buf.len());
                if self.inner.read_at(&mut torn, offset).is_err() {
                    torn.fill(0);
                }
                torn[..half].copy_from_slice(&buf[..half]);
                self.inner.write_at(&torn, offset)
            }
            Some(kind) => Err(error_for(kind)),
        }
    }

    fn extend_to(&self, len: u64) -> Result<()> {
        self.inner.extend_to(len)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn shrink_to(&self, len: u64) -> Result<()> {
        self.inner.shrink_to(len)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn mode(&self) -> IoMode {
        self.inner.mode()
    }
}
