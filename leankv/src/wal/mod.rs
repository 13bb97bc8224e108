//! The write-ahead log: every change that can reach the page file is described here first.
//!
//! Threads append records to stripes (`stripes`: one per few threads, so that concurrent
//! writers share no append point); a record gets a GSN there, which orders it after every
//! record it depends on (the pages it changes carry the GSN of their last change), and the
//! round it belongs to. The log thread (`writer`) works in rounds: it closes the current round,
//! collects every stripe's records of it, merges them by GSN into one stream, gives each frame
//! its position (LSN) and ends the round with a sync mark, writes it, and syncs when a commit
//! waits for durability (`Immediate`, group commit: every commit of the round shares the
//! sync), when the `Eventual` delay is up, when a page write needs its records durable first
//! (the WAL rule) or at shutdown. Between syncs it writes rounds ahead without syncing once a
//! megabyte waits; writes wait while more than `MAX_QUEUED_BYTES` of log wait for the writer
//! (a device slower than the appends), so memory stays bounded under any durability.
//!
//! Recovery keeps only whole rounds (up to the last intact sync mark): a round's records are
//! all there or all lost, so the log after a crash is a prefix of the rounds, and since a
//! commit that finished before another began has a round no later, a prefix of the commit
//! order. Within a round, GSN order replays each page's changes in the order they were made.
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
//! Invariants: a round is durable only after every earlier one; a page whose last change
//! belongs to a round that is not durable is never written (callers wait with
//! [`Log::wait_durable`] for the round their frame records); a failed write or sync (or a
//! panic of the writer thread) poisons the log: every later wait fails, so no page reaches the
//! disk ahead of records that may be lost, and no commit waits for a sync that will not come.

mod decode;
mod reader;
pub(crate) mod record;
mod stripes;
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
pub(crate) use stripes::Appended;
pub(crate) use writer::Tail;

use crate::error::{Error, Result};
use crate::io::Storage;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use stripes::Stripes;

/// LSNs and GSNs beyond this come only from damaged files (at 1 GB/s of log it takes 146
/// years).
pub(crate) const MAX_LSN: u64 = 1 << 62;

/// The writer writes (without syncing) once this many bytes wait, to bound memory.
const WRITE_AHEAD_BYTES: usize = 1 << 20;
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

/// A checkpoint begun: its record's GSN and round ([`Log::checkpoint_position`] finds where
/// the record was placed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckpointTicket {
    gsn: u64,
    round: u64,
}

struct State {
    /// The round the log must be durable up to (commits and page writes wait for it).
    requested: u64,
    eventual_deadline: Option<Instant>,
    failed: Option<String>,
    /// Why the last checkpoint failed, until one succeeds: writes that would wait for a
    /// checkpoint fail with it instead of waiting for one that may never come.
    checkpoint_failure: Option<String>,
    shutdown: bool,
    /// Set by the writer thread as it ends: nothing becomes durable any more.
    stopped: bool,
    /// The last completed checkpoint.
    checkpoint: LogPosition,
    /// The last checkpoint record placed, by GSN, and where.
    placed_checkpoint: Option<(u64, LogPosition)>,
    /// The LSN after the last frame placed.
    placed_end: u64,
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
    generation: u32,
    stripes: Stripes,
    state: Mutex<State>,
    /// Wakes the writer thread.
    work: Condvar,
    /// Wakes threads waiting for durability or for a checkpoint.
    progress: Condvar,
    /// Every round up to this one is durable.
    durable_round: AtomicU64,
    /// Set while an `Eventual` sync is due (`State::eventual_deadline` is set).
    sync_armed: AtomicBool,
    /// Set once `State::failed` is.
    failed: AtomicBool,
    /// Pages whose last change has a GSN at or below this log an image at their next change.
    /// Changed with every stripe locked, at checkpoints.
    redo_ptr: AtomicU64,
    /// Set while writes must wait (see `Inner::must_wait`; `admit` runs before every write and
    /// reads only this; it changes rarely).
    throttled: AtomicBool,
    next_batch: AtomicU64,
    bytes: AtomicU64,
    syncs: AtomicU64,
}

