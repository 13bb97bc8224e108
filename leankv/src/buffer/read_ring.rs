//! Reads submitted in batches through io_uring, for read-ahead (`ring_reads.rs`): a batch of
//! reads costs one system call to submit and the completions are reaped in rounds (up to a
//! bound the reaper names, the rest left for the next round), where one thread per read in
//! flight paid a hand-off, a `pread` and a wake-up for each (on the 2-vCPU guests ~24 us of CPU
//! per page read with the threads, ~14 with the ring).
//!
//! The ring is shared: any thread starts reads (the submission queue and the slots are behind
//! one mutex, held only to push or take entries), and one thread at a time reaps (the
//! completion queue's only consumer, while it holds `reaping`), blocking in the kernel
//! without holding the slots' mutex, so reads started meanwhile go out at once.
//!
//! A read goes into a buffer the ring owns until its completion is reaped, so no caller's
//! memory is ever the target of a read the kernel still performs. The ring reads its own
//! handle on the file (a duplicate), so the caller's closing of the file cannot leave an
//! in-flight read aimed at a number the process reuses.
//!
//! *Invariants:* a slot's buffer is neither dropped nor reused while its read is in flight; if
//! the ring fails with reads in flight, their buffers are leaked rather than freed. The
//! submission queue is viewed only under the slots' mutex and the completion queue only under
//! `reaping`, each view ending before its mutex is released (`submission`, `completions`):
//! a view writes its position back when dropped.

use crate::io::AlignedBuf;
use io_uring::{cqueue::CompletionQueue, opcode, squeue::SubmissionQueue, types, IoUring};
use parking_lot::Mutex;
use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::os::fd::AsRawFd;

/// One read in flight: the buffer the kernel fills, what it is for, and where it reads.
struct InFlight<T> {
    buffer: AlignedBuf,
    offset: u64,
    tag: T,
}

/// The reads in flight by slot (an entry's user data; `None` is free).
struct Slots<T> {
    reads: Vec<Option<InFlight<T>>>,
    free: Vec<usize>,
    /// Buffers of reads already handed on, for later reads (at most one per slot): a fresh
    /// zeroed buffer per read cost ~2% of a read-bound workload's CPU.
    spare: Vec<AlignedBuf>,
}

impl<T> Slots<T> {
    /// A buffer of `len` bytes: a spare one large enough if there is one.
    fn buffer(&mut self, len: usize) -> AlignedBuf {
        match self
            .spare
            .iter()
            .rposition(|buffer| buffer.capacity() >= len)
        {
            Some(at) => {
                let mut buffer = self.spare.swap_remove(at);
                buffer.set_len(len);
                buffer
            }
            None => AlignedBuf::new(len),
        }
    }
}

pub(super) struct ReadRing<T> {
    ring: IoUring,
    file: File,
    /// Taken to push submissions and to fill or empty slots; never across a system call
    /// that waits.
    slots: Mutex<Slots<T>>,
    /// Held by the thread reaping completions: the completion queue's one consumer. `true`
    /// once the ring was abandoned: nothing is reaped after.
    reaping: Mutex<bool>,
}

impl<T> ReadRing<T> {
    /// A ring for at most `depth` reads of `file` at once; an error where the kernel refuses
    /// io_uring (too old, or forbidden by a seccomp profile): then reads go one at a time.
    pub(super) fn new(file: File, depth: u32) -> Result<Self> {
        let ring = IoUring::new(depth)?;
        let depth = depth as usize;
        Ok(ReadRing {
            ring,
            file,
            slots: Mutex::new(Slots {
                reads: (0..depth).map(|_| None).collect(),
                free: (0..depth).rev().collect(),
                spare: Vec::new(),
            }),
            reaping: Mutex::new(false),
        })
    }

    /// Reads started and not yet reaped.
    pub(super) fn in_flight(&self) -> usize {
        let slots = self.slots.lock();
        slots.reads.len() - slots.free.len()
    }

    /// Queues a read of `len` bytes at `offset` (both multiples of the direct I/O alignment)
    /// for the next [`submit`](Self::submit) or [`reap`](Self::reap); gives `tag` back if
    /// every slot is in use.
    pub(super) fn start(&self, offset: u64, len: usize, tag: T) -> std::result::Result<(), T> {
        let mut slots = self.slots.lock();
        let Some(slot) = slots.free.pop() else {
            return Err(tag);
        };
        let buffer = slots.buffer(len);
        slots.reads[slot] = Some(InFlight {
            buffer,
            offset,
            tag,
        });
        self.queue(&mut slots, slot);
        Ok(())
    }

