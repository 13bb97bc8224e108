//! The log's back-pressure: while the writer cannot write (a device slower than the appends),
//! writes wait in `admit` once the log buffer is full, and go on once it catches up.
//! And the writer's writes: whole aligned sectors, from chunks in place.

use super::*;
use crate::io::{IoMode, MemoryStorage, IO_ALIGNMENT};
use std::sync::atomic::AtomicUsize;

/// A storage whose writes each wait for a permit (all go once it is opened), counting the
/// writes begun.
#[derive(Default)]
struct Gated {
    inner: MemoryStorage,
    /// Permits left (`usize::MAX`: all writes go), and writes begun.
    gate: Mutex<(usize, usize)>,
    changed: Condvar,
}

impl Gated {
    fn open(&self) {
        self.allow(usize::MAX);
    }

    fn allow(&self, writes: usize) {
        let mut gate = self.gate.lock();
        gate.0 = gate.0.saturating_add(writes);
        self.changed.notify_all();
    }

    fn wait_until_begun(&self, writes: usize) {
        let mut gate = self.gate.lock();
        while gate.1 < writes {
            self.changed.wait(&mut gate);
        }
    }
}

impl Storage for Gated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut gate = self.gate.lock();
        gate.1 += 1;
        self.changed.notify_all();
        while gate.0 == 0 {
            self.changed.wait(&mut gate);
        }
        if gate.0 != usize::MAX {
            gate.0 -= 1;
        }
        drop(gate);
        self.inner.write_at(buf, offset)
    }

    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.extend_to(len)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }

    fn shrink_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.shrink_to(len)
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }

    fn mode(&self) -> IoMode {
        self.inner.mode()
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

/// A new log over `files` (starting in file 0 at LSN 4096) checkpointing every
/// `checkpoint_bytes`, with a 64 MiB log buffer.
pub(super) fn new_log(files: [Arc<dyn Storage>; 2], checkpoint_bytes: u64) -> Log {
    buffered_log(files, checkpoint_bytes, 64 << 20)
}

/// [`new_log`] with a log buffer of `buffer_bytes`.
fn buffered_log(files: [Arc<dyn Storage>; 2], checkpoint_bytes: u64, buffer_bytes: usize) -> Log {
    let config = LogConfig {
        eventual_delay: Duration::from_millis(10),
        checkpoint_bytes,
        buffer_bytes,
        // No zeros: these tests count the writer's writes and read the files back (quickly
        // under Miri); `writer::tests` test the zeros.
        zeroed_ahead: 0,
        thread_regions: true,
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
    let buffer = log.inner.config.buffer_bytes;
    let records = 2 * buffer / (free.len() * 8);
    let appended = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            for _ in 0..records {
                log.admit().unwrap();
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
            queued <= buffer + 4 * WRITE_AHEAD_BYTES,
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

#[test]
fn each_chunk_written_leaves_the_log_buffer_at_once() {
    let gated = Arc::new(Gated::default());
    let files: [Arc<dyn Storage>; 2] = [gated.clone(), Arc::new(MemoryStorage::new())];
    let log = buffered_log(files, 1 << 40, 8 << 20);
    let _unblock = OpenOnDrop(&gated);
    // Records of 256 KiB; the writer is stuck in its first write, of at most two chunks (it
    // writes once a megabyte waits), while four more fill. (Appending on until the writer had
    // begun let a writer that ran late take every chunk at once, and the appends then waited
    // for a free one for ever.)
    let free: Vec<u64> = (1..=32 * 1024).collect();
    while gated.gate.lock().1 == 0 && log.inner.state.lock().sealed.len() < 2 {
        log.append(|writer, _| writer.checkpoint(1, &free, &[]));
    }
    gated.wait_until_begun(1);
    while log.inner.state.lock().sealed.len() < 4 {
        log.append(|writer, _| writer.checkpoint(1, &free, &[]));
    }
    // The writer finishes its first batch (one write per chunk) and takes the sealed chunks
    // as its next.
    let mut begun = 1;
    let (slots, unwritten) = loop {
        gated.allow(1);
        begun += 1;
        gated.wait_until_begun(begun);
        let state = log.inner.state.lock();
        if state.sealed.is_empty() {
            assert!(state.writing_bytes > 2 * WRITE_AHEAD_BYTES);
            break (state.control.free_slots(), state.writing_bytes);
        }
    };
    // Its first chunk written, the batch's other writes wait: that chunk is free already.
    gated.allow(1);
    gated.wait_until_begun(begun + 1);
    let state = log.inner.state.lock();
    assert_eq!(state.control.free_slots(), slots + 1);
    let left = unwritten - state.writing_bytes;
    assert!(
        (1..=WRITE_AHEAD_BYTES).contains(&left),
        "{left} bytes left the buffer"
    );
    drop(state);
    gated.open();
    log.wait_durable(log.end()).unwrap();
    log.shut_down().unwrap();
}

#[test]
fn chunks_are_sealed_at_the_write_ahead_size_while_the_writer_lags() {
    let gated = Arc::new(Gated::default());
    let files: [Arc<dyn Storage>; 2] = [gated.clone(), Arc::new(MemoryStorage::new())];
    let log = new_log(files.clone(), 1 << 40);
    let _unblock = OpenOnDrop(&gated);
    let start = log.begin_checkpoint(1, &[], Vec::new);
    // The writer is stuck in its first write (which takes what is sealed by then); small
    // records pile up meanwhile, until three chunks wait (at most 16 MiB of them).
    let mut commits = 0;
    loop {
        {
            // Checked under the same lock as the count: the writer cannot take them between.
            let state = log.inner.state.lock();
            if state.sealed.len() >= 3 {
                for pair in state.sealed.windows(2) {
                    let len = pair[0].sealed.len();
                    // Full: the next 32-byte commit record did not fit.
                    assert!(
                        len <= WRITE_AHEAD_BYTES && len + 32 > WRITE_AHEAD_BYTES,
                        "{len}"
                    );
                    assert_eq!(pair[0].offset + len as u64, pair[1].offset);
                }
                break;
            }
        }
        assert!(log.end() < start.lsn + 16 * WRITE_AHEAD_BYTES as u64);
        commits += 1;
        log.append(|writer, _| writer.commit(commits));
    }
    gated.open();
    log.shut_down().unwrap();
    assert_eq!(commits_in(&files, start), (1..=commits).collect::<Vec<_>>());
}

/// A memory storage whose writes pass `check` first (and which reports `mode`).
struct CheckedWrites {
    inner: MemoryStorage,
    mode: IoMode,
    check: fn(&[u8], u64) -> std::io::Result<()>,
}

impl CheckedWrites {
    /// Refuses what direct I/O refuses (a buffer, offset or length not aligned to the sector)
    /// and what the log must not do (an offset or length that is not whole blocks, which
    /// ext4 serves slowly when it extends the file: see `LOG_BLOCK`).
    fn whole_blocks_only() -> CheckedWrites {
        CheckedWrites {
            inner: MemoryStorage::new(),
            mode: IoMode::Direct,
            check: |buf, offset| {
                let whole_blocks = |n: usize| n.is_multiple_of(LOG_BLOCK);
                if (buf.as_ptr() as usize).is_multiple_of(IO_ALIGNMENT)
                    && whole_blocks(buf.len())
                    && whole_blocks(offset as usize)
                {
                    Ok(())
                } else {
                    Err(std::io::Error::from_raw_os_error(libc::EINVAL))
                }
            },
        }
    }

    /// Panics on every write, as a bug in the writer would.
    fn panicking() -> CheckedWrites {
        CheckedWrites {
            inner: MemoryStorage::new(),
            mode: IoMode::Buffered,
            check: |_, _| panic!("a bug in the log writer"),
        }
    }
}

impl Storage for CheckedWrites {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        (self.check)(buf, offset)?;
        self.inner.write_at(buf, offset)
    }

    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.extend_to(len)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }

    fn shrink_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.shrink_to(len)
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }

    fn mode(&self) -> IoMode {
        self.mode
    }
}

/// The batch numbers of the commit records in the log from `start`.
pub(super) fn commits_in(files: &[Arc<dyn Storage>; 2], start: LogPosition) -> Vec<u64> {
    let (records, _) = records_from(files, start).unwrap();
    records
        .iter()
        .filter_map(|(_, record)| match record {
            Record::Commit { batch } => Some(*batch),
            _ => None,
        })
        .collect()
}

fn whole_blocks_only_files() -> [Arc<dyn Storage>; 2] {
    [
        Arc::new(CheckedWrites::whole_blocks_only()),
        Arc::new(CheckedWrites::whole_blocks_only()),
    ]
}

#[test]
fn chunks_are_written_in_place_as_whole_blocks() {
    let files = whole_blocks_only_files();
    let log = new_log(files.clone(), 1 << 40);
    let start = log.begin_checkpoint(1, &[], Vec::new);
    // Each commit synced alone: every write begins with the partial block of the last.
    for batch in 1..=40 {
        let (_, end) = log.append(|writer, _| writer.commit(batch));
        log.wait_durable(end).unwrap();
    }
    // Many records per write, taken by the writer ahead of any sync (fewer under Miri, which
    // interprets each append slowly: many still go into one write).
    let last = if cfg!(miri) { 100 } else { 2_000 };
    for batch in 41..=last {
        log.append(|writer, _| writer.commit(batch));
    }
    log.shut_down().unwrap();
    assert_eq!(commits_in(&files, start), (1..=last).collect::<Vec<_>>());
}

#[test]
fn chunks_are_written_in_place_and_each_write_carries_the_partial_block() {
    let files = whole_blocks_only_files();
    let log = new_log(files.clone(), 1 << 40);
    let (mut tail, mut unsynced) = (Tail::default(), [false; 2]);
    let records = |len: usize, seed: u8| -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    };
    // A chunk of the log's own, outside its writer's sight (nothing is appended meanwhile).
    let chunk = |offset: u64, records: &[u8]| {
        let mut state = log.inner.state.lock();
        let chunks = &log.inner.chunks;
        let in_block = (offset % LOG_BLOCK as u64) as usize;
        let control = &mut state.control;
        let len = records.len();
        control
            .install(chunks, 4096 + offset, 0, in_block, len, LOG_BLOCK, len)
            .unwrap()
            .fill(records);
        let sealed = control.seal(chunks).unwrap();
        Chunk {
            file: 0,
            offset,
            sealed,
        }
    };
    let (first, second, third) = (records(3000, 1), records(6000, 2), records(300, 3));
    // Each but the first starts mid-block; the second spans two blocks, the third ends in the
    // block where it starts.
    let mut chunks = [chunk(0, &first), chunk(3000, &second), chunk(9000, &third)];
    for chunk in &mut chunks {
        log.inner
            .write_chunk(chunk, &mut tail, &mut unsynced)
            .unwrap();
    }
    log.inner.sync_files(&mut unsynced).unwrap();
    assert_eq!(files[0].len().unwrap(), 3 * LOG_BLOCK as u64);
    let mut written = vec![0; 3 * LOG_BLOCK];
    files[0].read_at(&mut written, 0).unwrap();
    assert_eq!(written[..9300], [first, second, third].concat());
    assert!(written[9300..].iter().all(|&b| b == 0));
    assert_eq!((tail.offset, tail.bytes.len()), (8192, 9300 - 8192));
    let mut state = log.inner.state.lock();
    for chunk in chunks {
        log.inner.free_chunk(&mut state, chunk.sealed);
    }
    drop(state);
    log.shut_down().unwrap();
}

