//! The log's writer thread: it takes the appended chunks, writes them as whole sectors (the
//! partial last sector of a file again, from its [`Tail`]) and syncs the files when a commit,
//! the `Eventual` delay, a page write (the WAL rule) or shutdown asks; between syncs it writes
//! ahead once 1 MiB waits. The page file is synced first when a record in the chunks refers to
//! a large value written to it.

use super::{
    AlignedBuf, Chunk, Inner, Instant, Ordering, CHUNK_CAPACITY, IO_ALIGNMENT, SPARE_CHUNKS,
    WRITE_AHEAD_BYTES,
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
        // The sector-aligned copy of what is written, reused.
        let mut buffer = AlignedBuf::new(0);
        let mut state = self.state.lock();
        loop {
            if state.failed.is_some() {
                // A failed log writes nothing more: what it would write follows records that
                // may be lost. Appends after the failure are dropped; waiters see the failure.
                state.open = None;
                state.sealed.clear();
                state.pending_bytes = 0;
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
            let nothing_appended = state.open.is_none() && state.sealed.is_empty();
            if state.shutdown && nothing_appended {
                return;
            }
            if !nothing_appended {
                // How far the log was durable before this write: recovery finding damage
                // below that knows synced records were lost (see `reader`).
                let durable = self.durable.load(Ordering::Acquire);
                self.append_locked(&mut state, |writer, _| writer.sync_mark(durable));
            }
            let mut chunks = std::mem::take(&mut state.sealed);
            chunks.extend(state.open.take());
            state.pending_bytes = 0;
            if self.throttled.load(Ordering::Relaxed) {
                // Writers waiting for the queue to drain go on (they are woken below).
                self.update_throttle(&state);
            }
            let target = state.end;
            if sync {
                state.eventual_deadline = None;
                self.sync_armed.store(false, Ordering::Release);
            }
            drop(state);
            // Every large value a record in these chunks references was written before the
            // record was appended, so before the chunks were taken: sync them first.
            let outcome = self.sync_data().and_then(|()| {
                self.write_chunks(&mut chunks, &mut buffer, &mut tail, &mut unsynced, sync)
            });
            state = self.state.lock();
            for mut chunk in chunks {
                if state.spare.len() < SPARE_CHUNKS && chunk.bytes.capacity() <= 2 * CHUNK_CAPACITY
                {
                    chunk.bytes.clear();
                    state.spare.push(chunk.bytes);
                }
            }
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
            // In place when the chunk kept its buffer (a chunk that outgrew its capacity was
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
