//! Read-ahead for scans (paper §IV-I, "I/O prefetching") and for lookups of many keys: reads
//! registered in the in-flight table by [`BufferManager::prefetch`] (the next leaves of a
//! scan) or [`BufferManager::read_ahead`] (the pages at which the descents of
//! `Tree::get_many` stopped) are performed asynchronously, so that the thread keeps working,
//! or keeps many reads in flight, while the pages arrive. A job is a run of consecutive pages,
//! read with one I/O (leaves of a tree loaded in key order mostly are). Where the storage lends
//! its file and the kernel allows io_uring, the runs go to one shared ring, reaped by the
//! threads that wait for its pages (`ring_reads.rs`); otherwise a small pool of threads
//! performs one read each.
//!
//! A prefetched page lands in the cooling stage exactly like a page read on demand; the
//! operation that reaches it finds it there (or waits on its in-flight entry) instead of
//! reading it. The threads hold only weak references to the buffer manager. Every job is an
//! in-flight entry other threads may wait on, so each is completed, or at least finished,
//! before its thread lets go of it: none is dropped while queued or in flight (the ring's
//! runs are dropped only with the buffer manager, when nobody can wait on them).

use super::policy::Policy;
use super::*;
use crate::io::AlignedBuf;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

#[derive(Default)]
struct Queue {
    jobs: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<PrefetchRun>,
    stop: bool,
}

pub(crate) struct Prefetcher {
    queue: Arc<Queue>,
    threads: Vec<JoinHandle<()>>,
}

impl Prefetcher {
    /// Starts `depth` I/O threads (at most [`MAX_PREFETCH_THREADS`]) for `manager`, each
    /// with one read at a time. If a thread cannot start, those started stop.
    pub(crate) fn start<P: Policy>(
        manager: &Arc<BufferManager<P>>,
        depth: usize,
    ) -> std::io::Result<Prefetcher> {
        let mut prefetcher = Prefetcher {
            queue: Arc::new(Queue::default()),
            threads: Vec::new(),
        };
        for index in 0..depth.min(MAX_PREFETCH_THREADS) {
            let weak = Arc::downgrade(manager);
            let queue = prefetcher.queue.clone();
            let thread = std::thread::Builder::new()
                .name(format!("leankv-prefetch-{index}"))
                .spawn(move || run(&weak, &queue))?;
            prefetcher.threads.push(thread);
        }
        Ok(prefetcher)
    }

    /// Queues registered reads, one run of consecutive pages per job.
    pub(crate) fn submit(&self, jobs: impl IntoIterator<Item = PrefetchRun>) {
        let mut state = self.queue.jobs.lock();
        let before = state.pending.len();
        state.pending.extend(jobs);
        let added = state.pending.len() - before;
        drop(state);
        for _ in 0..added {
            self.queue.ready.notify_one();
        }
    }
}

impl Drop for Prefetcher {
    /// Stops the threads and waits for them, so that none outlives the database (a failed
    /// open included); a prefetch thread that drops the last reference itself is not waited
    /// for (it is about to end).
    fn drop(&mut self) {
        self.queue.jobs.lock().stop = true;
        self.queue.ready.notify_all();
        let current = std::thread::current().id();
        for thread in self.threads.drain(..) {
            if thread.thread().id() != current {
                let _ = thread.join();
            }
        }
    }
}

fn run<P: Policy>(manager: &Weak<BufferManager<P>>, queue: &Queue) {
    let mut buffer = AlignedBuf::new(0);
    loop {
        let job = {
            let mut state = queue.jobs.lock();
            loop {
                if let Some(job) = state.pending.pop_front() {
                    break job;
                }
                if state.stop {
                    return;
                }
                queue.ready.wait(&mut state);
            }
        };
        match manager.upgrade() {
            Some(manager) => manager.complete_prefetch(&job, &mut buffer),
            None => abandon(&job),
        }
    }
}

/// Releases the in-flight entries of a run nobody will read.
fn abandon(job: &PrefetchRun) {
    job.iter().for_each(|(_, read)| read.finish());
}

/// Most I/O threads that serve prefetch reads (each has one read outstanding).
pub(super) const MAX_PREFETCH_THREADS: usize = 16;

/// Longest run of consecutive pages one prefetch read covers.
const MAX_PREFETCH_RUN: usize = 32;

/// Consecutive pages registered for one prefetch read, with their in-flight entries.
pub(crate) type PrefetchRun = Vec<(u64, Arc<InFlightRead>)>;

