//! The write-ahead log: every change that can reach the page file is described here first.
//!
//! Appending copies an encoded record into an in-memory chunk under one mutex and returns the
//! record's end position (its LSN); a writer thread writes chunks to the log file and syncs
//! when a commit waits for durability (`Immediate`, group commit: every commit that arrived
//! meanwhile shares the sync), when the `Eventual` delay is up, when a page write needs its
//! records durable first (the WAL rule) or at shutdown. Between syncs it writes large chunks
//! ahead without syncing; writes wait while more than `MAX_QUEUED_BYTES` of log wait for the
//! writer (a device slower than the appends), so memory stays bounded under any durability.
//!
//! The log lives in two files used in turn: a checkpoint starts the other file (from offset 0)
//! when the last completed checkpoint started in the current one, so the file being overwritten
//! never holds records recovery could still need; otherwise the checkpoint record goes on in
//! the current file. Log disk use is thus bounded by two checkpoint intervals.
//!
//! Writes are whole 512-byte sectors: the last, partial sector is written again, with the same
//! leading bytes, by the next write. A torn sector therefore holds either the old bytes (whose
//! records were synced, or are lost unsynced) or the new ones.
//!
//! Invariants: `durable <= written <= end`; a page image whose LSN is above `durable` is never
//! written (callers wait with [`Log::wait_durable`]); a failed write or sync (or a panic of the
//! writer thread) poisons the log: every later wait fails, so no page reaches the disk ahead
//! of records that may be lost, and no commit waits for a sync that will not come.

mod decode;
mod group;
mod reader;
pub(crate) mod record;
mod staging;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use decode::Outline;
#[cfg(test)]
pub(crate) use reader::records_from;
pub(crate) use reader::{read_log, reread_log, LogEnd, LogScan};
pub(crate) use record::{
    Before, BeforeRef, ChangedRanges, FillImage, FrameWriter, LeafChange, LeafOp, RangeRemoval,
    RangeStep, Record, Split,
};
pub(crate) use staging::{Logged, StagingSlot};
pub(crate) use writer::Tail;

use record::{stamp, FRAME_HEADER};

use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, IO_ALIGNMENT};
use crate::sync::prefetch_for_write;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// LSNs beyond this come only from damaged files (at 1 GB/s of log it takes 146 years).
pub(crate) const MAX_LSN: u64 = 1 << 62;

/// The writer writes (without syncing) once this many bytes wait, to bound memory.
const WRITE_AHEAD_BYTES: usize = 1 << 20;
/// A chunk buffer's capacity: a chunk is sealed once it holds `WRITE_AHEAD_BYTES`, and the
/// quarter beyond is room for the record that crosses that (buffers are reused).
const CHUNK_CAPACITY: usize = WRITE_AHEAD_BYTES + (WRITE_AHEAD_BYTES >> 2);
/// Bytes past its end an append fetches into the cache for the next ones (a few records).
const PREFETCH_AHEAD: usize = 512;
/// Chunk buffers kept for reuse.
const SPARE_CHUNKS: usize = 4;
/// Log bytes appended but not yet taken by the writer beyond which writes wait in `admit`
/// (the device is slower than the appends): the log's memory stays bounded.
const MAX_QUEUED_BYTES: usize = 64 << 20;

/// The most a clean close leaves of each log file (less with a shorter checkpoint interval,
/// about what a life writes to each file in turn): the next life's log overwrites these blocks
/// first, and a sync after overwriting needs no file-system metadata, where one after
/// extending the file does (`Immediate` commits ran ~26% slower on fresh files here).
const RETAINED_LOG_BYTES: u64 = 64 << 20;

/// Where a checkpoint record lies: recovery starts reading there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogPosition {
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) lsn: u64,
}

/// How the log is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogConfig {
    pub(crate) eventual_delay: Duration,
    /// A checkpoint is wanted once this many log bytes were written since the last one began.
    pub(crate) checkpoint_bytes: u64,
}

