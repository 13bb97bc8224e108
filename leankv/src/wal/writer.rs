//! The log's writer thread: it seals the open chunk, takes the sealed ones, waits for their
//! reserved ranges to be filled, writes them as whole blocks (the
//! partial last block of a file again, from its [`Tail`]), freeing each as soon as it is
//! written (its bytes leave the log buffer), and syncs the files when a commit,
//! the `Eventual` delay, a page write (the WAL rule) or shutdown asks; between syncs it writes
//! ahead once 1 MiB waits. The page file is synced first when a record in the chunks refers to
//! a large value written to it. With nothing due, it writes zeros ahead of the log's end
//! ([`Zeroed`]), so that the syncs of the records that land there need no file-system metadata.

use super::{Chunk, FrameWriter, Inner, Instant, Ordering, LOG_BLOCK, WRITE_AHEAD_BYTES};
use crate::io::{AlignedBuf, Storage};

/// How far ahead of where the next records land the writer keeps a log file's blocks written
/// (with zeros), at most: a sync after writes into written blocks needs no file-system
/// metadata, where one after extending the file does (ext4 commits its journal: a synced
/// 4 KiB append took 0.56 ms on this project's guest, one into zeroed blocks 0.36 ms).
const ZEROED_AHEAD: u64 = 8 << 20;
/// Bytes of zeros written at a time (only while no write or sync is due, so a commit that
/// arrives meanwhile waits for at most this one write).
const ZERO_STEP: u64 = 1 << 20;
/// Zeros are written only while the syncs carry fewer log bytes than this, on average and since
/// the last one: each zero is one more byte written, each extending sync one more journal
/// commit (~0.2-0.4 ms here). Small syncs gain (`Immediate` commits of ~8 KiB per sync at 16
/// threads: 1.2x); `Eventual` under load gains nothing measurable, whether its syncs carry
/// megabytes (YCSB A) or 200-400 KiB (TPC-C at 1 thread, where zeros up to 256 KiB per sync
/// had made the device write 1.4x the log's bytes), and a log that is not synced (`None`:
/// only the WAL rule and `flush` sync it) gains nothing from zeros but twice the writes.
const ZEROS_BELOW_BYTES_PER_SYNC: u64 = 64 << 10;

/// The distance to keep zeros ahead for a log checkpointing every `checkpoint_bytes`: at most
/// an eighth of that (a log with a short interval is small and soon overwrites its files).
pub(crate) fn zeroed_ahead(checkpoint_bytes: u64) -> u64 {
    let ahead = (checkpoint_bytes / 8).min(ZEROED_AHEAD);
    ahead - ahead % LOG_BLOCK as u64
}

/// How far each log file's blocks are written, by records or zeros, as far as the writer
/// knows: it alone writes the files while the log runs, so nothing lies beyond. Zeros read as
/// no frame: where the records stop, the log ends (see `reader`).
///
/// The zeros stay no further ahead than the log has written records since it opened: a log
/// that writes little (a small or idle database, a short-lived process) does not grow its
/// files by megabytes of zeros it never reaches, and a busy one reaches the full distance
/// within its first megabytes.
pub(crate) struct Zeroed {
    written: [u64; 2],
    /// How far ahead of the next records to keep zeros at most (0: none; see
    /// [`zeroed_ahead`]).
    ahead: u64,
    /// Bytes of records written since the log opened.
    logged: u64,
    /// Log bytes written since the last sync, and their moving average over the syncs.
    since_sync: u64,
    per_sync: u64,
    zeros: Option<AlignedBuf>,
}

