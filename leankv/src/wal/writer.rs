//! The log thread: closes rounds, merges the stripes' records of each by GSN into the log
//! stream, places and writes them, and syncs (see the module notes of `wal`).
//!
//! Invariant: the frames of a round are written in GSN order, after every earlier round's and
//! followed by a sync mark; `durable_round` moves to a round only once it and every round before
//! it are written and synced.

use super::record::KIND_OFFSET;
use super::record::{place, unplaced_frame, FrameWriter, FRAME_HEADER, KIND_CHECKPOINT};
use super::{Inner, LogEnd, LogPosition, State, WRITE_AHEAD_BYTES};
use crate::io::{AlignedBuf, IO_ALIGNMENT};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Output buffers kept for reuse, and the largest kept (a backlog's round can be far larger).
const SPARE_BUFFERS: usize = 8;
const MAX_SPARE_CAPACITY: usize = 8 << 20;

/// The writer thread's knowledge of the partial sector at the end of a file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    pub(crate) file: usize,
    /// Offset of the partial sector, and its bytes so far.
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
}

/// Placed frames of one file, laid out to be written in place: `bytes[lead..]` are the frames,
/// from file offset `offset`, and the `lead` bytes before them leave room for the file's
/// partial sector (written again) such that the write starts on an [`IO_ALIGNMENT`] boundary
/// in memory, as direct I/O needs.
pub(super) struct Chunk {
    file: usize,
    offset: u64,
    lead: usize,
    pub(super) bytes: Vec<u8>,
}

impl Chunk {
    /// A chunk starting at `offset` of `file` in `bytes` (emptied), with room for `len` bytes
    /// of frames written in place.
    pub(super) fn new(file: usize, offset: u64, mut bytes: Vec<u8>, len: usize) -> Chunk {
        bytes.clear();
        bytes.reserve(len + 3 * IO_ALIGNMENT);
        let in_sector = (offset % IO_ALIGNMENT as u64) as usize;
        let to_boundary = bytes.as_ptr() as usize % IO_ALIGNMENT;
        let lead = in_sector + (IO_ALIGNMENT - to_boundary) % IO_ALIGNMENT;
        bytes.resize(lead, 0);
        Chunk {
            file,
            offset,
            lead,
            bytes,
        }
    }

    fn records(&self) -> &[u8] {
        &self.bytes[self.lead..]
    }
}

/// Where the log stream goes on: the writer thread's own.
struct Cursor {
    file: usize,
    offset: u64,
    lsn: u64,
    /// The LSN the log is durable up to.
    durable: u64,
}

/// Fails the log if the writer thread unwinds (a bug), so that committers get an error
/// instead of waiting for a sync that would never come.
struct FailOnPanic<'a>(&'a Inner);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Unwinding dropped the writer's guard of `state` already (declared later).
            let reason = "the log writer panicked".to_string();
            self.0.fail(&mut self.0.state.lock(), reason);
        }
    }
}

