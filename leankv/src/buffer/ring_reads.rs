//! Read-ahead through one shared io_uring (`read_ring.rs`), reaped by the threads that wait
//! for its pages. A thread that reads ahead starts its runs on the ring and submits them at
//! once; a thread that needs a page being read takes the ring's completions itself: it waits
//! in the kernel for the next one, completes up to [`REAP_ROUND`] of the reads that came back
//! (each page enters the cooling stage as one read on demand would), and goes on as soon as
//! its own page is in; the others stay for later rounds, which take them without a system
//! call. While one thread reaps, the others sleep until a round ends and look again.
//!
//! Reads come back in convoys (~25 at once for a `get_many` window of 32 on the 2-vCPU
//! guests): a waiter that completed a whole convoy (~4 us each) before going on started none
//! of the reads its answers make room for meanwhile, and the device idled. In bounded rounds
//! the reads started as keys are answered overlap the rest of the convoy's completion
//! (`s50-*`, lookups beyond memory through lists of 256 keys: 1.13x at 1 thread, 1.07x at 2).
//!
//! A reading thread that handed completions to another one paid two wake-ups per read (the
//! reader's, then the waiter's) and left new reads queued while it slept in the kernel: on
//! the 2-vCPU guests a reading thread that polled instead of sleeping served ~1.2x the
//! lookups beyond memory, at the cost of a whole vCPU; reaping by the waiters removes the
//! hand-off without the polling.
//!
//! Only a waiter reaps: completing a read takes a frame, which may evict, and read-ahead is
//! asked for from inside epochs and under latches. Completions nobody waits for (pages a scan
//! read ahead and left) hold their slots until the next waiter takes them. Runs that find
//! every slot in use wait in `pending` and are started by whoever reaps next. If the ring
//! fails, its reads are abandoned and later runs end unread: their waiters read the pages
//! themselves, one at a time.
//!
//! *Invariant:* every run a thread waits on ends (completed, or abandoned with its in-flight
//! entries ended), since a waiter reaps, or another reaps for it, until it does; runs nobody
//! waits on may stay in flight or pending until the buffer manager drops them.

use super::policy::Policy;
use super::prefetch::PrefetchRun;
use super::read_ring::ReadRing;
use super::*;
use crate::sync::Event;
use std::collections::VecDeque;
use std::fs::File;

/// Most reads the ring keeps in flight: every worker's batch of read-ahead (at most the
/// depth, 32 by default) at once for a few workers; more wait in `pending`.
const RING_DEPTH: u32 = 64;

/// Most completions one round of reaping takes before its thread looks at what it waits for
/// (see the module notes; 1, 2 and 4 measured alike, 8 less well).
const REAP_ROUND: usize = 4;

/// A bound on one sleep of a waiter: a wake-up missed (a round that completed nothing) costs
/// at most this, never progress.
const WAIT_BOUND: Duration = Duration::from_millis(1);

pub(super) struct RingReads {
    ring: ReadRing<PrefetchRun>,
    /// Runs that found no free slot, started by the next round of reaping.
    pending: Mutex<VecDeque<PrefetchRun>>,
    /// Counts the ends of reads (of any kind) and rounds that completed reads: waiters
    /// sleep on it.
    progress: Event,
    /// The ring failed: runs are read by the threads that ask for them.
    failed: AtomicBool,
}

impl RingReads {
    /// A ring over `file`, or `None` where the kernel refuses io_uring.
    pub(super) fn new(file: File) -> Option<RingReads> {
        Some(RingReads {
            ring: ReadRing::new(file, RING_DEPTH).ok()?,
            pending: Mutex::new(VecDeque::new()),
            progress: Event::default(),
            failed: AtomicBool::new(false),
        })
    }

    /// Wakes the threads waiting for reads to end.
    pub(super) fn notify(&self) {
        self.progress.notify();
    }
}

impl<P: Policy> BufferManager<P> {
    /// Starts registered `runs` on the ring and submits them. Inside an epoch or under a
    /// latch too, so it never completes or waits for a read: if the ring failed, the runs end
    /// unread (whoever needs one of their pages reads it).
    pub(super) fn start_on_ring(&self, ring: &RingReads, runs: Vec<PrefetchRun>) {
        if ring.failed.load(Ordering::Acquire) {
            return runs.iter().for_each(|run| self.end_unread(run));
        }
        let mut runs = runs.into_iter();
        for run in runs.by_ref() {
            if let Err(run) = self.start_run(ring, run) {
                let mut pending = ring.pending.lock();
                pending.push_back(run);
                pending.extend(runs);
                break;
            }
        }
        // A failure here is met again by the next reaper, which submits what is queued
        // before it waits and abandons the ring outside any epoch.
        let _ = ring.ring.submit();
    }

    /// Ends the in-flight entries of a run that will not be read.
    fn end_unread(&self, run: &PrefetchRun) {
        for (page_id, read) in run {
            self.end_read(*page_id, read, None);
        }
    }

    /// Queues one run on the ring; gives it back if every slot is in use.
    fn start_run(
        &self,
        ring: &RingReads,
        run: PrefetchRun,
    ) -> std::result::Result<(), PrefetchRun> {
        let page_size = self.page_size();
        let first = run.first().map_or(0, |&(page_id, _)| page_id);
        ring.ring
            .start(first * page_size as u64, run.len() * page_size, run)
    }

    /// Waits until `read` ends, reaping the ring's completions meanwhile if no other thread
    /// does (see the module notes). Outside any epoch and latch.
    pub(super) fn wait_for_read(&self, read: &InFlightRead) {
        let Some(ring) = &self.ring_reads else {
            return read.wait();
        };
        loop {
            let seen = ring.progress.count();
            if read.is_done() {
                return;
            }
            if !self.reap_ring(ring) {
                ring.progress.wait_past(seen, WAIT_BOUND);
            }
        }
    }

    /// One round of reaping, unless another thread reaps: starts pending runs that fit, then
    /// completes every read that came back, first waiting in the kernel for one if any is in
    /// flight. Whether it started or completed any read.
    fn reap_ring(&self, ring: &RingReads) -> bool {
        debug_assert!(!self.epochs.is_pinned(), "no I/O inside an epoch");
        let started = self.start_pending(ring);
        let reaped = ring
            .ring
            .reap(REAP_ROUND, |run, read| self.complete_run(&run, read));
        let progressed = match reaped {
            Ok(Some(completed)) => completed > 0 || started,
            Ok(None) => started,
            Err(_) => {
                self.fail_ring(ring);
                true
            }
        };
        if progressed {
            ring.notify();
        }
        progressed
    }

    /// Starts pending runs while slots are free; whether it started any.
    fn start_pending(&self, ring: &RingReads) -> bool {
        let mut started = false;
        let mut pending = ring.pending.lock();
        while let Some(run) = pending.pop_front() {
            if let Err(run) = self.start_run(ring, run) {
                pending.push_front(run);
                break;
            }
            started = true;
        }
        drop(pending);
        // A failure to submit is met again by the reaping that follows.
        if started {
            let _ = ring.ring.submit();
        }
        started
    }

    /// After the ring itself failed (not a read): its reads in flight can never be reaped,
    /// so they and the pending runs end unread (their waiters read those pages
    /// themselves), as will later runs. Outside any epoch: it waits for a round under way.
    fn fail_ring(&self, ring: &RingReads) {
        ring.failed.store(true, Ordering::Release);
        let pending: Vec<PrefetchRun> = ring.pending.lock().drain(..).collect();
        for run in ring.ring.abandon().into_iter().chain(pending) {
            self.end_unread(&run);
        }
    }
}
