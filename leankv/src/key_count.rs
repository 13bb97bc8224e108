//! Exact key counts per tree, for `Tree::len` without a scan.
//!
//! Each tree has a counter that every write changes as it changes the tree's keys (+1 for a
//! put that adds a key, -1 for a removal), once the write's record has its place in the log and
//! before the record is filled in. A checkpoint record takes every counter once every record
//! placed before it is filled in (and none can be placed meanwhile), so its counts are exactly
//! those of its place in the log; recovery starts from them and adds the change of
//! every leaf record after it. Without the log (or after a log written before counts were
//! kept), a count is unknown at open, and the first `len` of the tree counts it by a scan.
//!
//! A count is striped: each thread counts the keys its writes add and remove in its own stripe
//! (on its own cache line), and the count is the sum of the stripes' additions minus the sum of
//! their removals. One shared word was ~1% of a TPC-C transaction at 2 threads (its line moved
//! between the workers at every insert of an order line) and would be worse with more. The
//! removals are summed first: a key's removal is counted after its addition (the remover found
//! the key under the latch the adder released), so a count read while writes run is never
//! below the count at some moment of the read (it never wraps), though it may count some of
//! the writes that run meanwhile.
//!
//! Invariant: a known count equals the number of keys in its tree once the writes that
//! changed it are complete (a write changes its tree and its count under its leaf's latch).

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Stripes per count: threads take them in turn, by the order in which each first changes a
/// count. About 1 KiB per tree.
const STRIPES: usize = 8;

thread_local! {
    /// The stripe this thread changes.
    static STRIPE: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
    };
}

/// One stripe of a tree's key count: the keys its threads' writes added and removed (both only
/// grow, but for [`KeyCount::set_counted`]).
#[derive(Debug, Default)]
pub(crate) struct KeyStripe {
    added: AtomicU64,
    removed: AtomicU64,
}

impl KeyStripe {
    /// Counts `keys` keys added. Release: see [`KeyCount::get`].
    pub(crate) fn add(&self, keys: u64) {
        self.added.fetch_add(keys, Ordering::Release);
    }

    /// Counts `keys` keys removed. Release: see [`KeyCount::get`].
    pub(crate) fn remove(&self, keys: u64) {
        self.removed.fetch_add(keys, Ordering::Release);
    }

    /// Keys added minus keys removed in this stripe alone.
    #[cfg(test)]
    pub(crate) fn net(&self) -> u64 {
        let removed = self.removed.load(Ordering::Acquire);
        self.added.load(Ordering::Acquire).wrapping_sub(removed)
    }
}

/// One tree's key count.
#[derive(Debug, Default)]
pub(crate) struct KeyCount {
    stripes: [CachePadded<KeyStripe>; STRIPES],
    known: AtomicBool,
}

impl KeyCount {
    fn known(keys: u64) -> KeyCount {
        let count = KeyCount::default();
        count.set_counted(keys);
        count
    }

    /// The stripe this thread's writes change.
    pub(crate) fn stripe(&self) -> &KeyStripe {
        &self.stripes[STRIPE.with(|stripe| *stripe)]
    }

    /// The count, if known: exact while no write runs; while writes run, it counts every write
    /// that completed before the call and may count some that run meanwhile. The removals are
    /// read first, with acquire: a removal seen there was counted after its key's addition
    /// (which the remover's latch saw), so the additions read next include it.
    pub(crate) fn get(&self) -> Option<u64> {
        if !self.known.load(Ordering::Acquire) {
            return None;
        }
        let sum = |side: fn(&KeyStripe) -> &AtomicU64| {
            self.stripes.iter().fold(0u64, |sum, stripe| {
                sum.wrapping_add(side(stripe).load(Ordering::Acquire))
            })
        };
        let removed = sum(|stripe| &stripe.removed);
        let added = sum(|stripe| &stripe.added);
        Some(added.saturating_sub(removed))
    }

    /// Sets the count (found by a scan: exact if no write ran meanwhile; or saved).
    pub(crate) fn set_counted(&self, keys: u64) {
        for (index, stripe) in self.stripes.iter().enumerate() {
            stripe.removed.store(0, Ordering::Release);
            stripe
                .added
                .store(if index == 0 { keys } else { 0 }, Ordering::Release);
        }
        self.known.store(true, Ordering::Release);
    }
}

/// The key counts of a database's trees, by root page id.
#[derive(Debug, Default)]
pub(crate) struct KeyCounts {
    trees: Mutex<HashMap<u64, Arc<KeyCount>>>,
    /// Trees counted by a scan since open (see `Stats::trees_counted_by_scan`).
    scans: AtomicU64,
}