impl Zeroed {
    /// Keeps zeros `ahead` bytes ahead (a multiple of [`LOG_BLOCK`]), starting from the files'
    /// lengths rounded up to whole blocks (an earlier life may have left a file ending inside
    /// one; the rest of it reads as zeros); a file whose length cannot be read gets no zeros.
    pub(crate) fn new(files: &[std::sync::Arc<dyn Storage>; 2], ahead: u64) -> Self {
        debug_assert_eq!(ahead % LOG_BLOCK as u64, 0);
        let written = |file: &std::sync::Arc<dyn Storage>| {
            file.len()
                .ok()
                .and_then(|len| len.checked_next_multiple_of(LOG_BLOCK as u64))
                .unwrap_or(u64::MAX)
        };
        Zeroed {
            written: [written(&files[0]), written(&files[1])],
            ahead,
            logged: 0,
            since_sync: 0,
            per_sync: 0,
            zeros: None,
        }
    }

    /// Notes a write of `bytes` of records to `file`, ending at `end` (a whole block).
    fn wrote(&mut self, file: usize, end: u64, bytes: u64) {
        debug_assert_eq!(end % LOG_BLOCK as u64, 0);
        self.written[file] = self.written[file].max(end);
        self.logged = self.logged.saturating_add(bytes);
        self.since_sync += bytes;
    }

    /// How far ahead of the next records to keep zeros now: the full distance, or as far as
    /// the log has come since it opened if that is less (in whole blocks).
    fn distance(&self) -> u64 {
        let logged = self
            .logged
            .checked_next_multiple_of(LOG_BLOCK as u64)
            .unwrap_or(u64::MAX);
        self.ahead.min(logged)
    }

    /// Notes a sync of the log files.
    fn synced(&mut self) {
        self.per_sync = self.per_sync - self.per_sync / 8 + self.since_sync / 8;
        self.since_sync = 0;
    }

    /// Whether `file`, whose next records land at `offset`, wants zeros ahead of them.
    fn wants(&self, file: usize, offset: u64) -> bool {
        let distance = self.distance();
        distance > 0
            && self.per_sync < ZEROS_BELOW_BYTES_PER_SYNC
            && self.since_sync < ZEROS_BELOW_BYTES_PER_SYNC
            && self.written[file] < offset.saturating_add(distance)
    }

    /// Writes a step of zeros (1 MiB, or the current distance if less) past the written end
    /// of `file` (a whole block: see [`Self::new`] and [`Self::wrote`]). A failure (no space
    /// left, say) stops the zeros for this file: the records' own writes report what they meet.
    fn step(&mut self, file: usize, storage: &dyn Storage) {
        let start = self.written[file];
        debug_assert_eq!(start % LOG_BLOCK as u64, 0);
        let step = ZERO_STEP.min(self.distance()) as usize;
        debug_assert!(step > 0 && step.is_multiple_of(LOG_BLOCK));
        let zeros = self
            .zeros
            .get_or_insert_with(|| AlignedBuf::new(ZERO_STEP.min(self.ahead) as usize));
        self.written[file] = match storage.write_at(&zeros[..step], start) {
            Ok(()) => start + step as u64,
            Err(_) => u64::MAX,
        };
    }
}

