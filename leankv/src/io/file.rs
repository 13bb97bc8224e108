//! The page file on a real file system, with `O_DIRECT` where it works.

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
        if direct_io {
            match Self::open_with(path, libc::O_DIRECT) {
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

    fn sync(&self) -> Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn mode(&self) -> IoMode {
        self.mode
    }
}
