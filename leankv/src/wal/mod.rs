//! The write-ahead log: every change that can reach the page file is described here first.
//!
//! Appending reserves the encoded record's range of the open in-memory chunk without a lock
//! (`sync::append_ring`: a compare-and-swap on one word), copies the record there and returns
//! its end position (its LSN). The log's mutex is taken only to open the next chunk (the open
//! one is full), for records whose encoding needs the log held still (structure records,
//! checkpoints: no checkpoint begins while it is held), and by the writer thread. With a mutex
//! for every append, an appender preempted while holding it (two workers and the background
//! threads on two cores) left the other worker parked until it ran again: a third of the CPU
//! idle in YCSB A at 2 threads with the log; now the others reserve past it, and only whoever
//! takes its chunk waits for its copy. A single operation's small record goes to its thread's
//! region of the open chunk instead (see `sync::append_ring`'s regions and
//! [`Log::append_leaf`]): the shared word and the chunk's lines then move between cores once
//! per region, not once per record; waiting for a sealed chunk to fill closes its regions and
//! pads their rest. Since records of one chunk then lie in no order of completion, the writer
//! seals each write's last chunk with its sync mark in one exchange, and recovery keeps whole
//! writes only (see `reader`).
//!
//! The writer thread seals the open chunk, waits for its reserved ranges to be filled, writes
//! the chunks to the log file and syncs when a commit waits for durability (`Immediate`, group
//! commit: every commit that arrived meanwhile shares the sync), when the `Eventual` delay is
//! up, when a page write needs its records durable first (the WAL rule) or at shutdown. Between
//! syncs it writes each full chunk (1 MiB) without syncing, and frees each chunk once written
//! (its buffer kept for reuse while bursts of that size recur, see [`SpareChunks`]);
//! writes wait while more than the log buffer (`LogConfig::buffer_bytes`) waits unwritten (a
//! device slower than the appends), and an append waits for a free chunk, so memory stays
//! bounded under any durability.
//!
//! A chunk is tagged with the image threshold in force when it opened (it changes only at a
//! checkpoint's start, while none is open): a leaf record encoded without its page's image
//! under an older threshold is refused by a newer chunk and encoded again.
//!
//! The log lives in two files used in turn: a checkpoint starts the other file (from offset 0)
//! when the last completed checkpoint started in the current one, so the file being overwritten
//! never holds records recovery could still need; otherwise the checkpoint record goes on in
//! the current file. Log disk use is thus bounded by two checkpoint intervals (plus the zeros
//! the writer keeps ahead of the end of the file it writes, so that syncs need no file-system
//! metadata; see `writer`).
//!
//! Writes are whole blocks of [`LOG_BLOCK`] bytes: the last, partial block is written again,
//! with the same leading bytes, by the next write. A torn write therefore leaves each sector of
//! it holding either the old bytes (whose records were synced, or are lost unsynced) or the new
//! ones, and a rewritten sector's leading bytes are the same in both.
//!
//! Invariants: `durable <= written <= end`; a page image whose LSN is above `durable` is never
//! written (callers wait with [`Log::wait_durable`]); a chunk is written only once every range
//! reserved in it is filled, and a checkpoint record is appended only once every record
//! before it is (with its key count change); a failed write or sync (or a panic of the writer
//! thread, or of an appender between reserving and filling) poisons the log: every later wait
//! fails, so no page reaches the disk ahead of records that may be lost, and no commit waits
//! for a sync that will not come.

mod chunks;
mod decode;
mod group;
mod patch;
mod reader;
pub(crate) mod record;
mod staging;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use decode::Outline;
pub(crate) use patch::ChangedRanges;
#[cfg(test)]
pub(crate) use reader::records_from;
pub(crate) use reader::{read_log, reread_log, LogEnd, LogEnding, LogScan};
pub(crate) use record::{
    Before, BeforeRef, FillImage, FrameWriter, LeafChange, LeafOp, RangeRemoval, RangeStep, Record,
    Split,
};
pub(crate) use staging::{Logged, StagingSlot};
use writer::Zeroed;
pub(crate) use writer::{zeroed_ahead, Tail};

use chunks::{Appender, Chunk, SpareChunks};
use record::FRAME_HEADER;

use crate::error::{Error, Result};
use crate::io::Storage;
use crate::key_count::KeyStripe;
use crate::sync::append_ring::{AppendRing, Padding, RingControl, MAX_PLACE};
use crate::sync::Event;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// LSNs beyond this come only from damaged files (at 1 GB/s of log it takes 146 years).
pub(crate) const MAX_LSN: u64 = 1 << 62;