/// Log activity, for `Stats`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogCounters {
    pub(crate) bytes: u64,
    pub(crate) syncs: u64,
}

/// A thread's buffers for encoding a leaf record before it takes the log's mutex.
#[derive(Default)]
struct Encoding {
    frame: Vec<u8>,
    scratch: Vec<u8>,
}

thread_local! {
    static ENCODING: std::cell::RefCell<Encoding> = std::cell::RefCell::default();
}

/// Log bytes appended since the writer last took them, laid out to be written in place:
/// `bytes[lead..]` are the records, from file offset `offset`, and the `lead` bytes before
/// them leave room for the file's partial sector (written again) such that the write starts
/// on an [`IO_ALIGNMENT`] boundary in memory, as direct I/O needs. Copying each megabyte
/// chunk into an aligned buffer instead flushed the writer's core's cache (YCSB A with the
/// log, 2 threads on 2 cores: about 4% of throughput).
struct Chunk {
    file: usize,
    offset: u64,
    start_lsn: u64,
    lead: usize,
    bytes: Vec<u8>,
}

impl Chunk {
    /// A chunk of `bytes` (emptied) starting at `offset` of `file`, log position `start_lsn`.
    fn new(file: usize, offset: u64, start_lsn: u64, mut bytes: Vec<u8>) -> Chunk {
        bytes.clear();
        let in_sector = (offset % IO_ALIGNMENT as u64) as usize;
        let to_boundary = bytes.as_ptr() as usize % IO_ALIGNMENT;
        let lead = in_sector + (IO_ALIGNMENT - to_boundary) % IO_ALIGNMENT;
        bytes.resize(lead, 0);
        Chunk {
            file,
            offset,
            start_lsn,
            lead,
            bytes,
        }
    }

    fn records(&self) -> &[u8] {
        &self.bytes[self.lead..]
    }
}

struct State {
    /// The chunk appends go to (kept inline: appending touches few cache lines).
    open: Option<Chunk>,
    /// Earlier chunks not yet taken by the writer, in log order (full, or of the file
    /// before a checkpoint switched files).
    sealed: Vec<Chunk>,
    pending_bytes: usize,
    /// Next LSN, and where it lands.
    end: u64,
    file: usize,
    file_offset: u64,
    generation: u32,
    /// File of the last completed checkpoint, and its LSN.
    checkpoint: LogPosition,
    requested: u64,
    eventual_deadline: Option<Instant>,
    failed: Option<String>,
    /// Why the last checkpoint failed, until one succeeds: writes that would wait for a
    /// checkpoint fail with it instead of waiting for one that may never come.
    checkpoint_failure: Option<String>,
    shutdown: bool,
    /// Chunk buffers the writer has written, kept for reuse.
    spare: Vec<Vec<u8>>,
    /// Where page images are assembled (see `FrameWriter::scratch`).
    scratch: Vec<u8>,
}

struct Inner {
    files: [Arc<dyn Storage>; 2],
    /// The page file: synced before the log is written past a large value's record (see
    /// `data_written`).
    data_file: Arc<dyn Storage>,
    /// Large values written to the page file so far, and how many of them a sync of it
    /// covers (the writer's alone).
    data_writes: AtomicU64,
    data_synced: AtomicU64,
    config: LogConfig,
    state: Mutex<State>,
    /// Wakes the writer thread.
    work: Condvar,
    /// Wakes threads waiting for durability or for a checkpoint.
    progress: Condvar,
    durable: AtomicU64,
    /// Set while an `Eventual` sync is due (`State::eventual_deadline` is set).
    sync_armed: AtomicBool,
    /// Set once `State::failed` is.
    failed: AtomicBool,
    /// Pages whose last change ends at or before this LSN log an image at their next change.
    /// Changed under the state's mutex, at checkpoints; read before a leaf record is encoded.
    redo_ptr: AtomicU64,
    /// Set while writes must wait (see `Inner::must_wait`; `admit` runs before every write and
    /// reads only this; it changes rarely).
    throttled: AtomicBool,
    next_batch: AtomicU64,
    bytes: AtomicU64,
    syncs: AtomicU64,
    /// Open batches' staged records (see `staging`).
    slots: staging::Slots,
}

