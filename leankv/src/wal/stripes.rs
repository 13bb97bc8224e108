//! Where records are appended: one stripe per few threads, so that concurrent writers do not
//! share an append point (one shared mutex cost YCSB A with two writers about a tenth of its
//! throughput in cache-line transfers alone).
//!
//! A thread appends to its stripe (threads are spread over the stripes in turn) under the
//! stripe's mutex, which only the threads of that stripe and, once per round, the log thread
//! take. A record gets a GSN there, `max(after, stripe clock) + 1`, where `after` is the
//! largest GSN of what the record depends on (the pages it describes, the page-id allocation),
//! and the round it belongs to, read from [`Stripes::round`].
//!
//! Invariants: within a stripe, GSNs and rounds only grow; a record that depends on another
//! (through a page or the page-id lock) has a larger GSN and a round at least as large, because
//! rounds are read under the stripe's mutex after the dependency's latch was taken; the log
//! thread closes round `r` by raising [`Stripes::round`] past it before it collects, so that
//! the records it collects for `r` are exactly those of round `r`.

use super::record::FrameWriter;
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A stripe reports its appended bytes to [`Stripes::queued`] once this many gathered.
const REPORT_BYTES: usize = 128 << 10;
/// Spare buffers a stripe keeps for its next round.
const STRIPE_SPARES: usize = 2;

/// What an append gave a record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Appended {
    /// Orders it among the changes to the pages it describes (stamped on them).
    pub(crate) gsn: u64,
    /// The round that writes it: it is durable once that round is.
    pub(crate) round: u64,
}

/// One stripe's records not yet collected.
#[derive(Default)]
pub(super) struct Stripe {
    /// The GSN of the stripe's last record.
    clock: u64,
    /// Records of round `open_round`, appended to.
    open: Vec<u8>,
    open_round: u64,
    /// Records of earlier rounds, not yet collected.
    sealed: Vec<(u64, Vec<u8>)>,
    spares: Vec<Vec<u8>>,
    /// Bytes appended and not yet reported to `queued`, and reported but not yet collected.
    unreported: usize,
    reported: usize,
    /// Where page images are assembled (see `FrameWriter::scratch`).
    scratch: Vec<u8>,
}

impl Stripe {
    /// Appends what `write` writes as records of `round`, with GSN `max(after, clock) + 1`.
    /// Returns `write`'s result, the record's GSN and the bytes to report to `queued`, if
    /// enough gathered.
    pub(super) fn append<R>(
        &mut self,
        round: u64,
        after: u64,
        write: impl FnOnce(&mut FrameWriter<'_>) -> R,
    ) -> (R, u64, Option<usize>) {
        debug_assert!(round >= self.open_round, "rounds only grow");
        if round != self.open_round {
            if !self.open.is_empty() {
                let fresh = self.spares.pop().unwrap_or_default();
                let sealed = std::mem::replace(&mut self.open, fresh);
                self.sealed.push((self.open_round, sealed));
            }
            self.open_round = round;
        }
        let gsn = after.max(self.clock) + 1;
        self.clock = gsn;
        let before = self.open.len();
        let mut writer = FrameWriter {
            out: &mut self.open,
            gsn,
            scratch: &mut self.scratch,
        };
        let result = write(&mut writer);
        self.unreported += self.open.len() - before;
        let report = (self.unreported >= REPORT_BYTES).then(|| {
            self.reported += self.unreported;
            std::mem::take(&mut self.unreported)
        });
        (result, gsn, report)
    }

    pub(super) fn clock(&self) -> u64 {
        self.clock
    }

    /// Sets the clock (to at least its value): at a checkpoint's start, every later record
    /// gets a GSN above the checkpoint's.
    pub(super) fn advance_clock(&mut self, gsn: u64) {
        debug_assert!(gsn >= self.clock);
        self.clock = gsn;
    }
}

/// The stripes of one log.
pub(super) struct Stripes {
    stripes: Box<[CachePadded<Mutex<Stripe>>]>,
    /// The round records appended now belong to.
    round: CachePadded<AtomicU64>,
    /// Bytes reported by the stripes and not yet collected (within a stripe's
    /// `REPORT_BYTES`).
    queued: CachePadded<AtomicUsize>,
}

/// Hands each thread that appends a stripe index, in turn.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed);
}