/// A chunk holds this many bytes (more only for a larger record): once the next record does
/// not fit, it is sealed and the writer woken, which writes (without syncing) what waits.
const WRITE_AHEAD_BYTES: usize = 1 << 20;
/// The largest log buffer (`LogConfig::buffer_bytes`): its chunk ring must fit the slots an
/// [`AppendRing`] can address (see [`chunk_slots`]).
pub(crate) const MAX_LOG_BUFFER: usize = 512 << 20;
/// Log writes start and end at multiples of this, the block size of common file systems (ext4,
/// XFS) and SSDs: ext4 serves a direct write that extends a file from inside a block at ~100
/// MiB/s here (9 ms per MiB: it zeroes the block's rest and waits for the write under the
/// inode's lock), against ~1.7 GiB/s for whole blocks. Writes of whole 512-byte sectors held
/// the log writer to that rate, and `Eventual` writers waited for it whenever page images came
/// in bursts.
pub(crate) const LOG_BLOCK: usize = 4096;
/// Chunk buffers kept for reuse beyond those in use, at least (see [`SpareChunks`]).
const SPARE_CHUNKS: usize = 4;
/// A peak of chunks in use not reached again for this long is halved (see [`SpareChunks`]).
const SPARE_DECAY: Duration = Duration::from_secs(10);

/// Chunks (open, sealed, being written) for a log buffer of `buffer_bytes`: twice its full
/// chunks, as chunks sealed early by syncs hold less; an append that finds none free waits for
/// the writer.
const fn chunk_slots(buffer_bytes: usize) -> usize {
    2 * buffer_bytes.div_ceil(WRITE_AHEAD_BYTES) + 16
}
const _: () = assert!(chunk_slots(MAX_LOG_BUFFER) <= crate::sync::append_ring::MAX_SLOTS);

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
    /// Writes wait in `admit` while more log bytes than this are appended but not yet written
    /// (the device is slower than the appends): the log's memory stays bounded.
    pub(crate) buffer_bytes: usize,
    /// How far ahead of the log's end its writer keeps a growing file's blocks written with
    /// zeros (0: none; see [`zeroed_ahead`]).
    pub(crate) zeroed_ahead: u64,
    /// Whether single operations' records go to their thread's region of the open chunk
    /// (see [`Log::append_leaf`]): not where they wait for a sync each (`Immediate`), which
    /// would pad every thread's region at every sync.
    pub(crate) thread_regions: bool,
}

/// Log activity, for `Stats`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogCounters {
    pub(crate) bytes: u64,
    pub(crate) syncs: u64,
    /// Of the bytes appended, those that pad threads' regions (see `sync::append_ring`).
    pub(crate) padding: u64,
}

/// A thread's buffers for encoding a leaf record before it is appended.
#[derive(Default)]
struct Encoding {
    frame: Vec<u8>,
    scratch: Vec<u8>,
}

thread_local! {
    static ENCODING: std::cell::RefCell<Encoding> = std::cell::RefCell::default();
}

