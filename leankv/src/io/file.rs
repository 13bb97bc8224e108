//! The page file on a real file system, with `O_DIRECT` where it works.
//!
//! Invariant: a read or write either transfers the whole buffer or reports an error (a short
//! transfer is an error, never silently accepted); `sync` makes every completed write durable.

use super::{AlignedBuf, IoMode, Storage, IO_ALIGNMENT};
use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// A page file. Opened with `O_DIRECT` when asked and when the file system accepts it (probed
/// with an aligned read at open); otherwise buffered. [`Storage::mode`] tells which.
pub struct FileStorage {
    file: File,
    mode: IoMode,
}

impl FileStorage {
    /// Opens (creating if missing) the file at `path`.
    pub fn open(path: &Path, direct_io: bool) -> Result<Self> {
        Self::open_preferring(path, direct_io.then_some(libc::O_DIRECT))
    }

    /// Opens with `direct_flags` if the file system accepts them (probed), else buffered.
    fn open_preferring(path: &Path, direct_flags: Option<i32>) -> Result<Self> {
        if let Some(flags) = direct_flags {
            match Self::open_with(path, flags) {
                Ok(file) if probe_direct(&file) => {
                    return Ok(FileStorage {
                        file,
                        mode: IoMode::Direct,
                    })
                }
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(FileStorage {
            file: Self::open_with(path, 0)?,
            mode: IoMode::Buffered,
        })
    }

    fn open_with(path: &Path, flags: i32) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(flags)
            .open(path)
    }
}

/// Some file systems accept `O_DIRECT` at open and reject the I/O itself.
fn probe_direct(file: &File) -> bool {
    let mut buf = AlignedBuf::new(IO_ALIGNMENT);
    file.read_at(&mut buf, 0).is_ok()
}

impl Storage for FileStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(Error::new(
                        ErrorKind::UnexpectedEof,
                        format!("read past the end of the page file at offset {offset}"),
                    ))
                }
                Ok(n) => done += n,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn extend_to(&self, len: u64) -> Result<()> {
        if self.len()? >= len {
            return Ok(());
        }
        // Mode 0 only allocates and grows the size: it never shrinks the file or changes
        // existing bytes.
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::OPNOTSUPP) => {}
            Err(error) => return Err(error.into()),
        }
        // File systems without `fallocate`: `set_len` would cut a concurrent write past `len`
        // short, so it runs only while the file is still shorter.
        if self.len()? < len {
            self.file.set_len(len)?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data()
    }

    fn shrink_to(&self, len: u64) -> Result<()> {
        if self.len()? > len {
            self.file.set_len(len)?;
        }
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn mode(&self) -> IoMode {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(storage: &FileStorage) {
        let mut page = AlignedBuf::new(4096);
        page[100] = 42;
        storage.write_at(&page, 4096).unwrap();
        let mut back = AlignedBuf::new(4096);
        storage.read_at(&mut back, 4096).unwrap();
        assert_eq!(back[100], 42);
        assert!(
            storage.read_at(&mut back, 1 << 20).is_err(),
            "reads past the end fail"
        );
    }

    #[test]
    fn direct_io_is_used_where_supported_and_falls_back_where_not() {
        let dir = tempfile::tempdir().unwrap();
        let on_disk = FileStorage::open(&dir.path().join("pages"), true).unwrap();
        roundtrip(&on_disk);
        let buffered = FileStorage::open(&dir.path().join("other"), false).unwrap();
        assert_eq!(buffered.mode(), IoMode::Buffered);
        roundtrip(&buffered);
        // Flags the file system accepts at open but whose I/O fails (as O_DIRECT does on some
        // file systems): the probe notices and the storage comes up buffered, not broken.
        let path = dir.path().join("fallback");
        File::create(&path).unwrap();
        let storage =
            FileStorage::open_preferring(&path, Some(libc::O_DIRECT | libc::O_PATH)).unwrap();
        assert_eq!(storage.mode(), IoMode::Buffered);
        roundtrip(&storage);
    }

    #[test]
    fn a_shrunk_file_keeps_its_start_on_disk_and_takes_writes_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let storage = FileStorage::open(&path, true).unwrap();
        roundtrip(&storage);
        storage.shrink_to(8192).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
        let mut page = AlignedBuf::new(4096);
        storage.read_at(&mut page, 4096).unwrap();
        assert_eq!(page[100], 42, "the bytes kept are intact");
        storage.shrink_to(1 << 20).unwrap();
        assert_eq!(storage.len().unwrap(), 8192, "shrinking never grows");
        storage.shrink_to(0).unwrap();
        assert!(storage.read_at(&mut page, 0).is_err(), "nothing is left");
        roundtrip(&storage);
    }
}