impl KeyCounts {
    /// The counts recovery found (`None`: none are known).
    pub(crate) fn recovered(counts: Option<HashMap<u64, u64>>) -> KeyCounts {
        let trees = counts
            .unwrap_or_default()
            .into_iter()
            .map(|(root, keys)| (root, Arc::new(KeyCount::known(keys))))
            .collect();
        KeyCounts {
            trees: Mutex::new(trees),
            scans: AtomicU64::new(0),
        }
    }

    /// The count of the tree whose root is page `root` (unknown if none was kept).
    pub(crate) fn of(&self, root: u64) -> Arc<KeyCount> {
        self.trees.lock().entry(root).or_default().clone()
    }

    /// The count of the tree whose root is page `root`, if kept and known.
    pub(crate) fn get(&self, root: u64) -> Option<u64> {
        self.trees.lock().get(&root)?.get()
    }

    /// The count of a tree just created at `root`: empty.
    pub(crate) fn created(&self, root: u64) -> Arc<KeyCount> {
        let count = Arc::new(KeyCount::known(0));
        self.trees.lock().insert(root, count.clone());
        count
    }

    /// Forgets the count of the tree whose root was page `root`: the tree was dropped.
    pub(crate) fn dropped(&self, root: u64) {
        self.trees.lock().remove(&root);
    }

    /// Sets `count` to what a scan of its tree found.
    pub(crate) fn counted_by_scan(&self, count: &KeyCount, keys: u64) {
        count.set_counted(keys);
        self.scans.fetch_add(1, Ordering::Relaxed);
    }

    /// How many trees were counted by a scan since open.
    pub(crate) fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }

    /// Every known count, for a checkpoint record.
    pub(crate) fn snapshot(&self) -> Vec<(u64, u64)> {
        let trees = self.trees.lock();
        let mut counts: Vec<(u64, u64)> = trees
            .iter()
            .filter_map(|(&root, count)| Some((root, count.get()?)))
            .collect();
        counts.sort_unstable();
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_every_threads_additions_minus_every_threads_removals() {
        let count = KeyCount::known(10);
        std::thread::scope(|scope| {
            for thread in 0..2 * STRIPES as u64 {
                let count = &count;
                scope.spawn(move || {
                    // Even threads add 100 keys, odd ones 100 and remove 140: some threads
                    // remove keys that others added.
                    count.stripe().add(100);
                    if thread % 2 == 1 {
                        for _ in 0..140 {
                            count.stripe().remove(1);
                        }
                    }
                });
            }
        });
        let threads = 2 * STRIPES as u64;
        assert_eq!(count.get(), Some(10 + threads * 100 - threads / 2 * 140));
        count.set_counted(7);
        assert_eq!(count.get(), Some(7));
        assert_eq!(KeyCount::default().get(), None);
    }

    #[test]
    fn a_count_read_while_keys_come_and_go_stays_within_what_was_there() {
        // A thread adds a key and another removes it, in turns (on other stripes: stripes go
        // by thread creation), while a reader reads the count: it must never see fewer than
        // the 5 keys that stay, nor a wrapped count (more is allowed: additions made while
        // it reads may count without their removals). Twice, the remover created first in the
        // second pass, so that the reader meets the two stripes in either order.
        let rounds = if cfg!(miri) { 20 } else { 20_000 };
        for remover_first in [false, true] {
            let count = KeyCount::known(5);
            let (added, removed) = (AtomicU64::new(0), AtomicU64::new(0));
            let wait_until = |counter: &AtomicU64, value: u64| {
                while counter.load(Ordering::Acquire) < value {
                    std::thread::yield_now();
                }
            };
            let add = || {
                for round in 1..=rounds {
                    count.stripe().add(1);
                    added.store(round, Ordering::Release);
                    wait_until(&removed, round);
                }
            };
            let remove = || {
                for round in 1..=rounds {
                    // Only a key that was added (as a remover finds it in the tree).
                    wait_until(&added, round);
                    count.stripe().remove(1);
                    removed.store(round, Ordering::Release);
                }
            };
            std::thread::scope(|scope| {
                if remover_first {
                    scope.spawn(remove);
                    scope.spawn(add);
                } else {
                    scope.spawn(add);
                    scope.spawn(remove);
                }
                scope.spawn(|| {
                    while removed.load(Ordering::Acquire) < rounds {
                        let keys = count.get().unwrap();
                        assert!((5..=5 + rounds).contains(&keys), "{keys}");
                    }
                });
            });
            assert_eq!(count.get(), Some(5));
        }
    }
}