    /// Puts the read of `slot` on the submission queue (again, after an interrupted one).
    fn queue(&self, slots: &mut Slots<T>, slot: usize) {
        let read = slots.reads[slot]
            .as_mut()
            .expect("a queued slot holds its read");
        let entry = opcode::Read::new(
            types::Fd(self.file.as_raw_fd()),
            read.buffer.as_mut_ptr(),
            read.buffer.len() as u32,
        )
        .offset(read.offset)
        .build()
        .user_data(slot as u64);
        // SAFETY: the buffer lives in `slots.reads[slot]`, which is neither dropped nor
        // reused until this read's completion is reaped (`reap`, `Drop`), and its heap memory
        // does not move with the slot; `self.file` outlives the ring's reads the same way.
        // The queue has room: it holds at most one entry per slot.
        let pushed = self.submission(slots, |queue| unsafe { queue.push(&entry) });
        pushed.expect("the submission queue holds an entry per slot");
    }

    /// Runs `f` on the submission queue. `_slots` proves the slots' mutex held: the queue is
    /// touched only under it, and the view ends inside this call, before the mutex can be
    /// released. (A view dropped after the mutex, as a block's last expression is in Rust
    /// 2021, wrote back its tail over another thread's push: the kernel then read entries
    /// past the real tail again, two completions for one slot, `s50-*`.)
    fn submission<R>(
        &self,
        _slots: &mut Slots<T>,
        f: impl FnOnce(&mut SubmissionQueue<'_>) -> R,
    ) -> R {
        // SAFETY: no other `SubmissionQueue` exists meanwhile (see above); it is dropped
        // (storing its tail) at the end of this call.
        let mut queue = unsafe { self.ring.submission_shared() };
        f(&mut queue)
    }

    /// Hands the queued reads to the kernel without waiting.
    pub(super) fn submit(&self) -> Result<()> {
        self.submit_and_wait(0)
    }

    /// Hands the queued reads to the kernel and waits for `want` completions, retrying
    /// interruptions of the system call itself.
    fn submit_and_wait(&self, want: usize) -> Result<()> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(error)
                    if matches!(error.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Runs `f` on the completion queue. `_reaping` (the reaping mutex's flag) proves the
    /// mutex held: the queue is read only under it, and the view ends inside this call.
    fn completions<R>(
        &self,
        _reaping: &mut bool,
        f: impl FnOnce(&mut CompletionQueue<'_>) -> R,
    ) -> R {
        // SAFETY: no other `CompletionQueue` exists meanwhile (see above); it is dropped
        // (storing its head past the entries `f` took) at the end of this call.
        let mut queue = unsafe { self.ring.completion_shared() };
        f(&mut queue)
    }

    /// Whether reads wait on the submission queue (pushed, not yet handed to the kernel).
    fn queued(&self) -> bool {
        let mut slots = self.slots.lock();
        !self.submission(&mut slots, |queue| queue.is_empty())
    }

    /// If no other thread is reaping: submits the queued reads, waits until at least one
    /// read has completed (if any is in flight and none waits reaped already), and hands up
    /// to `most` completed reads to `complete` with their bytes, or the error each met (a
    /// short read is an `UnexpectedEof`); the rest stay for the next round. `Ok(None)` if
    /// another thread reaps, else how many reads it completed. An error here is the ring's
    /// own: the reads in flight stay in flight.
    pub(super) fn reap(
        &self,
        most: usize,
        mut complete: impl FnMut(T, Result<&[u8]>),
    ) -> Result<Option<usize>> {
        debug_assert!(most > 0);
        let Some(mut reaping) = self.reaping.try_lock() else {
            return Ok(None);
        };
        if *reaping {
            return Ok(Some(0));
        }
        let waiting = self.completions(&mut reaping, |queue| !CompletionQueue::is_empty(queue));
        // Rounds that find completions waiting (a bounded round leaves some) need no system
        // call unless reads are queued.
        if !waiting || self.queued() {
            self.submit_and_wait(usize::from(!waiting && self.in_flight() > 0))?;
        }
        let done: Vec<(usize, i32)> = self.completions(&mut reaping, |queue| {
            queue
                .take(most)
                .map(|entry| (entry.user_data() as usize, entry.result()))
                .collect()
        });
        // Every completed read leaves its slot before any is handed on, so that a panic in
        // `complete` cannot strand a read whose completion was consumed.
        let mut completed = Vec::with_capacity(done.len());
        {
            let mut slots = self.slots.lock();
            for (slot, result) in done {
                if result == -libc::EINTR || result == -libc::EAGAIN {
                    self.queue(&mut slots, slot);
                    continue;
                }
                let read = slots.reads[slot]
                    .take()
                    .expect("a completion names a slot in flight");
                slots.free.push(slot);
                completed.push((read, result));
            }
        }
        let count = completed.len();
        let mut emptied = Vec::with_capacity(count);
        for (read, result) in completed {
            let outcome = match result {
                error if error < 0 => Err(Error::from_raw_os_error(-error)),
                n if n as usize == read.buffer.len() => Ok(&read.buffer[..]),
                _ => Err(Error::new(
                    ErrorKind::UnexpectedEof,
                    format!("short read of the page file at offset {}", read.offset),
                )),
            };
            complete(read.tag, outcome);
            emptied.push(read.buffer);
        }
        let mut slots = self.slots.lock();
        let room = slots.reads.len().saturating_sub(slots.spare.len());
        slots.spare.extend(emptied.into_iter().take(room));
        Ok(Some(count))
    }

    /// Gives up the reads in flight after the ring failed: hands back what they were for and
    /// leaks their buffers, which the kernel may still write. Waits for a round of reaping
    /// under way; nothing is reaped afterwards.
    pub(super) fn abandon(&self) -> Vec<T> {
        *self.reaping.lock() = true;
        let mut slots = self.slots.lock();
        slots.free.clear();
        std::mem::take(&mut slots.reads)
            .into_iter()
            .flatten()
            .map(|read| {
                std::mem::forget(read.buffer);
                read.tag
            })
            .collect()
    }
}

impl<T> Drop for ReadRing<T> {
    /// Waits for the reads in flight; if the ring fails meanwhile, leaks their buffers (the
    /// kernel may still write them) instead of freeing them.
    fn drop(&mut self) {
        while self.in_flight() > 0 {
            if self.reap(usize::MAX, |_, _| {}).is_err() {
                self.abandon();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn ring_over(bytes: &[u8]) -> Option<(tempfile::TempDir, ReadRing<usize>)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let file = File::create(&path).unwrap();
        file.write_all_at(bytes, 0).unwrap();
        let file = File::open(&path).unwrap();
        // Where the kernel refuses io_uring there is nothing to test: the read-ahead threads
        // read one page at a time instead.
        let ring = ReadRing::new(file, 8).ok()?;
        Some((dir, ring))
    }

    #[test]
    fn a_batch_of_reads_completes_each_with_its_own_bytes() {
        let bytes: Vec<u8> = (0..16 * 4096).map(|i| (i / 4096) as u8).collect();
        let Some((_dir, ring)) = ring_over(&bytes) else {
            return;
        };
        for page in [3usize, 0, 15, 7, 8, 9] {
            let len = if page == 9 { 2 * 4096 } else { 4096 };
            assert!(ring.start(page as u64 * 4096, len, page).is_ok());
        }
        assert_eq!(ring.in_flight(), 6);
        ring.submit().unwrap();
        let mut seen = Vec::new();
        while ring.in_flight() > 0 {
            ring.reap(usize::MAX, |page, read| {
                let read = read.unwrap();
                assert!(read[..4096].iter().all(|&b| b == page as u8));
                assert!(read[4096..].iter().all(|&b| b == page as u8 + 1));
                seen.push(page);
            })
            .unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 3, 7, 8, 9, 15]);
        assert_eq!(ring.in_flight(), 0);
    }

    #[test]
    fn reused_buffers_hold_each_later_read_exactly() {
        let bytes: Vec<u8> = (0..16 * 4096).map(|i| (i / 4096) as u8).collect();
        let Some((_dir, ring)) = ring_over(&bytes) else {
            return;
        };
        // Long reads first, so that shorter later ones go into the larger buffers they left.
        for (round, pages) in [3usize, 1, 2, 1, 3].into_iter().enumerate() {
            for read in 0..4 {
                let first = (round + read * 3) % (16 - pages);
                let tag = first * 16 + pages;
                assert!(ring.start((first * 4096) as u64, pages * 4096, tag).is_ok());
            }
            let mut completed = 0;
            while ring.in_flight() > 0 {
                ring.reap(usize::MAX, |tag, read| {
                    let (first, pages) = (tag / 16, tag % 16);
                    let read = read.unwrap();
                    assert_eq!(read.len(), pages * 4096);
                    for (page, bytes) in read.chunks(4096).enumerate() {
                        assert!(bytes.iter().all(|&b| usize::from(b) == first + page));
                    }
                    completed += 1;
                })
                .unwrap();
            }
            assert_eq!(completed, 4);
        }
        let spare = ring.slots.lock().spare.len();
        assert!((4..=8).contains(&spare), "{spare} spare buffers");
    }

    #[test]
    fn a_round_hands_on_at_most_its_bound_and_leaves_the_rest() {
        let bytes: Vec<u8> = (0..16 * 4096).map(|i| (i / 4096) as u8).collect();
        let Some((_dir, ring)) = ring_over(&bytes) else {
            return;
        };
        for page in 0..7usize {
            assert!(ring.start(page as u64 * 4096, 4096, page).is_ok());
        }
        ring.submit().unwrap();
        let mut seen = Vec::new();
        while ring.in_flight() > 0 {
            let round = ring
                .reap(2, |page, read| {
                    assert!(read.unwrap().iter().all(|&b| usize::from(b) == page));
                    seen.push(page);
                })
                .unwrap();
            assert!(round.is_some_and(|count| count <= 2), "{round:?}");
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..7).collect::<Vec<_>>());
    }

    /// Threads start reads and reap them in rounds of 1 to 3 at once: every read completes
    /// exactly once, with its own bytes.
    #[test]
    fn bounded_rounds_under_concurrent_starts_complete_every_read_once() {
        let bytes: Vec<u8> = (0..64 * 4096).map(|i| (i / 4096) as u8).collect();
        let Some((_dir, ring)) = ring_over(&bytes) else {
            return;
        };
        let completed = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for thread in 0..3usize {
                let (ring, completed) = (&ring, &completed);
                scope.spawn(move || {
                    for read in 0..20_000usize {
                        let tag = thread * 1_000_000 + read;
                        let page = (tag * 7) % 64;
                        if ring.start(page as u64 * 4096, 4096, tag).is_ok() {
                            ring.submit().unwrap();
                        }
                        ring.reap(1 + read % 3, |tag, bytes| {
                            let bytes = bytes.unwrap();
                            assert!(bytes.iter().all(|&b| usize::from(b) == (tag * 7) % 64));
                            completed.lock().push(tag);
                        })
                        .unwrap();
                    }
                });
            }
        });
        while ring.in_flight() > 0 {
            ring.reap(2, |tag, _| completed.lock().push(tag)).unwrap();
        }
        let mut completed = completed.into_inner();
        let total = completed.len();
        completed.sort_unstable();
        completed.dedup();
        assert_eq!(completed.len(), total, "a read completed twice");
    }

    #[test]
    fn a_read_past_the_end_is_an_error_and_the_others_complete() {
        let Some((_dir, ring)) = ring_over(&[1u8; 2 * 4096]) else {
            return;
        };
        for (offset, len, tag) in [(4096, 4096, 1), (4096, 2 * 4096, 2), (8 * 4096, 4096, 8)] {
            assert!(ring.start(offset, len, tag).is_ok());
        }
        let mut outcomes = Vec::new();
        while ring.in_flight() > 0 {
            ring.reap(usize::MAX, |tag, read| {
                outcomes.push((tag, read.map(|b| b.len()).map_err(|e| e.kind())))
            })
            .unwrap();
        }
        outcomes.sort_unstable_by_key(|&(tag, _)| tag);
        assert_eq!(
            outcomes,
            [
                (1, Ok(4096)),
                (2, Err(ErrorKind::UnexpectedEof)),
                (8, Err(ErrorKind::UnexpectedEof))
            ]
        );
    }

    #[test]
    fn dropping_a_ring_waits_for_its_reads() {
        let Some((_dir, ring)) = ring_over(&[2u8; 8 * 4096]) else {
            return;
        };
        for page in 0..8 {
            assert!(ring.start(page * 4096, 4096, page as usize).is_ok());
        }
        assert_eq!(
            ring.start(0, 4096, 9),
            Err(9),
            "a full ring gives the read back"
        );
        ring.reap(usize::MAX, |_, read| assert!(read.is_ok()))
            .unwrap();
        drop(ring);
    }
}