#[test]
fn spare_chunks_follow_the_recent_peak_and_halve_once_it_is_not_reached() {
    let start = Instant::now();
    let at = |seconds: u64| start + Duration::from_secs(seconds);
    let mut spares = SpareChunks::new(start);
    assert_eq!(
        spares.keep(1, at(0)),
        SPARE_CHUNKS,
        "never fewer than the floor"
    );
    assert_eq!(spares.keep(40, at(1)), 40, "a burst's chunks are all kept");
    assert_eq!(spares.keep(3, at(2)), 40);
    // The burst recurs before the peak decays: still 40.
    assert_eq!(spares.keep(38, at(10)), 40);
    assert_eq!(spares.keep(40, at(11)), 40);
    // Not reached for the decay interval: halved, and again after the next.
    assert_eq!(spares.keep(2, at(11) + SPARE_DECAY), 20);
    assert_eq!(spares.keep(2, at(12) + SPARE_DECAY), 20);
    assert_eq!(spares.keep(2, at(11) + 2 * SPARE_DECAY), 10);
    // Never below what is in use, nor below the floor.
    assert_eq!(spares.keep(9, at(11) + 3 * SPARE_DECAY), 9);
    assert_eq!(spares.keep(1, at(11) + 5 * SPARE_DECAY), SPARE_CHUNKS);
}

