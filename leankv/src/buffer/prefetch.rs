//! Read-ahead for scans (paper §IV-I, "I/O prefetching"): a small pool of I/O threads that
//! perform reads registered in the in-flight table by [`BufferManager::prefetch`], so that
//! the scanning thread keeps working while the next leaves arrive. A job is a run of
//! consecutive pages, read with one I/O (leaves of a tree loaded in key order mostly are).
//!
//! A prefetched page lands in the cooling stage exactly like a page read on demand; the scan
//! that reaches it finds it there (or waits on its in-flight entry) instead of reading it. The
//! threads hold only weak references to the buffer manager. Every job is an in-flight entry
//! other threads may wait on, so each is completed, or at least finished, before its thread
//! lets go of it: none is dropped while queued.

use super::policy::Policy;
use super::{BufferManager, PrefetchRun};
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
    /// Starts `threads` I/O threads for `manager`.
    pub(crate) fn start<P: Policy>(manager: &Arc<BufferManager<P>>, threads: usize) -> Prefetcher {
        let queue = Arc::new(Queue::default());
        let threads = (0..threads)
            .map(|index| {
                let weak = Arc::downgrade(manager);
                let queue = queue.clone();
                std::thread::Builder::new()
                    .name(format!("leankv-prefetch-{index}"))
                    .spawn(move || run(&weak, &queue))
                    .expect("spawning a prefetch thread")
            })
            .collect();
        Prefetcher { queue, threads }
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
            // Nobody can use the pages any more; release whoever might wait.
            None => job.iter().for_each(|(_, read)| read.finish()),
        }
    }
}