/// A page a descent stopped at because it is not in memory: the child `page_id` at swip
/// `offset` of the node in `parent`, which showed `version` (see
/// [`BufferManager::read_ahead`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadAhead {
    pub(crate) parent: FrameId,
    pub(crate) version: u64,
    pub(crate) offset: usize,
    pub(crate) page_id: u64,
}

/// Adds the registered read of `page_id` to the last run if it continues it, else starts a
/// new run.
fn add_to_runs(runs: &mut Vec<PrefetchRun>, page_id: u64, read: Arc<InFlightRead>) {
    match runs.last_mut() {
        Some(run)
            if run.len() < MAX_PREFETCH_RUN
                && run.last().is_some_and(|&(last, _)| last + 1 == page_id) =>
        {
            run.push((page_id, read))
        }
        _ => runs.push(vec![(page_id, read)]),
    }
}

impl<P: Policy> BufferManager<P> {
    /// Most leaves a scan should request ahead (0 when prefetching is off).
    pub(crate) fn prefetch_depth(&self) -> usize {
        self.prefetch_depth
    }

    /// Starts asynchronous reads of the pages `children` (swip offset, page id) of the hot
    /// node in `parent`, for those still unswizzled there and neither cooling nor being read.
    /// Outside any epoch. Best effort: if the parent is latched exclusively, nothing happens.
    ///
    /// The parent's shared latch is what makes this safe: a page is only swizzled under its
    /// parent's exclusive latch, so while the shared one is held an unswizzled swip means
    /// that the page is not hot, and registering the read cannot create a second copy.
    pub(crate) fn prefetch(&self, parent: FrameId, children: &[(usize, u64)]) {
        if self.prefetch_depth == 0 {
            return;
        }
        let header = self.frame(parent);
        let Some(shared) = header.latch.try_lock_shared() else {
            return;
        };
        if header.state() != FrameState::Hot {
            return;
        }
        let missing: Vec<u64> = children
            .iter()
            .filter(|&&(offset, page_id)| {
                self.unswizzled_child(parent, offset, page_id) && {
                    let stage = self.cooling.lock();
                    !stage.is_resident(page_id) && stage.in_flight(page_id).is_none()
                }
            })
            .map(|&(_, page_id)| page_id)
            .collect();
        // Wait until half the window is used up, so that requests come in runs of
        // consecutive pages that one read can serve, not one page per leaf.
        if missing.is_empty() || missing.len() * 2 < children.len() {
            return;
        }
        let mut runs: Vec<PrefetchRun> = Vec::new();
        {
            // Swizzling needs the parent's exclusive latch, so none of `missing` became hot;
            // another scan may have requested some meanwhile.
            let mut stage = self.cooling.lock();
            for page_id in missing {
                if stage.is_resident(page_id) || stage.in_flight(page_id).is_some() {
                    continue;
                }
                add_to_runs(&mut runs, page_id, stage.start_read(page_id));
            }
        }
        drop(shared);
        self.submit_runs(runs);
    }

    /// Starts asynchronous reads of the pages descents stopped at (see [`ReadAhead`]), each
    /// only if its parent still shows the version the descent saw, latched shared (then the
    /// swip is the one the descent read, and unswizzled: the page is not hot), and the page is
    /// neither cooling nor being read. Outside any epoch; at most [`Self::prefetch_depth`]
    /// targets at a time (more would evict each other from the cooling stage before they are
    /// used). Best effort: a parent that changed or is latched exclusively is skipped, and
    /// without read-ahead threads nothing is read: the lookups that follow read those pages.
    pub(crate) fn read_ahead(&self, targets: &mut [ReadAhead]) {
        debug_assert!(targets.len() <= self.prefetch_depth.max(1));
        if self.prefetch_depth == 0 || self.check_open().is_err() {
            return;
        }
        targets.sort_unstable_by_key(|target| target.page_id);
        let mut runs: Vec<PrefetchRun> = Vec::new();
        for target in targets.iter() {
            let header = self.frame(target.parent);
            let Some(_shared) = header.latch.try_lock_shared() else {
                continue;
            };
            if header.latch.validate(target.version).is_err()
                || header.state() != FrameState::Hot
                || !self.unswizzled_child(target.parent, target.offset, target.page_id)
            {
                continue;
            }
            let mut stage = self.cooling.lock();
            if stage.is_resident(target.page_id) || stage.in_flight(target.page_id).is_some() {
                continue;
            }
            add_to_runs(&mut runs, target.page_id, stage.start_read(target.page_id));
        }
        self.submit_runs(runs);
    }