impl Stripes {
    /// Stripes for about twice the machine's cores, whose records start after GSN `clock`,
    /// in round 1.
    pub(super) fn new(clock: u64) -> Stripes {
        let count = std::thread::available_parallelism()
            .map_or(4, |cores| cores.get() * 2)
            .clamp(2, 64);
        let stripes = (0..count)
            .map(|_| {
                CachePadded::new(Mutex::new(Stripe {
                    clock,
                    open_round: 1,
                    ..Stripe::default()
                }))
            })
            .collect();
        Stripes {
            stripes,
            round: CachePadded::new(AtomicU64::new(1)),
            queued: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// The calling thread's stripe, locked, and the round its records belong to now.
    pub(super) fn lock_mine(&self) -> (MutexGuard<'_, Stripe>, u64) {
        let index = THREAD_STRIPE.with(|index| *index) % self.stripes.len();
        let stripe = self.stripes[index].lock();
        // Read under the stripe's mutex: see the module notes.
        (stripe, self.round.load(Ordering::Acquire))
    }

    /// Every stripe, locked (in order, so that two callers cannot deadlock): no record is
    /// appended until they are released.
    pub(super) fn lock_all(&self) -> Vec<MutexGuard<'_, Stripe>> {
        self.stripes.iter().map(|stripe| stripe.lock()).collect()
    }

    /// The index of the calling thread's stripe among [`Self::lock_all`]'s guards.
    pub(super) fn my_index(&self) -> usize {
        THREAD_STRIPE.with(|index| *index) % self.stripes.len()
    }

    /// The round records appended now belong to.
    pub(super) fn round(&self) -> u64 {
        self.round.load(Ordering::Acquire)
    }

    /// Adds a stripe's report to the queued bytes; returns the new total.
    pub(super) fn report(&self, bytes: usize) -> usize {
        self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes
    }

    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Closes the current round (records appended from now on belong to the next) and returns
    /// it.
    pub(super) fn close_round(&self) -> u64 {
        self.round.fetch_add(1, Ordering::SeqCst)
    }

    /// Takes every stripe's records of rounds up to `round` (closed) into `taken`, giving
    /// each stripe a buffer from `spares` for the ones taken.
    pub(super) fn collect(&self, round: u64, taken: &mut Vec<Vec<u8>>, spares: &mut Vec<Vec<u8>>) {
        debug_assert!(self.round() > round, "the round is closed");
        for stripe in self.stripes.iter() {
            let mut stripe = stripe.lock();
            let stripe = &mut *stripe;
            let mut took = false;
            while stripe.sealed.first().is_some_and(|(of, _)| *of <= round) {
                taken.push(stripe.sealed.remove(0).1);
                took = true;
            }
            if stripe.open_round <= round && !stripe.open.is_empty() {
                let fresh = spares.pop().unwrap_or_default();
                taken.push(std::mem::replace(&mut stripe.open, fresh));
                took = true;
            }
            if !took {
                continue;
            }
            while stripe.spares.len() < STRIPE_SPARES {
                let Some(spare) = spares.pop() else { break };
                stripe.spares.push(spare);
            }
            // What is left (of the next round) was appended after the round closed: it is
            // reported again as it grows.
            let left = stripe.open.len() * usize::from(stripe.open_round > round)
                + stripe.sealed.iter().map(|(_, b)| b.len()).sum::<usize>();
            let reported = std::mem::take(&mut stripe.reported);
            self.queued.fetch_sub(reported, Ordering::Relaxed);
            stripe.unreported = left;
        }
    }
}
