//! The log's back-pressure: while the writer cannot write (a device slower than the appends),
//! writes wait in `admit` once `MAX_QUEUED_BYTES` are queued, and go on once it catches up.

use super::*;
use crate::io::{IoMode, MemoryStorage};
use std::sync::atomic::AtomicUsize;

/// A storage whose writes wait until it is opened.
#[derive(Default)]
struct Gated {
    inner: MemoryStorage,
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gated {
    fn open(&self) {
        *self.open.lock() = true;
        self.opened.notify_all();
    }
}

/// Opens the gate when dropped, so that a failing test fails instead of hanging in the log's
/// shutdown (which waits for the writer's write).
struct OpenOnDrop<'a>(&'a Gated);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Storage for Gated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut open = self.open.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
        drop(open);
        self.inner.write_at(buf, offset)
    }

    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.extend_to(len)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }

    fn mode(&self) -> IoMode {
        self.inner.mode()
    }
}

/// A new log over `files` (starting in file 0 at LSN 4096) checkpointing every
/// `checkpoint_bytes`.
pub(super) fn new_log(files: [Arc<dyn Storage>; 2], checkpoint_bytes: u64) -> Log {
    let config = LogConfig {
        eventual_delay: Duration::from_millis(10),
        checkpoint_bytes,
    };
    let end = LogEnd {
        file: 0,
        offset: 0,
        lsn: 4096,
        tail: Tail::default(),
    };
    let previous = LogPosition {
        file: 1,
        offset: 0,
        lsn: 4096,
    };
    Log::start(
        files,
        Arc::new(MemoryStorage::new()),
        config,
        end,
        previous,
        1,
    )
    .unwrap()
}

#[test]
fn writes_wait_while_the_writer_falls_behind() {
    let gated = Arc::new(Gated::default());
    let files: [Arc<dyn Storage>; 2] = [gated.clone(), Arc::new(MemoryStorage::new())];
    // A checkpoint interval far above what the test appends: only the queue makes writes wait.
    let log = new_log(files, 1 << 40);
    let _unblock = OpenOnDrop(&gated);
    // Records of ~1 MiB each (a checkpoint record with a long free list), twice the bound.
    let free: Vec<u64> = (1..=128 * 1024).collect();
    let records = 2 * MAX_QUEUED_BYTES / (free.len() * 8);
    let appended = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            for _ in 0..records {
                log.admit();
                log.append(|writer, _| writer.checkpoint(1, &free, &[]));
                appended.fetch_add(1, Ordering::AcqRel);
            }
        });
        // The writer is stuck in its first write: the appender must stop at the bound.
        while !log.inner.throttled.load(Ordering::Acquire) {
            assert!(
                !appender.is_finished(),
                "every record queued without waiting"
            );
            std::thread::yield_now();
        }
        let queued = appended.load(Ordering::Acquire) * free.len() * 8;
        assert!(
            queued <= MAX_QUEUED_BYTES + 4 * WRITE_AHEAD_BYTES,
            "{queued} bytes queued"
        );
        assert!(appended.load(Ordering::Acquire) < records);
        gated.open();
        appender.join().unwrap();
    });
    assert_eq!(appended.load(Ordering::Acquire), records);
    log.wait_durable(log.end()).unwrap();
    assert!(!log.inner.throttled.load(Ordering::Acquire));
    log.shut_down().unwrap();
}