    /// The position of the first of `page_ids` not being read (read ahead and arrived, or
    /// never read ahead), if any: whose key a lookup of many can answer without waiting.
    pub(crate) fn first_not_in_flight(
        &self,
        page_ids: impl IntoIterator<Item = u64>,
    ) -> Option<usize> {
        let stage = self.cooling.lock();
        page_ids
            .into_iter()
            .position(|page_id| stage.in_flight(page_id).is_none())
    }

    /// Whether `page_id` is in the cooling stage or being read: read-ahead skips it.
    #[cfg(test)]
    pub(crate) fn cooling_or_in_flight(&self, page_id: u64) -> bool {
        let stage = self.cooling.lock();
        stage.is_resident(page_id) || stage.in_flight(page_id).is_some()
    }

    /// Whether the child `page_id` at swip `offset` of `parent` (latched, at least shared)
    /// is allocated and still unswizzled there (not hot); whether it is cooling or being read
    /// the caller asks the cooling stage, under the lock it registers the read with.
    fn unswizzled_child(&self, parent: FrameId, offset: usize, page_id: u64) -> bool {
        // A page id read from a page: one beyond the file is left for the operation to
        // meet (as corruption), not read ahead.
        if !self.page_ids.lock().is_allocated(page_id) {
            return false;
        }
        let unswizzled = self
            .page(parent)
            .swip(offset)
            .is_some_and(|swip| swip.word() == Swip::unswizzled_word(page_id));
        if !unswizzled {
            return false;
        }
        let shard = (!P::SWIZZLING).then(|| self.translation.shard(page_id));
        !shard
            .as_ref()
            .is_some_and(|shard| shard.contains_key(&page_id))
    }

    /// Hands registered reads to the ring or the I/O threads, or, shut down meanwhile,
    /// completes them here: a registered read must end.
    fn submit_runs(&self, runs: Vec<PrefetchRun>) {
        if runs.is_empty() {
            return;
        }
        if let Some(ring) = &self.ring_reads {
            return self.start_on_ring(ring, runs);
        }
        let runs = match &*self.prefetcher.lock() {
            Some(prefetcher) => return prefetcher.submit(runs),
            None => runs,
        };
        // Outside the prefetcher's mutex: these reads may take a while.
        let mut buffer = AlignedBuf::new(0);
        for run in runs {
            self.complete_prefetch(&run, &mut buffer);
        }
    }

    /// A prefetch thread's half of [`prefetch`](Self::prefetch): reads a run of consecutive
    /// pages with one I/O into `buffer` (grown as needed) and completes it.
    fn complete_prefetch(&self, run: &[(u64, Arc<InFlightRead>)], buffer: &mut AlignedBuf) {
        let Some(&(first, _)) = run.first() else {
            return;
        };
        let page_size = self.page_size();
        if buffer.len() < run.len() * page_size {
            *buffer = AlignedBuf::new(MAX_PREFETCH_RUN * page_size);
        }
        let bytes = &mut buffer[..run.len() * page_size];
        let read = self.storage.read_at(bytes, first * page_size as u64);
        self.complete_run(run, read.map(|()| &*bytes));
    }

    /// Moves each verified page of a run's `read` into a frame of the cooling stage and ends
    /// its in-flight entry. Pages that fail are left for the operation that needs them to
    /// read (and meet the error) itself.
    pub(super) fn complete_run(
        &self,
        run: &[(u64, Arc<InFlightRead>)],
        read: std::io::Result<&[u8]>,
    ) {
        let page_size = self.page_size();
        for (index, (page_id, in_flight)) in run.iter().enumerate() {
            let frame = match &read {
                Ok(bytes) => self.obtain_frame().ok().and_then(|frame| {
                    let page = &bytes[index * page_size..(index + 1) * page_size];
                    // SAFETY: the frame was just taken from the free list and is published
                    // (pushed into the cooling stage by `end_read`) after this slice is dead.
                    let target = unsafe { self.pool.page_bytes_unpublished(frame) };
                    target.copy_from_slice(page);
                    let checked = self.check_image(target, *page_id);
                    self.take_in(frame, *page_id, checked).ok()
                }),
                Err(_) => None,
            };
            // Counted before the page is published: whoever finds it sees its read counted.
            if frame.is_some() {
                self.count(Counter::PrefetchReads, 1);
            }
            self.end_read(*page_id, in_flight, frame);
        }
    }
}