/// The writer thread's knowledge of the partial block at the end of a file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    pub(crate) file: usize,
    /// Offset of the partial block, and its bytes so far.
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
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
    pub(super) fn write_loop(&self, mut tail: Tail, mut zeroed: Zeroed) {
        let _fail_on_panic = FailOnPanic(self);
        // Files written since their last sync.
        let mut unsynced = [false; 2];
        let mut state = self.state.lock();
        loop {
            if state.failed.is_some() {
                // A failed log writes nothing more: what it would write follows records that
                // may be lost. Appends after the failure are dropped; waiters see the failure.
                self.seal_open(&mut state);
                self.discard_sealed(&mut state);
                self.progress.notify_all();
                if state.shutdown {
                    return;
                }
                self.work.wait(&mut state);
                continue;
            }
            let now = Instant::now();
            let due = state.eventual_deadline.is_some_and(|at| at <= now);
            let wanted = state.requested > self.durable.load(Ordering::Acquire);
            let sync = due || wanted || state.shutdown;
            if !sync && state.pending_bytes < WRITE_AHEAD_BYTES {
                let (file, offset) = (state.file, state.file_offset);
                if zeroed.wants(file, offset) {
                    drop(state);
                    zeroed.step(file, self.files[file].as_ref());
                    state = self.state.lock();
                    continue;
                }
                match state.eventual_deadline {
                    Some(at) => {
                        self.work
                            .wait_for(&mut state, at.saturating_duration_since(now));
                    }
                    None => self.work.wait(&mut state),
                }
                continue;
            }
            let nothing_appended = !state.holds_records(&self.chunks);
            if state.shutdown && nothing_appended {
                return;
            }
            if sync {
                // Before the seal: an append that lands after it (in the next chunk) sees the
                // flag cleared and arms the next sync itself (see `Log::sync_eventually`).
                state.eventual_deadline = None;
                self.sync_armed.store(false, Ordering::Release);
            }
            if nothing_appended {
                self.seal_open(&mut state);
            } else {
                // The write ends with how far the log was durable before it: recovery finding
                // damage below that knows synced records were lost, and keeps a write only
                // up to its last intact mark (see `reader`).
                let durable = self.durable.load(Ordering::Acquire);
                let mut mark = std::mem::take(&mut state.frames);
                mark.clear();
                FrameWriter::new(&mut mark, &mut Vec::new()).sync_mark(durable);
                self.seal_with_mark(&mut state, &mut mark);
                state.frames = mark;
            }
            let chunks = std::mem::take(&mut state.sealed);
            state.writing_bytes += std::mem::take(&mut state.pending_bytes);
            let target = state.end;
            drop(state);
            // Every large value a record in these chunks references was written before the
            // record's place was reserved, so before the chunks were sealed: sync them first.
            let mut outcome = self.sync_data();
            for mut chunk in chunks {
                if outcome.is_ok() {
                    let bytes = chunk.sealed.len() as u64;
                    outcome = self
                        .write_chunk(&mut chunk, &mut tail, &mut unsynced)
                        .map(|end| zeroed.wrote(chunk.file, end, bytes));
                }
                // Freed at once (also unwritten, after a failure): writers waiting for room
                // in the log buffer go on while the rest is written.
                let mut state = self.state.lock();
                state.writing_bytes -= chunk.sealed.len();
                self.free_chunk(&mut state, chunk.sealed);
                if self.throttled.load(Ordering::Relaxed) {
                    self.update_throttle(&state);
                }
                self.progress.notify_all();
            }
            if sync {
                outcome = outcome.and_then(|()| self.sync_files(&mut unsynced));
                zeroed.synced();
            }
            state = self.state.lock();
            match outcome {
                Ok(()) if sync => self.durable.store(target, Ordering::Release),
                Ok(()) => {}
                Err(error) => self.fail(&mut state, error.to_string()),
            }
            if self.wants_checkpoint(&state) {
                self.checkpoint_due.notify();
            }
            self.progress.notify_all();
        }
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

    /// Writes `chunk` as whole blocks (the partial last block of a file again, from
    /// `tail`), in place (see [`Chunk`]) once its records are filled in, and notes its file in
    /// `unsynced`; returns where the write ended in the file (0 if the chunk held nothing).
    pub(super) fn write_chunk(
        &self,
        chunk: &mut Chunk,
        tail: &mut Tail,
        unsynced: &mut [bool; 2],
    ) -> std::io::Result<u64> {
        let records = chunk.sealed.len();
        if records == 0 {
            return Ok(0);
        }
        let aligned = chunk.offset - chunk.offset % LOG_BLOCK as u64;
        let prefix: &[u8] = if tail.file == chunk.file && tail.offset == aligned {
            &tail.bytes
        } else {
            &[]
        };
        debug_assert_eq!(aligned + prefix.len() as u64, chunk.offset);
        let data_len = prefix.len() + records;
        let len = data_len.next_multiple_of(LOG_BLOCK);
        let Some(buffer) = chunk.sealed.bytes_mut(&self.chunks) else {
            return Err(std::io::Error::other(
                "a record was never copied into the log (a thread panicked appending it)",
            ));
        };
        let blocks = &mut buffer[..len];
        blocks[..prefix.len()].copy_from_slice(prefix);
        blocks[data_len..].fill(0);
        self.files[chunk.file].write_at(blocks, aligned)?;
        self.bytes.fetch_add(records as u64, Ordering::Relaxed);
        unsynced[chunk.file] = true;
        let end = chunk.offset + records as u64;
        let partial = (end % LOG_BLOCK as u64) as usize;
        *tail = Tail {
            file: chunk.file,
            offset: end - partial as u64,
            bytes: blocks[data_len - partial..data_len].to_vec(),
        };
        Ok(aligned + len as u64)
    }

    /// Syncs the files written since their last sync.
    pub(super) fn sync_files(&self, unsynced: &mut [bool; 2]) -> std::io::Result<()> {
        for (file, unsynced) in unsynced.iter_mut().enumerate() {
            if *unsynced {
                self.files[file].sync()?;
                self.syncs.fetch_add(1, Ordering::Relaxed);
                *unsynced = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{MemoryStorage, IO_ALIGNMENT};
    use crate::wal::records_from;
    use crate::wal::tests::{commits_in, new_log};
    use std::sync::Arc;

    /// A short distance, so that the tests stay quick under Miri.
    const AHEAD: u64 = 64 << 10;

    fn memory_files() -> [Arc<dyn Storage>; 2] {
        [
            Arc::new(MemoryStorage::new()),
            Arc::new(MemoryStorage::new()),
        ]
    }

    fn bytes_at(file: &dyn Storage, offset: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        file.read_at(&mut bytes, offset).unwrap();
        bytes
    }

    #[test]
    fn the_distance_is_an_eighth_of_the_interval_up_to_8_mib_in_whole_blocks() {
        assert_eq!(zeroed_ahead(1 << 20), 128 << 10);
        assert_eq!(zeroed_ahead(1 << 40), ZEROED_AHEAD);
        assert_eq!(zeroed_ahead((1 << 20) + 100), 128 << 10);
        assert_eq!(zeroed_ahead(4000), 0);
    }

    #[test]
    fn zeros_follow_the_records_as_far_ahead_as_the_log_has_come_up_to_the_distance() {
        let files = memory_files();
        // File 1 holds what an earlier life wrote, three sectors.
        let earlier = 3 * IO_ALIGNMENT;
        files[1].write_at(&[7; 3 * IO_ALIGNMENT], 0).unwrap();
        let mut zeroed = Zeroed::new(&files, AHEAD);
        // No records written in this life: no zeros.
        assert!(!zeroed.wants(0, 0) && !zeroed.wants(1, earlier as u64));
        // 100 bytes of records (in the file's first block): the zeros go one block ahead of
        // where the next records land, in file 1 from the block after the earlier life's.
        files[0].write_at(&[9; LOG_BLOCK], 0).unwrap();
        zeroed.wrote(0, LOG_BLOCK as u64, 100);
        for (file, next_records) in [(0, 100), (1, earlier as u64)] {
            let mut steps = 0;
            while zeroed.wants(file, next_records) {
                zeroed.step(file, files[file].as_ref());
                steps += 1;
            }
            assert_eq!(steps, 1);
            assert_eq!(files[file].len().unwrap(), 2 * LOG_BLOCK as u64);
        }
        let bytes = bytes_at(files[1].as_ref(), 0, 2 * LOG_BLOCK);
        assert!(bytes[..earlier].iter().all(|&b| b == 7));
        assert!(bytes[earlier..].iter().all(|&b| b == 0));
        assert_eq!(bytes_at(files[0].as_ref(), 0, LOG_BLOCK), [9; LOG_BLOCK]);
        // Once the log has written more than the distance, the zeros stop at the distance
        // ahead of where the next records land.
        let records_at = 5 * AHEAD;
        files[0].write_at(&[9; LOG_BLOCK], records_at).unwrap();
        let records_end = records_at + LOG_BLOCK as u64;
        zeroed.wrote(0, records_end, 2 * AHEAD);
        zeroed.synced();
        let mut steps = 0;
        while zeroed.wants(0, records_end) {
            zeroed.step(0, files[0].as_ref());
            steps += 1;
        }
        assert_eq!(steps, 1);
        assert_eq!(files[0].len().unwrap(), records_end + AHEAD);
        assert_eq!(
            bytes_at(files[0].as_ref(), records_at, LOG_BLOCK),
            [9; LOG_BLOCK]
        );
        // No distance, no zeros.
        let mut none = Zeroed::new(&memory_files(), 0);
        none.wrote(0, LOG_BLOCK as u64, LOG_BLOCK as u64);
        assert!(!none.wants(0, 0));
    }

    #[test]
    fn zeros_stop_while_the_syncs_average_many_bytes_and_resume_when_they_do_not() {
        let files = memory_files();
        let mut zeroed = Zeroed::new(&files, AHEAD);
        let sync_after = |zeroed: &mut Zeroed, end: &mut u64, bytes: u64| {
            *end += bytes;
            zeroed.wrote(0, *end, bytes);
            zeroed.synced();
        };
        let mut end = 0;
        // `Eventual` under load: megabytes per sync.
        for _ in 0..16 {
            sync_after(&mut zeroed, &mut end, 4 << 20);
        }
        assert!(!zeroed.wants(0, end));
        // `Eventual` under a lighter load: a couple of hundred kilobytes per sync (TPC-C at 1
        // thread), whose syncs zeros would not speed up enough to pay for doubling the writes.
        for _ in 0..64 {
            sync_after(&mut zeroed, &mut end, 200 << 10);
        }
        assert!(!zeroed.wants(0, end));
        // `Immediate` commits, a few kilobytes each.
        for _ in 0..64 {
            sync_after(&mut zeroed, &mut end, 4 << 10);
        }
        assert!(zeroed.wants(0, end));
    }

    #[test]
    fn zeros_stop_while_the_log_goes_unsynced_and_resume_after_a_sync() {
        let files = memory_files();
        let mut zeroed = Zeroed::new(&files, AHEAD);
        let mut end = 0;
        // `None`: records written, never synced. Zeros follow the first ones (a young log) ...
        end += 4 << 10;
        zeroed.wrote(0, end, 4 << 10);
        assert!(zeroed.wants(0, end));
        // ... and stop once more than the threshold waits unsynced: they would double the
        // writes of a log whose syncs they would never speed up.
        while end < ZEROS_BELOW_BYTES_PER_SYNC {
            end += 64 << 10;
            zeroed.wrote(0, end, 64 << 10);
        }
        assert!(!zeroed.wants(0, end));
        // A sync of a few kilobytes after it (`flush`, an `Immediate` commit) starts a new
        // count, though the average still carries the long interval for a while.
        zeroed.synced();
        for _ in 0..64 {
            end += 4 << 10;
            zeroed.wrote(0, end, 4 << 10);
            zeroed.synced();
        }
        assert!(zeroed.wants(0, end));
    }

    #[test]
    fn a_log_followed_by_zeros_reads_back_whole_and_ends_where_its_records_do() {
        let files = memory_files();
        let log = new_log(files.clone(), 1 << 40);
        let start = log.begin_checkpoint(1, &[], Vec::new);
        for batch in 1..=20 {
            log.append(|writer, _| writer.commit(batch));
        }
        log.shut_down().unwrap();
        let end = log.end();
        let written = files[0].len().unwrap();
        let mut zeroed = Zeroed::new(&files, AHEAD);
        zeroed.wrote(0, written, AHEAD);
        zeroed.synced();
        while zeroed.wants(0, written) {
            zeroed.step(0, files[0].as_ref());
        }
        assert_eq!(files[0].len().unwrap(), written + AHEAD);
        assert_eq!(commits_in(&files, start), (1..=20).collect::<Vec<_>>());
        let (_, scan) = records_from(&files, start).unwrap();
        assert_eq!(scan.end.lsn, end);
    }
}
