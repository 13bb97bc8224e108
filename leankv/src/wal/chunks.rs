//! The log's chunks from the appenders' side: reserving a record's place in the open chunk
//! without a lock (`sync::append_ring`), stamping and copying it there; opening the next chunk
//! (under the log's mutex) when the open one is full, waiting for the writer to free one when
//! none is free; sealing the open chunk for the writer, or discarding sealed ones once the log
//! failed. See the module notes of `wal` for why appends take no lock.

use super::record::{stamp_frames, FrameWriter};
use super::{Inner, State, LOG_BLOCK, SPARE_CHUNKS, SPARE_DECAY, WRITE_AHEAD_BYTES};
use crate::sync::append_ring::{AppendRing, Refused, Reservation, Sealed};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Who appends: the writer thread may open the last free chunk, which the others leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Appender {
    Thread,
    Writer,
}

/// A sealed chunk and where it goes: its records from offset `offset` of `file`. In its
/// buffer, the records begin at `offset`'s place in its [`LOG_BLOCK`], leaving room before
/// them for the rest of that block (written again: see the module notes of `wal`) such that
/// the write starts on a block boundary in memory too, as direct I/O needs. Copying
/// each megabyte chunk into an aligned buffer instead flushed the writer's core's cache (YCSB
/// A with the log, 2 threads on 2 cores: about 4% of throughput).
pub(super) struct Chunk {
    pub(super) file: usize,
    pub(super) offset: u64,
    pub(super) sealed: Sealed,
}

impl State {
    /// Whether a record lies in a chunk not yet taken by the writer.
    pub(super) fn holds_records(&self, chunks: &AppendRing) -> bool {
        !self.sealed.is_empty() || chunks.open_extent().is_some_and(|(_, len)| len > 0)
    }
}

impl Inner {
    /// The end of everything appended (reserved) so far.
    pub(super) fn end(&self, state: &State) -> u64 {
        match self.chunks.open_extent() {
            Some((start, reserved)) => start + reserved,
            None => state.end,
        }
    }