#[test]
fn a_panic_in_the_writer_fails_the_log_instead_of_leaving_commits_waiting() {
    let files: [Arc<dyn Storage>; 2] = [
        Arc::new(CheckedWrites::panicking()),
        Arc::new(CheckedWrites::panicking()),
    ];
    let log = new_log(files, 1 << 40);
    let (_, end) = log.append(|writer, _| writer.commit(1));
    let error = log.wait_durable(end).unwrap_err();
    assert!(
        error.to_string().contains("the log writer panicked"),
        "{error}"
    );
    assert!(log.sync_eventually().is_err());
    assert!(log.shut_down().is_err());
}

/// The keys of the puts and the batches of the commits in the log from `start`, in order.
fn puts_and_commits(files: &[Arc<dyn Storage>; 2], start: LogPosition) -> Vec<String> {
    let (records, _) = records_from(files, start).unwrap();
    records
        .iter()
        .filter_map(|(_, record)| match record {
            Record::Put { key, .. } => Some(String::from_utf8_lossy(key).into_owned()),
            Record::Commit { batch } => Some(format!("commit {batch}")),
            _ => None,
        })
        .collect()
}

/// Staged records reach the log whole, in order and stamped with their positions when their
/// slot is published: by the thread's next direct append (here its commit), or by another
/// thread settling a page they marked; an encoding that panicked halfway leaves nothing in
/// the slot (what it wrote would have been published as a damaged frame).
#[test]
fn staged_records_are_published_whole_in_order() {
    let files = whole_blocks_only_files();
    let log = new_log(files.clone(), 1 << 40);
    let start = log.begin_checkpoint(1, &[], Vec::new);
    let gate = parking_lot::RwLock::new(());
    let count = crate::key_count::KeyStripe::default();
    let put = |key: &'static str| LeafChange {
        page_id: 9,
        tree: 3,
        batch: 5,
        op: LeafOp::put(key.as_bytes(), b"value", false, true, None),
        before: BeforeRef::Absent,
    };
    // A page last changed after the checkpoint began: no image.
    let described = u64::MAX;
    let mut no_image = |_: &mut [u8]| -> (usize, usize) { unreachable!("no image") };
    let stage = |key, page_lsn, fill: &mut FillImage<'_>| match log.append_leaf(
        put(key),
        page_lsn,
        4096,
        fill,
        &count,
        true,
    ) {
        Logged::Staged { mark, .. } => mark,
        Logged::Appended(_) => panic!("{key} was not staged"),
    };

    // Another thread's slot, settled by this one before its commit.
    let other_mark = std::thread::scope(|scope| {
        let (send_mark, marked) = std::sync::mpsc::channel();
        let (send_settled, settled) = std::sync::mpsc::channel::<()>();
        let (gate, stage, log) = (&gate, &stage, &log);
        let other = scope.spawn(move || {
            let gate = gate.read();
            let _slot = log.stage_batch(&gate).unwrap();
            let mut no_image = |_: &mut [u8]| -> (usize, usize) { unreachable!("no image") };
            send_mark
                .send(stage("other", described, &mut no_image))
                .unwrap();
            settled.recv().unwrap();
        });
        let mark = marked.recv().unwrap();
        // Staged, not yet in the log: a checkpoint must write its page (see `is_published`).
        assert!(!log.is_published(mark));
        log.settle(mark);
        assert!(log.is_published(mark));
        send_settled.send(()).unwrap();
        other.join().unwrap();
        mark
    });
    assert_ne!(other_mark, 0);

    let gate = gate.read();
    let slot = log.stage_batch(&gate).unwrap();
    stage("first", described, &mut no_image);
    // A page whose last change lies at or before the checkpoint: its image is encoded, and
    // the encoding panics after writing part of the frame.
    let mut failing = |_: &mut [u8]| -> (usize, usize) { panic!("filling the image") };
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stage("torn", 0, &mut failing);
    }));
    assert!(panicked.is_err());
    stage("second", described, &mut no_image);
    let (_, end) = log.append(|writer, _| writer.commit(5));
    drop(slot);
    log.wait_durable(end).unwrap();
    log.shut_down().unwrap();
    assert_eq!(
        puts_and_commits(&files, start),
        ["other", "first", "second", "commit 5"]
    );
    assert_eq!(count.net(), 3, "each staged put counted once");
}