impl Inner {
    pub(super) fn write_loop(&self, end: LogEnd) {
        let _fail_on_panic = FailOnPanic(self);
        let mut cursor = Cursor {
            file: end.file,
            offset: end.offset,
            lsn: end.lsn,
            durable: end.lsn,
        };
        let mut tail = end.tail;
        // Files written since their last sync.
        let mut unsynced = [false; 2];
        // The sector-aligned copy of what is written, when a chunk cannot be written in place.
        let mut buffer = AlignedBuf::new(0);
        let mut taken = Vec::new();
        let mut spares: Vec<Vec<u8>> = Vec::new();
        let mut state = self.state.lock();
        loop {
            if state.failed.is_some() {
                // A failed log writes nothing more: what it would write follows records that
                // may be lost. Appends after the failure are dropped; waiters see the failure.
                let round = self.stripes.close_round();
                MutexGuard::unlocked(&mut state, || {
                    self.stripes.collect(round, &mut taken, &mut spares);
                });
                taken.clear();
                self.update_throttle(&state);
                self.progress.notify_all();
                if state.shutdown {
                    self.stop(&mut state);
                    return;
                }
                self.work.wait(&mut state);
                continue;
            }
            let now = Instant::now();
            let due = state.eventual_deadline.is_some_and(|at| at <= now);
            let wanted = state.requested > self.durable_round.load(Ordering::Acquire);
            let sync = due || wanted || state.shutdown;
            if !sync && self.stripes.queued() < WRITE_AHEAD_BYTES {
                match state.eventual_deadline {
                    Some(at) => {
                        self.work
                            .wait_for(&mut state, at.saturating_duration_since(now));
                    }
                    None => self.work.wait(&mut state),
                }
                continue;
            }
            if sync {
                // Cleared before the round closes: an `Eventual` commit of a later round sees
                // it cleared and asks for a sync of its own.
                state.eventual_deadline = None;
                self.sync_armed.store(false, Ordering::SeqCst);
            }
            let round = self.stripes.close_round();
            // Read with the round closed under the state's mutex: a checkpoint record of this
            // round began after the previous checkpoint's completion was recorded.
            let checkpoint_file = state.checkpoint.file;
            drop(state);
            self.stripes.collect(round, &mut taken, &mut spares);
            let appended = taken.iter().any(|records| !records.is_empty());
            let mut placed_checkpoint = None;
            let mut chunks = Vec::new();
            if appended {
                placed_checkpoint = self.place_round(
                    &mut taken,
                    &mut cursor,
                    checkpoint_file,
                    &mut chunks,
                    &mut spares,
                );
            }
            spares.extend(taken.drain(..).map(|mut records| {
                records.clear();
                records
            }));
            // Every large value a record of this round references was written before the
            // record was appended, so before the round was collected: sync them first.
            let outcome = self.sync_data().and_then(|()| {
                self.write_chunks(&mut chunks, &mut buffer, &mut tail, &mut unsynced, sync)
            });
            spares.extend(chunks.into_iter().map(|chunk| {
                let mut bytes = chunk.bytes;
                bytes.clear();
                bytes
            }));
            spares.retain(|spare| spare.capacity() <= MAX_SPARE_CAPACITY);
            spares.truncate(SPARE_BUFFERS);
            state = self.state.lock();
            state.placed_end = cursor.lsn;
            if let Some(placed) = placed_checkpoint {
                state.placed_checkpoint = Some(placed);
            }
            match outcome {
                Ok(()) if sync => {
                    cursor.durable = cursor.lsn;
                    self.durable_round.store(round, Ordering::Release);
                }
                Ok(()) => {}
                Err(error) => self.fail(&mut state, error.to_string()),
            }
            self.update_throttle(&state);
            self.progress.notify_all();
            if state.shutdown && !appended && sync {
                self.stop(&mut state);
                return;
            }
        }
    }

    /// Ends the writer thread's work: later waits for durability fail instead of waiting.
    fn stop(&self, state: &mut State) {
        state.stopped = true;
        self.progress.notify_all();
    }

    /// Merges the records in `taken` (each a stripe's, in GSN order) by GSN into `chunks`,
    /// placing each frame at `cursor`, and ends them with a sync mark. A checkpoint record
    /// starts the other file if the last completed checkpoint (`checkpoint_file`) is in the
    /// current one. Returns the checkpoint record placed, if any, by GSN.
    fn place_round(
        &self,
        taken: &mut [Vec<u8>],
        cursor: &mut Cursor,
        checkpoint_file: usize,
        chunks: &mut Vec<Chunk>,
        spares: &mut Vec<Vec<u8>>,
    ) -> Option<(u64, LogPosition)> {
        let mut mark = Vec::new();
        FrameWriter {
            out: &mut mark,
            gsn: 0,
            scratch: &mut Vec::new(),
        }
        .sync_mark(cursor.durable);
        let total = taken.iter().map(Vec::len).sum::<usize>() + mark.len();
        let mut chunk = Chunk::new(
            cursor.file,
            cursor.offset,
            spares.pop().unwrap_or_default(),
            total,
        );
        let mut placed_checkpoint = None;
        let mut next: Vec<usize> = vec![0; taken.len()];
        loop {
            // The stripe whose next frame has the smallest GSN (few stripes have records).
            let mut smallest: Option<(u64, usize)> = None;
            for (stripe, records) in taken.iter().enumerate() {
                if next[stripe] < records.len() {
                    let (_, gsn) = unplaced_frame(&records[next[stripe]..]);
                    if smallest.is_none_or(|(least, _)| gsn < least) {
                        smallest = Some((gsn, stripe));
                    }
                }
            }
            let Some((gsn, stripe)) = smallest else { break };
            let at = next[stripe];
            let (len, _) = unplaced_frame(&taken[stripe][at..]);
            let frame = &taken[stripe][at..at + len];
            next[stripe] += len;
            if frame[KIND_OFFSET] == KIND_CHECKPOINT {
                if checkpoint_file == cursor.file {
                    let fresh =
                        Chunk::new(1 - cursor.file, 0, spares.pop().unwrap_or_default(), total);
                    chunks.push(std::mem::replace(&mut chunk, fresh));
                    cursor.file = 1 - cursor.file;
                    cursor.offset = 0;
                }
                let position = LogPosition {
                    file: cursor.file,
                    offset: cursor.offset,
                    lsn: cursor.lsn,
                };
                placed_checkpoint = Some((gsn, position));
            }
            self.place_frame(&mut chunk, frame, cursor);
        }
        self.place_frame(&mut chunk, &mark, cursor);
        chunks.push(chunk);
        placed_checkpoint
    }