    /// Appends what `write` encodes (learning the image threshold, which cannot change while
    /// the mutex is held) with the mutex held; returns `write`'s result and the end LSN.
    pub(super) fn append_locked<R>(
        &self,
        state: &mut MutexGuard<'_, State>,
        appender: Appender,
        write: impl FnOnce(&mut FrameWriter<'_>, u64) -> R,
    ) -> (R, u64) {
        let mut frames = std::mem::take(&mut state.frames);
        frames.clear();
        let result = write(
            &mut FrameWriter::new(&mut frames, &mut state.scratch),
            self.redo_ptr.load(Ordering::Acquire),
        );
        let reservation = loop {
            if let Ok(reservation) = self.chunks.reserve(frames.len(), None) {
                break reservation;
            }
            if let Some(reservation) = self.open_chunk(state, frames.len(), None, appender) {
                break reservation;
            }
        };
        let start = reservation.position();
        stamp_frames(&mut frames, start, self.generation);
        reservation.fill(&frames);
        let end = start + frames.len() as u64;
        state.frames = frames;
        (result, end)
    }

    /// Appends `frames` (whole frames from a [`FrameWriter`]), stamped with their place,
    /// without the mutex unless a chunk must be opened; `before_fill` runs once their place
    /// is reserved, before they are copied in (a checkpoint beginning later waits for the
    /// copy, so sees what it did). If their encoding assumed image threshold `tag` and the
    /// open chunk has another (a checkpoint began), appends nothing and returns that one.
    pub(super) fn append_frames(
        &self,
        frames: &mut [u8],
        tag: Option<u64>,
        before_fill: impl FnOnce(),
    ) -> std::result::Result<u64, u64> {
        let reservation = loop {
            match self.chunks.reserve(frames.len(), tag) {
                Ok(reservation) => break reservation,
                Err(Refused::Tag(threshold)) => return Err(threshold),
                Err(Refused::Full) => {
                    let mut state = self.state.lock();
                    if let Some(reservation) =
                        self.open_chunk(&mut state, frames.len(), tag, Appender::Thread)
                    {
                        break reservation;
                    }
                }
            }
        };
        // A panic before the fill drops the reservation unfilled, which poisons its chunk: the
        // writer then fails the log rather than write stale bytes (see `write_chunks`).
        // Stamped here, not in the chunk: reading back bytes just copied into the chunk's cold
        // cache lines stalled every append.
        let start = reservation.position();
        stamp_frames(frames, start, self.generation);
        before_fill();
        reservation.fill(frames);
        Ok(start + frames.len() as u64)
    }

    /// [`Self::append_frames`] in this thread's region of the open chunk (see
    /// `sync::append_ring`'s regions), at or after `at_least`; where no region can take them
    /// (the chunk is full, or every region is taken), as `append_frames` does.
    pub(super) fn append_in_region(
        &self,
        frames: &mut [u8],
        tag: Option<u64>,
        at_least: u64,
        before_fill: impl FnOnce(),
    ) -> std::result::Result<u64, u64> {
        let place = match self
            .chunks
            .reserve_in_own_region(frames.len(), tag, at_least)
        {
            Ok(place) => place,
            Err(Refused::Tag(threshold)) => return Err(threshold),
            Err(Refused::Full) => return self.append_frames(frames, tag, before_fill),
        };
        let start = place.position();
        stamp_frames(frames, start, self.generation);
        before_fill();
        place.fill(frames);
        Ok(start + frames.len() as u64)
    }

    /// Makes room for a record of `len` bytes encoded under image threshold `tag` (if it
    /// matters): unless the open chunk has room (another thread opened one meanwhile), seals
    /// it and opens the next, whose first `len` bytes it returns reserved, made with the
    /// install so that nothing comes before the record (a checkpoint record must lie where its
    /// position says) and a full chunk cannot starve it; but none if the record was encoded
    /// under an older threshold (the caller's next reservation is refused and it encodes
    /// again). Waits for the writer to free a chunk if none is free; the last free one is the
    /// writer's alone (its sync mark must never wait for itself).
    fn open_chunk(
        &self,
        state: &mut MutexGuard<'_, State>,
        len: usize,
        tag: Option<u64>,
        appender: Appender,
    ) -> Option<Reservation<'_>> {
        self.open_chunk_of(state, len, tag, appender, false)
    }

