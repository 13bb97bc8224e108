//! The page file on a real file system, with `O_DIRECT` where it works.
//!
//! A page file allocates its blocks ahead of the pages written past its end (see
//! [`FileStorage::open`]): on ext4 a direct write that extends the file or fills a hole takes
//! the inode's lock exclusively for the whole I/O (block allocation, a journal update), and
//! every read of the file waits behind it. TPC-C beyond memory writes new pages all the time,
//! in no particular order. Writes into blocks allocated ahead stay shared only from buffers
//! aligned to a block, as `AlignedBuf`s are.
//!
//! Invariant: a read or write either transfers the whole buffer or reports an error (a short
//! transfer is an error, never silently accepted); `sync` makes every completed write durable.

use super::{AlignedBuf, IoMode, Storage, IO_ALIGNMENT};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The least and the most a page file grows ahead of a write past its allocated end: an
/// eighth of its size in between, so that a small database stays small and a large one
/// allocates rarely.
const MIN_GROWTH: u64 = 1 << 20;
const MAX_GROWTH: u64 = 64 << 20;

/// A page file. Opened with `O_DIRECT` when asked and when the file system accepts it (probed
/// with an aligned read at open); otherwise buffered. [`Storage::mode`] tells which.
pub struct FileStorage {
    file: File,
    mode: IoMode,
    /// A page file's allocation ahead of its writes; `None` for a file written front to back.
    ahead: Option<Ahead>,
}

/// How far a page file's blocks are allocated (see `FileStorage::allocate_ahead`).
struct Ahead {
    /// The end up to which the file's blocks are allocated, as far as this handle knows
    /// (`u64::MAX`: the file system cannot allocate ahead, so writes grow the file themselves).
    allocated: AtomicU64,
    /// Held while allocating, so that concurrent writes past the end allocate once.
    growing: Mutex<()>,
}

impl FileStorage {
    /// Opens (creating if missing) the page file at `path`. Writes past the end of its
    /// allocated blocks first allocate them and some more (`fallocate`; an eighth of the file,
    /// 1 to 64 MiB), so the file may be longer than its pages: the bytes beyond them read as
    /// zeros and nothing reads them.
    pub fn open(path: &Path, direct_io: bool) -> Result<Self> {
        let mut storage = Self::open_preferring(path, direct_io.then_some(libc::O_DIRECT))?;
        storage.ahead = Some(Ahead {
            allocated: AtomicU64::new(storage.len()?),
            growing: Mutex::new(()),
        });
        Ok(storage)
    }

    /// Opens (creating if missing) a file written front to back by one thread (a log file):
    /// its writes grow it as far as they go, no further.
    pub(crate) fn open_sequential(path: &Path, direct_io: bool) -> Result<Self> {
        Self::open_preferring(path, direct_io.then_some(libc::O_DIRECT))
    }

    /// Opens with `direct_flags` if the file system accepts them (probed), else buffered.
    fn open_preferring(path: &Path, direct_flags: Option<i32>) -> Result<Self> {
        let open = |file, mode| FileStorage {
            file,
            mode,
            ahead: None,
        };
        if let Some(flags) = direct_flags {
            match Self::open_with(path, flags) {
                Ok(file) if probe_direct(&file) => return Ok(open(file, IoMode::Direct)),
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(open(Self::open_with(path, 0)?, IoMode::Buffered))
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

    /// Allocates the file's blocks up to past `end` before a write there, unless they are
    /// (see the module notes). A failure to allocate ahead is left to the write itself: it
    /// needs less space and reports what it meets.
    fn allocate_ahead(&self, ahead: &Ahead, end: u64) {
        let _growing = ahead.growing.lock();
        let allocated = &ahead.allocated;
        let start = allocated.load(Ordering::Acquire);
        if end <= start {
            return;
        }
        let target = end.saturating_add((end / 8).clamp(MIN_GROWTH, MAX_GROWTH));
        // Mode 0 allocates and grows the size; it never changes bytes already there.
        let flags = rustix::fs::FallocateFlags::empty();
        match rustix::fs::fallocate(&self.file, flags, start, target - start) {
            Ok(()) => allocated.store(target, Ordering::Release),
            Err(rustix::io::Errno::OPNOTSUPP) => allocated.store(u64::MAX, Ordering::Release),
            Err(_) => {}
        }
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
        if let Some(ahead) = &self.ahead {
            let end = offset.saturating_add(buf.len() as u64);
            if end > ahead.allocated.load(Ordering::Acquire) {
                self.allocate_ahead(ahead, end);
            }
        }
        self.file.write_all_at(buf, offset)
    }

    fn file_for_batched_reads(&self) -> Option<File> {
        self.file.try_clone().ok()
    }

    fn extend_to(&self, len: u64) -> Result<()> {
        if self.len()? >= len {
            return Ok(());
        }
        // Mode 0 only allocates and grows the size: it never shrinks the file or changes
        // existing bytes.
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => {
                if let Some(ahead) = &self.ahead {
                    ahead.allocated.fetch_max(len, Ordering::AcqRel);
                }
                return Ok(());
            }
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
            if let Some(ahead) = &self.ahead {
                ahead.allocated.fetch_min(len, Ordering::AcqRel);
            }
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
        let end = storage.len().unwrap();
        assert!(
            storage.read_at(&mut back, end).is_err(),
            "reads past the end fail"
        );
    }

    #[test]
    fn a_page_file_allocates_ahead_of_writes_past_its_end_and_a_log_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let pages = FileStorage::open(&dir.path().join("pages"), true).unwrap();
        let log = FileStorage::open_sequential(&dir.path().join("log"), true).unwrap();
        let mut page = AlignedBuf::new(4096);
        page[7] = 7;
        for (storage, ahead) in [(&pages, MIN_GROWTH), (&log, 0)] {
            storage.write_at(&page, 3 * 4096).unwrap();
            assert_eq!(storage.len().unwrap(), 4 * 4096 + ahead);
            // Written pages read back; the ones before them and after them read as zeros.
            let mut back = AlignedBuf::new(4096);
            storage.read_at(&mut back, 3 * 4096).unwrap();
            assert_eq!(back[7], 7);
            for offset in (0..storage.len().unwrap()).step_by(4096) {
                if offset != 3 * 4096 {
                    storage.read_at(&mut back, offset).unwrap();
                    assert!(back.iter().all(|&byte| byte == 0), "offset {offset}");
                }
            }
        }
        // Within what was allocated ahead, writes do not grow the page file; past it, it grows
        // by an eighth of its size.
        let ahead = pages.len().unwrap();
        pages.write_at(&page, ahead - 4096).unwrap();
        assert_eq!(pages.len().unwrap(), ahead);
        let far = 64 << 20;
        pages.write_at(&page, far).unwrap();
        let end = far + 4096;
        assert_eq!(pages.len().unwrap(), end + end / 8);
        // Shrinking forgets what was allocated: the next write past the end allocates again.
        pages.shrink_to(8192).unwrap();
        pages.write_at(&page, 8192).unwrap();
        assert_eq!(pages.len().unwrap(), 3 * 4096 + MIN_GROWTH);
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
        let storage = FileStorage::open_sequential(&path, true).unwrap();
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