    /// Copies the unplaced `frame` to the end of `chunk` and places it at `cursor`.
    fn place_frame(&self, chunk: &mut Chunk, frame: &[u8], cursor: &mut Cursor) {
        let at = chunk.bytes.len();
        chunk.bytes.extend_from_slice(frame);
        place(
            &mut chunk.bytes[at..at + FRAME_HEADER],
            cursor.lsn,
            self.generation,
        );
        cursor.lsn += frame.len() as u64;
        cursor.offset += frame.len() as u64;
    }

    /// Syncs the page file if large values were written to it since its last sync here.
    fn sync_data(&self) -> std::io::Result<()> {
        let written = self.data_writes.load(Ordering::Acquire);
        if written > self.data_synced.load(Ordering::Relaxed) {
            self.data_file.sync()?;
            self.data_synced.store(written, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes `chunks` as whole sectors (the partial last sector of a file again, from
    /// `tail`), then syncs the files written if `sync`.
    pub(super) fn write_chunks(
        &self,
        chunks: &mut [Chunk],
        buffer: &mut AlignedBuf,
        tail: &mut Tail,
        unsynced: &mut [bool; 2],
        sync: bool,
    ) -> std::io::Result<()> {
        for chunk in chunks {
            let records = chunk.records().len();
            if records == 0 {
                continue;
            }
            let aligned = chunk.offset - chunk.offset % IO_ALIGNMENT as u64;
            let prefix: &[u8] = if tail.file == chunk.file && tail.offset == aligned {
                &tail.bytes
            } else {
                &[]
            };
            debug_assert_eq!(aligned + prefix.len() as u64, chunk.offset);
            let data_len = prefix.len() + records;
            let len = data_len.next_multiple_of(IO_ALIGNMENT);
            // In place when the chunk kept its buffer (one that outgrew its capacity was
            // moved) and has room for the padding; else through `buffer`.
            let start = chunk.lead - prefix.len();
            let in_place = (chunk.bytes.as_ptr() as usize + start).is_multiple_of(IO_ALIGNMENT)
                && chunk.bytes.capacity() >= start + len;
            let sectors: &mut [u8] = if in_place {
                chunk.bytes.resize(start + len, 0);
                &mut chunk.bytes[start..]
            } else {
                if buffer.len() < len {
                    *buffer = AlignedBuf::new(len.next_power_of_two());
                }
                let buffer = &mut buffer[..len];
                buffer[prefix.len()..data_len].copy_from_slice(chunk.records());
                buffer[data_len..].fill(0);
                buffer
            };
            sectors[..prefix.len()].copy_from_slice(prefix);
            debug_assert_eq!(sectors.as_ptr() as usize % IO_ALIGNMENT, 0);
            self.files[chunk.file].write_at(sectors, aligned)?;
            self.bytes.fetch_add(records as u64, Ordering::Relaxed);
            unsynced[chunk.file] = true;
            let end = chunk.offset + records as u64;
            let partial = (end % IO_ALIGNMENT as u64) as usize;
            let sector = end - partial as u64;
            *tail = Tail {
                file: chunk.file,
                offset: sector,
                bytes: sectors[data_len - partial..data_len].to_vec(),
            };
        }
        if sync {
            for (file, unsynced) in unsynced.iter_mut().enumerate() {
                if *unsynced {
                    self.files[file].sync()?;
                    self.syncs.fetch_add(1, Ordering::Relaxed);
                    *unsynced = false;
                }
            }
        }
        Ok(())
    }
}
