//! The target's storage: memory that refuses to grow beyond a limit, since an edited record may
//! name any page id and recovery would write it.

use leankv::testing::{MemoryStorage, Storage};
use leankv::IoMode;
use std::sync::Arc;

/// A storage refuses to grow beyond this (as a full disk would).
pub const STORAGE_LIMIT: u64 = 64 << 20;

/// A storage that refuses to grow beyond [`STORAGE_LIMIT`].
pub struct Bounded(pub Arc<dyn Storage>);

impl Bounded {
    pub fn memory(bytes: &[u8]) -> Arc<Bounded> {
        let storage = Arc::new(MemoryStorage::new());
        if !bytes.is_empty() {
            storage.write_at(bytes, 0).expect("memory write");
        }
        Arc::new(Bounded(storage))
    }

    fn check(&self, end: Option<u64>) -> std::io::Result<()> {
        match end {
            Some(end) if end <= STORAGE_LIMIT => Ok(()),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "fuzz storage limit",
            )),
        }
    }
}

impl Storage for Bounded {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.check(offset.checked_add(buf.len() as u64))?;
        self.0.write_at(buf, offset)
    }

    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.check(Some(len))?;
        self.0.extend_to(len)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
    }

    fn shrink_to(&self, len: u64) -> std::io::Result<()> {
        self.0.shrink_to(len)
    }

    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }

    fn mode(&self) -> IoMode {
        self.0.mode()
    }
}