struct State {
    /// Opens, seals and frees the chunks of `Inner::chunks`.
    control: RingControl,
    /// How many freed chunks keep their buffers.
    spares: SpareChunks,
    /// Sealed chunks not yet taken by the writer, in log order.
    sealed: Vec<Chunk>,
    /// Bytes of the chunks in `sealed`.
    pending_bytes: usize,
    /// Bytes of the chunks the writer took and has not yet written.
    writing_bytes: usize,
    /// The end of the sealed chunks (the open chunk's start): its LSN, and where it lands.
    end: u64,
    file: usize,
    file_offset: u64,
    /// File of the last completed checkpoint, and its LSN.
    checkpoint: LogPosition,
    requested: u64,
    eventual_deadline: Option<Instant>,
    failed: Option<String>,
    /// Why the last checkpoint failed, until one succeeds: writes that would wait for a
    /// checkpoint fail with it instead of waiting for one that may never come.
    checkpoint_failure: Option<String>,
    shutdown: bool,
    /// Where records appended under the mutex are encoded, and their page images assembled
    /// (see `FrameWriter::scratch`).
    frames: Vec<u8>,
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
    /// This life's generation, stamped into every frame.
    generation: u32,
    /// The chunks appends reserve their ranges in (see the module notes).
    chunks: AppendRing,
    state: Mutex<State>,
    /// Wakes the writer thread.
    work: Condvar,
    /// Wakes threads waiting for durability, for a checkpoint or for a free chunk.
    progress: Condvar,
    /// Occurs when the writer finds a checkpoint due (see [`Log::checkpoint_due`]).
    checkpoint_due: Arc<Event>,
    durable: AtomicU64,
    /// Set while an `Eventual` sync is due (`State::eventual_deadline` is set).
    sync_armed: AtomicBool,
    /// Set once `State::failed` is.
    failed: AtomicBool,
    /// Pages whose last change ends at or before this LSN log an image at their next change.
    /// Changed under the state's mutex, at checkpoints, while no chunk is open (each chunk is
    /// tagged with the value in force when it opened); read before a record is encoded.
    redo_ptr: AtomicU64,
    /// Set while writes must wait (see `Inner::must_wait`; `admit` runs before every write and
    /// reads only this; it changes rarely).
    throttled: AtomicBool,
    /// Taken by every batch: on cache lines of its own, away from what every record reads
    /// (`redo_ptr`, `throttled`, the slots' address).
    next_batch: CachePadded<AtomicU64>,
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
        let padding = Padding {
            min: FRAME_HEADER,
            write: Box::new(move |bytes, lsn| record::pad(bytes, lsn, generation)),
        };
        let (chunks, control) = AppendRing::new(chunk_slots(config.buffer_bytes), padding);
        let inner = Arc::new(Inner {
            files,
            data_file,
            data_writes: AtomicU64::new(0),
            data_synced: AtomicU64::new(0),
            config,
            generation,
            chunks,
            state: Mutex::new(State {
                control,
                spares: SpareChunks::new(Instant::now()),
                sealed: Vec::new(),
                pending_bytes: 0,
                writing_bytes: 0,
                end: end.lsn,
                file: end.file,
                file_offset: end.offset,
                checkpoint,
                requested: 0,
                eventual_deadline: None,
                failed: None,
                checkpoint_failure: None,
                shutdown: false,
                frames: Vec::new(),
                scratch: Vec::new(),
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            checkpoint_due: Arc::default(),
            durable: AtomicU64::new(end.lsn),
            sync_armed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            throttled: AtomicBool::new(false),
            redo_ptr: AtomicU64::new(checkpoint.lsn),
            next_batch: CachePadded::new(AtomicU64::new(u64::from(generation) << 32)),
            bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            slots: staging::Slots::new(),
        });
        let thread_inner = inner.clone();
        let tail = end.tail;
        let zeroed = Zeroed::new(&inner.files, config.zeroed_ahead);
        let writer = std::thread::Builder::new()
            .name("leankv-log".into())
            .spawn(move || thread_inner.write_loop(tail, zeroed))
            .map_err(|e| Error::io("starting the log writer", e))?;
        Ok(Log {
            inner,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Appends records written by `write`, which also learns the image threshold (pages whose
    /// LSN is at or below it must be logged as images), under the log's mutex (no checkpoint
    /// begins meanwhile). Returns `write`'s result and the end LSN of what it appended. A
    /// batch's staged records are appended first (see `staging`).
    pub(crate) fn append<R>(&self, write: impl FnOnce(&mut FrameWriter<'_>, u64) -> R) -> (R, u64) {
        self.publish_held();
        let mut state = self.inner.state.lock();
        self.inner
            .append_locked(&mut state, Appender::Thread, write)
    }

    /// Appends batch `batch`'s commit record, after its staged records (in their group if
    /// some are staged still), without the log's mutex; returns its end LSN.
    pub(crate) fn commit(&self, batch: u64) -> u64 {
        if let Some(end) = self.publish_held_with_commit(batch) {
            return end;
        }
        ENCODING.with(|encoding| {
            let Encoding { frame, scratch } = &mut *encoding.borrow_mut();
            frame.clear();
            FrameWriter::new(frame, scratch).commit(batch);
            self.inner
                .append_frames(frame, None, || {})
                .expect("appended whatever the image threshold")
        })
    }

    /// Logs a leaf record: `change` to a page whose last change ended at `page_lsn`, with the
    /// page's image (`fill` writes it, `page_size` bytes) if the page's last change lies at or
    /// before the image threshold, and counts the key the operation adds or removes in `count`,
    /// this thread's stripe of the tree's key count (see `begin_checkpoint`). If `may_defer`
    /// (the record need not lie at the log's end: it changes no allocation), a record of a
    /// batch whose thread holds a slot is staged (see `staging`; the count changes at once),
    /// and a small one of a single operation goes to its thread's region of the open chunk
    /// if the page's LSN is its last record's end (not a staged record's stand-in) and lies
    /// before the region's next place: recovery replays a page's records in log order. Any
    /// other is encoded and checksummed, then appended without the log's mutex, the count
    /// changed once its place is reserved.
    pub(crate) fn append_leaf(
        &self,
        change: LeafChange<'_>,
        page_lsn: u64,
        page_size: usize,
        fill: &mut FillImage<'_>,
        count: &KeyStripe,
        may_defer: bool,
    ) -> Logged {
        if may_defer && change.batch != 0 {
            if let Some(staged) = self.stage_leaf(change, page_lsn, page_size, fill) {
                change.op.count_keys(count);
                return staged;
            }
        }
        self.publish_held();
        let in_region = may_defer
            && change.batch == 0
            && self.inner.config.thread_regions
            && staging::is_record_end(page_lsn);
        ENCODING.with(|encoding| {
            let mut encoding = encoding.borrow_mut();
            let Encoding { frame, scratch } = &mut *encoding;
            let mut threshold = self.inner.redo_ptr.load(Ordering::Acquire);
            loop {
                let imaged = page_lsn <= threshold;
                frame.clear();
                let image = imaged.then_some((page_size, &mut *fill));
                FrameWriter::new(frame, scratch).leaf(change, image);
                // A record without an image is valid only before the next checkpoint.
                let tag = (!imaged).then_some(threshold);
                let before_fill = || change.op.count_keys(count);
                let appended = if in_region && frame.len() <= MAX_PLACE {
                    self.inner
                        .append_in_region(frame, tag, page_lsn, before_fill)
                } else {
                    self.inner.append_frames(frame, tag, before_fill)
                };
                match appended {
                    Ok(end) => return Logged::Appended(end),
                    // A checkpoint began meanwhile: the change may need the page's image.
                    Err(newer) => threshold = newer,
                }
            }
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
        self.inner.end(&self.inner.state.lock())
    }

    /// Begins a checkpoint: appends its record with the page count, the free list and the
    /// key counts `key_counts` takes (once the open chunk is sealed and every record reserved
    /// before is filled: a leaf record appended directly changes them between reserving its
    /// place and filling it; staged records change them as they are staged, and no batch is
    /// open now: so they are exact at the record), in the other file if that holds
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
        // Every record appended before this one is in place, with its key count change (an
        // appender changes it between reserving its place and filling it).
        self.inner.seal_open(&mut state);
        state.control.wait_all_filled(&self.inner.chunks);
        if state.checkpoint.file == state.file {
            state.file = 1 - state.file;
            state.file_offset = 0;
        }
        let position = LogPosition {
            file: state.file,
            offset: state.file_offset,
            lsn: state.end,
        };
        // No chunk is open: the next opens with the new threshold (see `Inner::redo_ptr`).
        self.inner.redo_ptr.store(state.end, Ordering::Release);
        let key_counts = key_counts();
        self.inner
            .append_locked(&mut state, Appender::Thread, |writer, _| {
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
        self.inner.wants_checkpoint(&self.inner.state.lock())
    }

    /// What the checkpoint thread sleeps on: an occurrence each time the writer, after writing
    /// (at least every [`WRITE_AHEAD_BYTES`] of log), finds a checkpoint due. Nothing else
    /// makes the log grow, so an idle database's checkpoint thread never wakes.
    pub(crate) fn checkpoint_due(&self) -> Arc<Event> {
        self.inner.checkpoint_due.clone()
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
    /// must not wait for a checkpoint: waits only while more than the log buffer waits
    /// unwritten (the writer needs no gate), so that the log's memory stays bounded.
    pub(crate) fn admit_in_batch(&self) {
        if !self.inner.throttled.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.inner.state.lock();
        while self.inner.buffer_full(&state) && state.failed.is_none() && !state.shutdown {
            self.inner
                .progress
                .wait_for(&mut state, Duration::from_millis(10));
        }
    }

    pub(crate) fn counters(&self) -> LogCounters {
        LogCounters {
            bytes: self.inner.bytes.load(Ordering::Relaxed),
            syncs: self.inner.syncs.load(Ordering::Relaxed),
            padding: self.inner.chunks.padded_bytes(),
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

    /// See [`Log::wants_checkpoint`]; the mutex held as `state` throughout: a checkpoint
    /// beginning between reading the end and the threshold would put the threshold past the
    /// end read.
    fn wants_checkpoint(&self, state: &State) -> bool {
        let end = self.end(state);
        end - self.redo_ptr.load(Ordering::Acquire) >= self.config.checkpoint_bytes
    }

    /// Whether writes must wait in `admit`: the log is more than four checkpoint intervals
    /// beyond the last completed checkpoint, or the log buffer is full.
    fn must_wait(&self, state: &State) -> bool {
        state.end.saturating_sub(state.checkpoint.lsn) > 4 * self.config.checkpoint_bytes
            || self.buffer_full(state)
    }

    /// Whether more than the log buffer waits unwritten (sealed, or taken by the writer).
    fn buffer_full(&self, state: &State) -> bool {
        state.pending_bytes + state.writing_bytes > self.config.buffer_bytes
    }

    fn update_throttle(&self, state: &State) {
        self.throttled
            .store(self.must_wait(state), Ordering::Release);
    }
}