/// The log of one open database.
pub(crate) struct Log {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Log {
    /// Starts a log that continues at `end` (the end of what recovery read, in `end.file` at
    /// `end.offset`) with a new `generation`; `checkpoint` is the last completed checkpoint.
    pub(crate) fn start(
        files: [Arc<dyn Storage>; 2],
        data_file: Arc<dyn Storage>,
        config: LogConfig,
        end: LogEnd,
        checkpoint: LogPosition,
        generation: u32,
    ) -> Result<Log> {
        let inner = Arc::new(Inner {
            files,
            data_file,
            data_writes: AtomicU64::new(0),
            data_synced: AtomicU64::new(0),
            config,
            state: Mutex::new(State {
                open: None,
                sealed: Vec::new(),
                pending_bytes: 0,
                end: end.lsn,
                file: end.file,
                file_offset: end.offset,
                generation,
                checkpoint,
                requested: 0,
                eventual_deadline: None,
                failed: None,
                checkpoint_failure: None,
                shutdown: false,
                spare: Vec::new(),
                scratch: Vec::new(),
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            durable: AtomicU64::new(end.lsn),
            sync_armed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            throttled: AtomicBool::new(false),
            redo_ptr: AtomicU64::new(checkpoint.lsn),
            next_batch: AtomicU64::new(u64::from(generation) << 32),
            bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            slots: staging::Slots::new(),
        });
        let thread_inner = inner.clone();
        let tail = end.tail;
        let writer = std::thread::Builder::new()
            .name("leankv-log".into())
            .spawn(move || thread_inner.write_loop(tail))
            .map_err(|e| Error::io("starting the log writer", e))?;
        Ok(Log {
            inner,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Appends records written by `write`, which also learns the image threshold (pages whose
    /// LSN is at or below it must be logged as images). Returns `write`'s result and the end
    /// LSN of what it appended. A batch's staged records are appended first (see `staging`).
    pub(crate) fn append<R>(&self, write: impl FnOnce(&mut FrameWriter<'_>, u64) -> R) -> (R, u64) {
        let mut state = self.lock_for_append();
        let result = self.inner.append_locked(&mut state, write);
        (result, state.end)
    }

    /// Logs a leaf record: `change` to a page whose last change ended at `page_lsn`, with the
    /// page's image (`fill` writes it, `page_size` bytes) if the page's last change lies at or
    /// before the image threshold, and changes the tree's key count `keys` as the operation
    /// does (see `begin_checkpoint`). A record of a batch whose thread holds a slot is staged
    /// if `may_stage` (see `staging`; the count changes at once); any other is encoded and
    /// checksummed before the mutex is taken, and under it only copied and given its position
    /// (the count changes under it).
    pub(crate) fn append_leaf(
        &self,
        change: LeafChange<'_>,
        page_lsn: u64,
        page_size: usize,
        fill: &mut FillImage<'_>,
        keys: &AtomicU64,
        may_stage: bool,
    ) -> Logged {
        if may_stage && change.batch != 0 {
            if let Some(staged) = self.stage_leaf(change, page_lsn, page_size, fill) {
                change.op.count_keys(keys);
                return staged;
            }
        }
        ENCODING.with(|encoding| {
            let mut encoding = encoding.borrow_mut();
            let Encoding { frame, scratch } = &mut *encoding;
            let mut encode = |with_image: bool, frame: &mut Vec<u8>| {
                frame.clear();
                let mut writer = FrameWriter::unplaced(frame, scratch);
                let image = with_image.then_some((page_size, &mut *fill));
                writer.leaf(change, image);
                writer.payload_checksum
            };
            let imaged = page_lsn <= self.inner.redo_ptr.load(Ordering::Acquire);
            let mut payload_checksum = encode(imaged, frame);
            let mut state = self.lock_for_append();
            if !imaged && page_lsn <= self.inner.redo_ptr.load(Ordering::Acquire) {
                // A checkpoint began meanwhile: the change must carry the page's image.
                payload_checksum = encode(true, frame);
            }
            self.inner
                .append_encoded(&mut state, frame, payload_checksum);
            change.op.count_keys(keys);
            Logged::Appended(state.end)
        })
    }

    /// A fresh batch id, unique across the lives of the database (the generation leads).
    pub(crate) fn next_batch(&self) -> u64 {
        self.inner.next_batch.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Makes the log durable up to `lsn` (group commit: one sync serves every waiter).
    pub(crate) fn wait_durable(&self, lsn: u64) -> Result<()> {
        if self.inner.durable.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let mut state = self.inner.state.lock();
        if state.requested < lsn {
            state.requested = lsn;
            self.inner.work.notify_one();
        }
        loop {
            if let Some(reason) = &state.failed {
                return Err(log_failed(reason));
            }
            if self.inner.durable.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            self.inner.progress.wait(&mut state);
        }
    }

    /// Asks for the log up to now to be synced within the configured delay. Fails if the log
    /// failed earlier (the commit can never become durable).
    pub(crate) fn sync_eventually(&self) -> Result<()> {
        // Fast path: a sync is already due for everything appended so far (the writer clears
        // `sync_armed` in the same critical section in which it takes the chunks it syncs).
        if self.inner.sync_armed.load(Ordering::Acquire) {
            return self.check_healthy();
        }
        let mut state = self.inner.state.lock();
        if let Some(reason) = &state.failed {
            return Err(log_failed(reason));
        }
        if state.eventual_deadline.is_none() {
            state.eventual_deadline = Some(Instant::now() + self.inner.config.eventual_delay);
            self.inner.sync_armed.store(true, Ordering::Release);
            self.inner.work.notify_one();
        }
        Ok(())
    }

    /// Fails the log (see the module notes) because an operation logged part of a change it
    /// could not finish: no later commit is acknowledged, so none can come to depend on a
    /// state that only recovery at the next open completes.
    pub(crate) fn fail(&self, reason: String) {
        self.inner.fail(&mut self.inner.state.lock(), reason);
    }

    /// Fails if the log failed earlier: a commit made now could never become durable.
    pub(crate) fn check_healthy(&self) -> Result<()> {
        if !self.inner.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match &self.inner.state.lock().failed {
            Some(reason) => Err(log_failed(reason)),
            None => Ok(()),
        }
    }

    /// How far the log is durable.
    pub(crate) fn durable(&self) -> u64 {
        self.inner.durable.load(Ordering::Acquire)
    }

    /// A large value has been written to the page file (not synced) and a record referencing
    /// it will follow: no log write after that record's append may reach the file before the
    /// page file is synced, or a crash could keep the reference and lose the value.
    pub(crate) fn data_written(&self) {
        self.inner.data_writes.fetch_add(1, Ordering::Release);
    }

    /// The current end of the log.
    pub(crate) fn end(&self) -> u64 {
        self.inner.state.lock().end
    }

    /// Begins a checkpoint: appends its record with the page count, the free list and the
    /// key counts `key_counts` takes (under the log's mutex, under which every leaf record
    /// appended directly changes them; staged records change them as they are staged, and no
    /// batch is open now: so they are exact at the record), in the other file if that holds
    /// nothing recovery could need. The caller holds the page-id lock, under which every
    /// `Free` record is appended, so the free list is exact at the record too. From now on a
    /// page changed for the first time logs an image. Returns where the record lies.
    pub(crate) fn begin_checkpoint(
        &self,
        page_count: u64,
        free: &[u64],
        key_counts: impl FnOnce() -> Vec<(u64, u64)>,
    ) -> LogPosition {
        let mut state = self.inner.state.lock();
        if state.checkpoint.file == state.file {
            state.file = 1 - state.file;
            state.file_offset = 0;
        }
        let position = LogPosition {
            file: state.file,
            offset: state.file_offset,
            lsn: state.end,
        };
        self.inner.redo_ptr.store(state.end, Ordering::Release);
        let key_counts = key_counts();
        self.inner.append_locked(&mut state, |writer, _| {
            writer.checkpoint(page_count, free, &key_counts)
        });
        position
    }

    /// Records that the checkpoint at `position` is complete (its pages and the superblock
    /// naming it are durable).
    pub(crate) fn checkpoint_completed(&self, position: LogPosition) {
        let mut state = self.inner.state.lock();
        state.checkpoint = position;
        state.checkpoint_failure = None;
        self.inner.update_throttle(&state);
        drop(state);
        self.inner.progress.notify_all();
    }

    /// Records why a background checkpoint failed (see `State::checkpoint_failure`); it is
    /// retried, and the next that succeeds clears it.
    pub(crate) fn checkpoint_failed(&self, reason: String) {
        self.inner.state.lock().checkpoint_failure = Some(reason);
        self.inner.progress.notify_all();
    }

    /// Whether enough log was written since the last checkpoint began to start another.
    pub(crate) fn wants_checkpoint(&self) -> bool {
        let state = self.inner.state.lock();
        state.end - self.inner.redo_ptr.load(Ordering::Acquire)
            >= self.inner.config.checkpoint_bytes
    }

    /// Waits (before a write latches anything) while the log is far beyond its checkpoint
    /// interval, so that checkpoints keep up and the log's disk use stays bounded, or while
    /// more log waits in memory than the writer has taken, so that its memory stays bounded.
    pub(crate) fn admit(&self) -> Result<()> {
        if !self.inner.throttled.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.inner.state.lock();
        while self.inner.must_wait(&state) && state.failed.is_none() && !state.shutdown {
            if let Some(reason) = &state.checkpoint_failure {
                return Err(Error::io(
                    "waiting for a checkpoint (the log is four checkpoint intervals ahead)",
                    std::io::Error::other(format!("the last checkpoint failed: {reason}")),
                ));
            }
            self.inner
                .progress
                .wait_for(&mut state, Duration::from_millis(10));
        }
        Ok(())
    }

    /// [`Self::admit`] for a change inside an open batch, which holds the batch gate and so
    /// must not wait for a checkpoint: waits only while more than `MAX_QUEUED_BYTES` wait
    /// for the writer (which needs no gate), so that the log's memory stays bounded.
    pub(crate) fn admit_in_batch(&self) {
        if !self.inner.throttled.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.inner.state.lock();
        while state.pending_bytes > MAX_QUEUED_BYTES && state.failed.is_none() && !state.shutdown {
            self.inner
                .progress
                .wait_for(&mut state, Duration::from_millis(10));
        }
    }

    pub(crate) fn counters(&self) -> LogCounters {
        LogCounters {
            bytes: self.inner.bytes.load(Ordering::Relaxed),
            syncs: self.inner.syncs.load(Ordering::Relaxed),
        }
    }

    /// Shrinks both log files to what the next life will overwrite first (see
    /// [`RETAINED_LOG_BYTES`]), releasing the rest of their space, once the log is shut down
    /// and a clean superblock (which names no checkpoint, so that no open reads this log
    /// again) is durable.
    pub(crate) fn shrink_files(&self) -> Result<()> {
        debug_assert!(self.writer.lock().is_none(), "the log is shut down");
        let retained = RETAINED_LOG_BYTES.min(self.inner.config.checkpoint_bytes);
        for file in &self.inner.files {
            file.shrink_to(retained).map_err(|e| {
                Error::io(
                    "shrinking the log files (the database itself closed cleanly)",
                    e,
                )
            })?;
        }
        Ok(())
    }

    /// Writes and syncs everything appended, then stops the writer thread.
    pub(crate) fn shut_down(&self) -> Result<()> {
        let end = self.end();
        let synced = self.wait_durable(end);
        let mut state = self.inner.state.lock();
        state.shutdown = true;
        drop(state);
        self.inner.work.notify_all();
        if let Some(writer) = self.writer.lock().take() {
            let _ = writer.join();
        }
        synced
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

fn log_failed(reason: &str) -> Error {
    Error::io(
        "writing the log",
        std::io::Error::other(format!("the log failed earlier: {reason}")),
    )
}

impl Inner {
    /// Fails the log: nothing more can be made durable; waiters see the failure.
    fn fail(&self, state: &mut State, reason: String) {
        state.failed.get_or_insert(reason);
        self.failed.store(true, Ordering::Release);
        state.requested = 0;
        state.eventual_deadline = None;
        self.progress.notify_all();
    }

    fn append_locked<R>(
        &self,
        state: &mut State,
        write: impl FnOnce(&mut FrameWriter<'_>, u64) -> R,
    ) -> R {
        // A new chunk for a new file, and once the open one holds the write-ahead amount
        // (what wakes the writer): a chunk grown past its capacity was reallocated under this
        // mutex, its megabytes copied into fresh memory (page faults) while the other
        // appenders parked (YCSB A with the log, 2 threads: nearly all of a worker's page
        // faults, whenever the writer fell behind).
        if state
            .open
            .as_ref()
            .is_none_or(|open| open.file != state.file || open.records().len() >= WRITE_AHEAD_BYTES)
        {
            let bytes = state
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK_CAPACITY));
            let chunk = Chunk::new(state.file, state.file_offset, state.end, bytes);
            if let Some(earlier) = state.open.replace(chunk) {
                state.sealed.push(earlier);
            }
        }
        let State {
            open,
            generation,
            scratch,
            ..
        } = state;
        let chunk = open.as_mut().expect("opened above");
        let before = chunk.bytes.len();
        let mut writer = FrameWriter {
            out: &mut chunk.bytes,
            base: chunk.start_lsn,
            lead: chunk.lead,
            generation: *generation,
            scratch,
            payload_checksum: 0,
            placed: true,
        };
        let result = write(&mut writer, self.redo_ptr.load(Ordering::Acquire));
        let added = chunk.bytes.len() - before;
        // The next appends' lines, fetched now: stores to lines not in the cache made the
        // mutex's release wait for them (a locked instruction drains the store buffer), ~4%
        // of a YCSB A worker's time.
        let ahead = chunk.bytes.spare_capacity_mut();
        prefetch_for_write(&ahead[..ahead.len().min(PREFETCH_AHEAD)]);
        state.end += added as u64;
        state.file_offset += added as u64;
        state.pending_bytes += added;
        if !self.throttled.load(Ordering::Relaxed) && self.must_wait(state) {
            self.update_throttle(state);
        }
        if state.pending_bytes >= WRITE_AHEAD_BYTES {
            self.work.notify_one();
        }
        result
    }

    /// Whether writes must wait in `admit`: the log is more than four checkpoint intervals
    /// beyond the last completed checkpoint, or more than `MAX_QUEUED_BYTES` wait for the
    /// writer.
    fn must_wait(&self, state: &State) -> bool {
        state.end.saturating_sub(state.checkpoint.lsn) > 4 * self.config.checkpoint_bytes
            || state.pending_bytes > MAX_QUEUED_BYTES
    }

    fn update_throttle(&self, state: &State) {
        self.throttled
            .store(self.must_wait(state), Ordering::Release);
    }

    /// Appends `frame`, encoded at position 0 of generation 0 with payload checksum
    /// `payload_checksum`, stamping its real position and generation.
    fn append_encoded(&self, state: &mut State, frame: &[u8], payload_checksum: u32) {
        let generation = state.generation;
        let (header, payload) = frame.split_at(FRAME_HEADER);
        let mut header: [u8; FRAME_HEADER] = header.try_into().expect("a whole frame");
        self.append_locked(state, |writer, _| {
            let lsn = writer.position();
            // Stamped on the stack, not in the chunk: reading back bytes just copied into
            // the chunk's cold cache lines stalled every append under the mutex.
            stamp(&mut header, lsn, generation, payload_checksum);
            writer.out.extend_from_slice(&header);
            writer.out.extend_from_slice(payload);
        });
    }
}
