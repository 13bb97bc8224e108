//! The log's writer thread: it seals the open chunk, takes the sealed ones, waits for their
//! reserved ranges to be filled, writes them as whole sectors (the
//! partial last sector of a file again, from its [`Tail`]), freeing each as soon as it is
//! written (its bytes leave the log buffer), and syncs the files when a commit,
//! the `Eventual` delay, a page write (the WAL rule) or shutdown asks; between syncs it writes
//! ahead once 1 MiB waits. The page file is synced first when a record in the chunks refers to
//! a large value written to it.

use super::{
    Appender, Chunk, Inner, Instant, Ordering, IO_ALIGNMENT, SPARE_CHUNKS, WRITE_AHEAD_BYTES,
};

/// The writer thread's knowledge of the partial sector at the end of a file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    pub(crate) file: usize,
    /// Offset of the partial sector, and its bytes so far.
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
    pub(super) fn write_loop(&self, mut tail: Tail) {
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
            if !nothing_appended {
                // How far the log was durable before this write: recovery finding damage
                // below that knows synced records were lost (see `reader`).
                let durable = self.durable.load(Ordering::Acquire);
                self.append_locked(&mut state, Appender::Writer, |writer, _| {
                    writer.sync_mark(durable)
                });
            }
            if sync {
                // Before the seal: an append that lands after it (in the next chunk) sees the
                // flag cleared and arms the next sync itself (see `Log::sync_eventually`).
                state.eventual_deadline = None;
                self.sync_armed.store(false, Ordering::Release);
            }
            self.seal_open(&mut state);
            let chunks = std::mem::take(&mut state.sealed);
            state.writing_bytes += std::mem::take(&mut state.pending_bytes);
            let target = state.end;
            drop(state);
            // Every large value a record in these chunks references was written before the
            // record's place was reserved, so before the chunks were sealed: sync them first.
            let mut outcome = self.sync_data();
            for mut chunk in chunks {
                if outcome.is_ok() {
                    outcome = self.write_chunk(&mut chunk, &mut tail, &mut unsynced);
                }
                // Freed at once (also unwritten, after a failure): writers waiting for room
                // in the log buffer go on while the rest is written.
                let mut state = self.state.lock();
                state.writing_bytes -= chunk.sealed.len();
                state.control.free(&self.chunks, chunk.sealed, SPARE_CHUNKS);
                if self.throttled.load(Ordering::Relaxed) {
                    self.update_throttle(&state);
                }
                self.progress.notify_all();
            }
            if sync {
                outcome = outcome.and_then(|()| self.sync_files(&mut unsynced));
            }
            state = self.state.lock();
            match outcome {
                Ok(()) if sync => self.durable.store(target, Ordering::Release),
                Ok(()) => {}
                Err(error) => self.fail(&mut state, error.to_string()),
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

    /// Writes `chunk` as whole sectors (the partial last sector of a file again, from
    /// `tail`), in place (see [`Chunk`]) once its records are filled in, and notes its file in
    /// `unsynced`.
    pub(super) fn write_chunk(
        &self,
        chunk: &mut Chunk,
        tail: &mut Tail,
        unsynced: &mut [bool; 2],
    ) -> std::io::Result<()> {
        let records = chunk.sealed.len();
        if records == 0 {
            return Ok(());
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
        let Some(buffer) = chunk.sealed.bytes_mut(&self.chunks) else {
            return Err(std::io::Error::other(
                "a record was never copied into the log (a thread panicked appending it)",
            ));
        };
        let sectors = &mut buffer[..len];
        sectors[..prefix.len()].copy_from_slice(prefix);
        sectors[data_len..].fill(0);
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
        Ok(())
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