/// The log of one open database.
pub(crate) struct Log {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Log {
    /// Starts a log that continues at `end` (the end of what recovery read, in `end.file` at
    /// `end.offset`; its records' GSNs start after `end.gsn`) with a new `generation`;
    /// `checkpoint` is the last completed checkpoint.
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
            generation,
            stripes: Stripes::new(end.gsn),
            state: Mutex::new(State {
                requested: 0,
                eventual_deadline: None,
                failed: None,
                checkpoint_failure: None,
                shutdown: false,
                stopped: false,
                checkpoint,
                placed_checkpoint: None,
                placed_end: end.lsn,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            durable_round: AtomicU64::new(0),
            sync_armed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            throttled: AtomicBool::new(false),
            // Every page changed before this life's first checkpoint logs its image.
            redo_ptr: AtomicU64::new(end.gsn),
            next_batch: AtomicU64::new(u64::from(generation) << 32),
            bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        });
        let thread_inner = inner.clone();
        let writer = std::thread::Builder::new()
            .name("leankv-log".into())
            .spawn(move || thread_inner.write_loop(end))
            .map_err(|e| Error::io("starting the log writer", e))?;
        Ok(Log {
            inner,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Appends records written by `write`, which also learns the image threshold (pages whose
    /// GSN is at or below it must be logged as images), after every record with a GSN up to
    /// `after` (what they depend on: the GSNs of the pages they describe, and of the page-id
    /// allocation if they change it). Returns `write`'s result and what the append gave them.
    pub(crate) fn append<R>(
        &self,
        after: u64,
        write: impl FnOnce(&mut FrameWriter<'_>, u64) -> R,
    ) -> (R, Appended) {
        let (mut stripe, round) = self.inner.stripes.lock_mine();
        let threshold = self.inner.redo_ptr.load(Ordering::Acquire);
        let (result, gsn, report) = stripe.append(round, after, |writer| write(writer, threshold));
        drop(stripe);
        if let Some(bytes) = report {
            self.inner.reported(bytes);
        }
        (result, Appended { gsn, round })
    }

    /// Appends a leaf record: `change` to a page whose last change has GSN `page_gsn`, after
    /// every record up to `after` as well, with the page's image (`fill` writes it,
    /// `page_size` bytes) if the page's last change lies at or before the image threshold;
    /// the tree's key count `keys` changes as the operation does (see `begin_checkpoint`).
    pub(crate) fn append_leaf(
        &self,
        change: LeafChange<'_>,
        page_gsn: u64,
        after: u64,
        page_size: usize,
        fill: &mut FillImage<'_>,
        keys: &AtomicU64,
    ) -> Appended {
        let ((), appended) = self.append(page_gsn.max(after), |writer, threshold| {
            let image = (page_gsn <= threshold).then_some((page_size, fill));
            writer.leaf(change, image);
            change.op.count_keys(keys);
        });
        appended
    }

    /// A fresh batch id, unique across the lives of the database (the generation leads).
    pub(crate) fn next_batch(&self) -> u64 {
        self.inner.next_batch.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Makes the log durable up to round `round` (group commit: one sync serves every waiter).
    pub(crate) fn wait_durable(&self, round: u64) -> Result<()> {
        if self.inner.durable_round.load(Ordering::Acquire) >= round {
            return Ok(());
        }
        let mut state = self.inner.state.lock();
        if state.requested < round {
            state.requested = round;
            self.inner.work.notify_one();
        }
        loop {
            if let Some(reason) = &state.failed {
                return Err(log_failed(reason));
            }
            if self.inner.durable_round.load(Ordering::Acquire) >= round {
                return Ok(());
            }
            if state.stopped {
                return Err(Error::Closed);
            }
            self.inner.progress.wait(&mut state);
        }
    }

    /// Asks for the log up to now to be synced within the configured delay. Fails if the log
    /// failed earlier (the commit can never become durable).
    pub(crate) fn sync_eventually(&self) -> Result<()> {
        // Fast path: a sync is already due for everything appended so far (the writer clears
        // `sync_armed` before it closes the round it syncs, so a record of a later round sees
        // it cleared).
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

    /// Every round up to this one is durable.
    pub(crate) fn durable_round(&self) -> u64 {
        self.inner.durable_round.load(Ordering::Acquire)
    }

    /// The round records appended now belong to: once it is durable, so is everything
    /// appended before this call.
    pub(crate) fn current_round(&self) -> u64 {
        self.inner.stripes.round()
    }

    /// A large value has been written to the page file (not synced) and a record referencing
    /// it will follow: no log write after that record's append may reach the file before the
    /// page file is synced, or a crash could keep the reference and lose the value.
    pub(crate) fn data_written(&self) {
        self.inner.data_writes.fetch_add(1, Ordering::Release);
    }

    /// Where the next life's log may start, as LSN and as GSN: above every position and every
    /// GSN this log gave (after shutdown).
    pub(crate) fn next_start(&self) -> u64 {
        let clock = (self.inner.stripes.lock_all().iter())
            .map(|stripe| stripe.clock())
            .max()
            .unwrap_or(0);
        clock.max(self.inner.state.lock().placed_end)
    }

    /// Begins a checkpoint: with every stripe locked (no record is appended meanwhile),
    /// appends its record with the page count, the free list and the key counts `key_counts`
    /// takes (under the stripes' mutexes, under which every leaf record changes them, so they
    /// are exact at the record), with a GSN above every record before it and below every
    /// record after it. The caller holds the page-id lock, under which every `Free` record is
    /// appended, so the free list is exact at the record too; `ids_gsn` is the page-id
    /// allocation's GSN. From now on a page changed for the first time logs an image. The
    /// record goes at the start of the other file if that holds nothing recovery could need
    /// (see [`Self::checkpoint_position`]).
    pub(crate) fn begin_checkpoint(
        &self,
        page_count: u64,
        free: &[u64],
        ids_gsn: u64,
        key_counts: impl FnOnce() -> Vec<(u64, u64)>,
    ) -> CheckpointTicket {
        let stripes = &self.inner.stripes;
        let mut locked = stripes.lock_all();
        let round = stripes.round();
        let before = locked.iter().map(|stripe| stripe.clock()).max();
        let gsn = before.unwrap_or(0).max(ids_gsn) + 1;
        self.inner.redo_ptr.store(gsn, Ordering::Release);
        let key_counts = key_counts();
        let mine = stripes.my_index();
        let ((), appended, report) = locked[mine].append(round, gsn - 1, |writer| {
            writer.checkpoint(page_count, free, &key_counts)
        });
        debug_assert_eq!(appended, gsn);
        for stripe in &mut locked {
            stripe.advance_clock(gsn);
        }
        drop(locked);
        if let Some(bytes) = report {
            self.inner.reported(bytes);
        }
        CheckpointTicket { gsn, round }
    }

    /// Where the record of the checkpoint `ticket` lies, once it is durable.
    pub(crate) fn checkpoint_position(&self, ticket: CheckpointTicket) -> Result<LogPosition> {
        self.wait_durable(ticket.round)?;
        match self.inner.state.lock().placed_checkpoint {
            Some((gsn, position)) if gsn == ticket.gsn => Ok(position),
            _ => Err(log_failed(
                "the log thread did not place the checkpoint's record (a bug)",
            )),
        }
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
        let begun = state
            .placed_checkpoint
            .map_or(state.checkpoint.lsn, |(_, position)| position.lsn);
        state.placed_end.saturating_sub(begun) >= self.inner.config.checkpoint_bytes
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
            self.inner.work.notify_one();
            self.inner
                .progress
                .wait_for(&mut state, Duration::from_millis(10));
        }
        self.inner.update_throttle(&state);
        Ok(())
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

    /// Writes and syncs everything appended, then stops the writer thread (once: a second
    /// call only reports whether the log failed).
    pub(crate) fn shut_down(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        let Some(thread) = writer.take() else {
            return self.check_healthy();
        };
        let synced = self.wait_durable(self.current_round());
        self.inner.state.lock().shutdown = true;
        self.inner.work.notify_all();
        let _ = thread.join();
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

    /// A stripe reported `bytes` more appended: wakes the writer once a megabyte waits, and
    /// makes writes wait (in `admit`) beyond `MAX_QUEUED_BYTES`.
    fn reported(&self, bytes: usize) {
        let queued = self.stripes.report(bytes);
        if queued >= WRITE_AHEAD_BYTES {
            self.work.notify_one();
        }
        if queued > MAX_QUEUED_BYTES && !self.throttled.load(Ordering::Relaxed) {
            self.throttled.store(true, Ordering::Release);
        }
    }

    /// Whether writes must wait in `admit`: the log is more than four checkpoint intervals
    /// beyond the last completed checkpoint, or more than `MAX_QUEUED_BYTES` wait for the
    /// writer.
    fn must_wait(&self, state: &State) -> bool {
        state.placed_end.saturating_sub(state.checkpoint.lsn) > 4 * self.config.checkpoint_bytes
            || self.stripes.queued() > MAX_QUEUED_BYTES
    }

    fn update_throttle(&self, state: &State) {
        self.throttled
            .store(self.must_wait(state), Ordering::Release);
    }
}