    /// [`Self::open_chunk`]; if `sole`, the chunk holds the record alone (its limit is the
    /// record's length: nothing else can be reserved in it).
    fn open_chunk_of(
        &self,
        state: &mut MutexGuard<'_, State>,
        len: usize,
        tag: Option<u64>,
        appender: Appender,
        sole: bool,
    ) -> Option<Reservation<'_>> {
        if let Some((_, reserved)) = self.chunks.open_extent() {
            if reserved as usize + len <= WRITE_AHEAD_BYTES {
                return None;
            }
        }
        self.seal_open(state);
        let kept_back = usize::from(appender != Appender::Writer);
        while state.control.free_slots() <= kept_back {
            if state.shutdown && state.failed.is_none() {
                // Appends racing the close filled every chunk: none will be written.
                let reason = "records were appended after the log shut down".to_string();
                self.fail(state, reason);
            }
            if state.failed.is_some() {
                // The writer discards what a failed log appends; so may this thread.
                self.discard_sealed(state);
                if state.control.free_slots() > kept_back {
                    break;
                }
            }
            self.work.notify_one();
            self.progress.wait(state);
        }
        let in_block = (state.file_offset % LOG_BLOCK as u64) as usize;
        let limit = if sole {
            len
        } else {
            len.max(WRITE_AHEAD_BYTES)
        };
        let threshold = self.redo_ptr.load(Ordering::Acquire);
        let first = if tag.is_none_or(|tag| tag == threshold) {
            len
        } else {
            0
        };
        let (start, chunks) = (state.end, &self.chunks);
        let reservation = state
            .control
            .install(chunks, start, threshold, in_block, limit, LOG_BLOCK, first)
            .expect("a chunk is free");
        if first == 0 {
            reservation.fill(&[]);
            return None;
        }
        Some(reservation)
    }

    /// Seals the open chunk with the writer's sync mark `frames` as its last bytes, reserved in
    /// the same exchange that seals it, so that the write it ends has nothing after its mark
    /// (recovery keeps a write only up to its last intact mark, see `reader`); in a chunk of
    /// their own if they do not fit in the open one.
    pub(super) fn seal_with_mark(&self, state: &mut MutexGuard<'_, State>, frames: &mut [u8]) {
        if let Some((reservation, sealed)) =
            state.control.seal_with_trailer(&self.chunks, frames.len())
        {
            stamp_frames(frames, reservation.position(), self.generation);
            reservation.fill(frames);
            return self.queue_sealed(state, sealed);
        }
        self.seal_open(state);
        let reservation = self
            .open_chunk_of(state, frames.len(), None, Appender::Writer, true)
            .expect("an open chunk with the record reserved");
        stamp_frames(frames, reservation.position(), self.generation);
        reservation.fill(frames);
        self.seal_open(state);
    }

    /// Seals the open chunk, if any, and queues it for the writer (woken once a chunk's worth
    /// waits).
    pub(super) fn seal_open(&self, state: &mut State) {
        let Some(sealed) = state.control.seal(&self.chunks) else {
            return;
        };
        self.queue_sealed(state, sealed);
    }

    /// Queues a sealed chunk for the writer.
    fn queue_sealed(&self, state: &mut State, sealed: Sealed) {
        let len = sealed.len();
        state.sealed.push(Chunk {
            file: state.file,
            offset: state.file_offset,
            sealed,
        });
        state.end += len as u64;
        state.file_offset += len as u64;
        state.pending_bytes += len;
        if !self.throttled.load(Ordering::Relaxed) && self.must_wait(state) {
            self.update_throttle(state);
        }
        if state.pending_bytes >= WRITE_AHEAD_BYTES {
            self.work.notify_one();
        }
    }

    /// Drops the sealed chunks unwritten, once filled (a failed log writes nothing more).
    pub(super) fn discard_sealed(&self, state: &mut State) {
        for chunk in std::mem::take(&mut state.sealed) {
            self.free_chunk(state, chunk.sealed);
        }
        state.pending_bytes = 0;
    }

    /// Takes back a written (or discarded) chunk, keeping the buffers [`SpareChunks`] asks for.
    pub(super) fn free_chunk(&self, state: &mut State, sealed: Sealed) {
        let in_use = state.control.in_use(&self.chunks);
        let keep = state.spares.keep(in_use, Instant::now());
        state.control.free(&self.chunks, sealed, keep);
    }
}

/// How many freed chunk buffers the log keeps for reuse: as many as were in use at once
/// lately, at least [`SPARE_CHUNKS`]; a peak not reached again for [`SPARE_DECAY`] is halved
/// (not below what is in use). After each checkpoint begins, the first change of every page
/// logs its image, a burst that can fill the whole log buffer: with four buffers kept, those
/// freed after one burst were allocated, zeroed and faulted in again at the next, seconds
/// later (YCSB A with the log at 2 threads: ~0.6% of the CPU, bench/README `s54-*`). What a
/// one-off burst took goes back within about a minute of log writes after it (the buffers are
/// released as chunks are freed).
#[derive(Debug)]
pub(super) struct SpareChunks {
    peak: usize,
    since: Instant,
}

impl SpareChunks {
    pub(super) fn new(now: Instant) -> SpareChunks {
        SpareChunks {
            peak: 0,
            since: now,
        }
    }

    /// The buffers to keep as a chunk is freed at `now`, `in_use` chunks in use with it.
    pub(super) fn keep(&mut self, in_use: usize, now: Instant) -> usize {
        if in_use >= self.peak {
            (self.peak, self.since) = (in_use, now);
        } else if now.saturating_duration_since(self.since) >= SPARE_DECAY {
            (self.peak, self.since) = ((self.peak / 2).max(in_use), now);
        }
        self.peak.max(SPARE_CHUNKS)
    }
}