#[test]
fn a_checkpoint_record_lies_at_its_position_while_commits_race_it_and_the_interval_is_asked() {
    let files: [Arc<dyn Storage>; 2] = [
        Arc::new(MemoryStorage::new()),
        Arc::new(MemoryStorage::new()),
    ];
    let log = new_log(files.clone(), 1 << 40);
    let stop = AtomicBool::new(false);
    // Commits append without the mutex, and each checkpoint opens a chunk: none of them may
    // take the chunk's first bytes before the checkpoint record that opened it.
    let positions: Vec<LogPosition> = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut batch = 0;
            while !stop.load(Ordering::Relaxed) {
                batch += 1;
                log.commit(batch);
                // As the checkpoint thread asks, while checkpoints begin (it once read the end
                // and the threshold apart, and a checkpoint between made the difference
                // negative).
                log.wants_checkpoint();
            }
        });
        // Interpreted, each checkpoint takes long: fewer under Miri.
        let checkpoints = if cfg!(miri) { 3 } else { 50 };
        let positions = (0..checkpoints)
            .map(|_| log.begin_checkpoint(1, &[], Vec::new))
            .collect();
        stop.store(true, Ordering::Relaxed);
        positions
    });
    log.shut_down().unwrap();
    for position in positions {
        let (records, _) = records_from(&files, position).unwrap();
        assert!(
            matches!(records.first(), Some((_, Record::Checkpoint { .. }))),
            "{position:?} holds {:?}",
            records.first()
        );
    }
}
