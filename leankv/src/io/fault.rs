//! A storage wrapper that injects faults on command, for tests of every error path.

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
}

#[derive(Debug, Default)]
struct Plan {
    read_skip: u64,
    read_faults: u64,
    read_kind: Option<FaultKind>,
    write_skip: u64,
    write_faults: u64,
    write_kind: Option<FaultKind>,
    reads: u64,
    writes: u64,
}

/// Wraps a [`Storage`] and makes chosen reads or writes misbehave.
///
/// ```
/// use leankv::io::{FaultKind, FaultyStorage, MemoryStorage, Storage};
/// use std::sync::Arc;
/// let storage = FaultyStorage::new(Arc::new(MemoryStorage::new()));
/// storage.fail_writes(0, 1, FaultKind::NoSpace);
/// assert!(storage.write_at(&[0; 512], 0).is_err());
/// assert!(storage.write_at(&[0; 512], 0).is_ok());
/// ```
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    plan: Mutex<Plan>,
}

impl FaultyStorage {
    /// Wraps `inner`; no faults are planned yet.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        FaultyStorage {
            inner,
            plan: Mutex::new(Plan::default()),
        }
    }

    /// After `skip` more successful reads, the next `count` reads misbehave as `kind`.
    pub fn fail_reads(&self, skip: u64, count: u64, kind: FaultKind) {
        let mut plan = self.plan.lock();
        (plan.read_skip, plan.read_faults, plan.read_kind) = (skip, count, Some(kind));
    }

    /// After `skip` more successful writes, the next `count` writes misbehave as `kind`.
    pub fn fail_writes(&self, skip: u64, count: u64, kind: FaultKind) {
        let mut plan = self.plan.lock();
        (plan.write_skip, plan.write_faults, plan.write_kind) = (skip, count, Some(kind));
    }

    /// Cancels every planned fault.
    pub fn heal(&self) {
        let mut plan = self.plan.lock();
        (plan.read_faults, plan.write_faults) = (0, 0);
    }

    /// Reads and writes attempted so far (faulty ones included).
    pub fn counts(&self) -> (u64, u64) {
        let plan = self.plan.lock();
        (plan.reads, plan.writes)
    }

    fn next_fault(skip: &mut u64, faults: &mut u64, kind: Option<FaultKind>) -> Option<FaultKind> {
        if *faults == 0 {
            return None;
        }
        if *skip > 0 {
            *skip -= 1;
            return None;
        }
        *faults -= 1;
        kind
    }
}

fn error_for(kind: FaultKind) -> Error {
    match kind {
        FaultKind::Fail(kind) => Error::new(kind, "injected fault"),
        FaultKind::NoSpace => Error::from_raw_os_error(libc::ENOSPC),
        FaultKind::Short => unreachable!("short transfers do not fail"),
    }
}

impl Storage for FaultyStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let fault = {
            let mut plan = self.plan.lock();
            plan.reads += 1;
            let kind = plan.read_kind;
            let Plan {
                read_skip,
                read_faults,
                ..
            } = &mut *plan;
            Self::next_fault(read_skip, read_faults, kind)
        };
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
        let fault = {
            let mut plan = self.plan.lock();
            plan.writes += 1;
            let kind = plan.write_kind;
            let Plan {
                write_skip,
                write_faults,
                ..
            } = &mut *plan;
            Self::next_fault(write_skip, write_faults, kind)
        };
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

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn mode(&self) -> IoMode {
        self.inner.mode()
    }
}
