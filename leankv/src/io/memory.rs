//! Pages kept in a growable byte vector: for tests and for benchmarks that must not touch a disk.

use super::{IoMode, Storage};
use parking_lot::RwLock;
use std::io::{Error, ErrorKind, Result};

/// Storage in memory. Cloning shares nothing; wrap it in an `Arc` to share.
#[derive(Default)]
pub struct MemoryStorage {
    bytes: RwLock<Vec<u8>>,
}

impl MemoryStorage {
    /// An empty storage.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Storage for MemoryStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let bytes = self.bytes.read();
        let start = usize::try_from(offset).map_err(|_| Error::from(ErrorKind::InvalidInput))?;
        let source = bytes
            .get(start..start + buf.len())
            .ok_or_else(|| Error::new(ErrorKind::UnexpectedEof, "read past the end"))?;
        buf.copy_from_slice(source);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut bytes = self.bytes.write();
        let start = usize::try_from(offset).map_err(|_| Error::from(ErrorKind::InvalidInput))?;
        if bytes.len() < start + buf.len() {
            bytes.resize(start + buf.len(), 0);
        }
        bytes[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn extend_to(&self, len: u64) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| Error::from(ErrorKind::InvalidInput))?;
        let mut bytes = self.bytes.write();
        if bytes.len() < len {
            bytes.resize(len, 0);
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn shrink_to(&self, len: u64) -> Result<()> {
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let mut bytes = self.bytes.write();
        bytes.truncate(len);
        bytes.shrink_to_fit();
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.bytes.read().len() as u64)
    }

    fn mode(&self) -> IoMode {
        IoMode::Memory
    }
}
