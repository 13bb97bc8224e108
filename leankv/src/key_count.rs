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
//! A counter is striped: each thread changes its own stripe (each on its own cache line) and
//! the count is their wrapping sum. One shared word was ~1% of a TPC-C transaction at 2 threads
//! (its line moved between the workers at every insert of an order line).
//!
//! Invariant: a known count equals the number of keys in its tree once the writes that
//! changed it are complete (a write changes its tree and its count under its leaf's latch).

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Stripes per counter (threads beyond this share them round robin); 1 KiB per tree.
const STRIPES: usize = 8;

thread_local! {
    /// The stripe this thread changes.
    static STRIPE: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
    };
}

/// One tree's key count.
#[derive(Debug, Default)]
pub(crate) struct KeyCount {
    /// Keys added minus keys removed by each stripe's threads, wrapping; their sum is the
    /// count once `known`.
    stripes: [CachePadded<AtomicU64>; STRIPES],
    known: AtomicBool,
}

impl KeyCount {
    fn known(keys: u64) -> KeyCount {
        let count = KeyCount::default();
        count.set_counted(keys);
        count
    }

    /// The counter this thread's writes change.
    pub(crate) fn counter(&self) -> &AtomicU64 {
        &self.stripes[STRIPE.with(|stripe| *stripe)]
    }

    /// The count, if known.
    pub(crate) fn get(&self) -> Option<u64> {
        self.known.load(Ordering::Acquire).then(|| {
            self.stripes.iter().fold(0, |sum: u64, stripe| {
                sum.wrapping_add(stripe.load(Ordering::Acquire))
            })
        })
    }

    /// Sets the count (found by a scan: exact if no write ran meanwhile; or saved).
    pub(crate) fn set_counted(&self, keys: u64) {
        for stripe in &self.stripes[1..] {
            stripe.store(0, Ordering::Release);
        }
        self.stripes[0].store(keys, Ordering::Release);
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
    fn the_count_is_the_sum_of_every_threads_changes() {
        let count = KeyCount::known(10);
        std::thread::scope(|scope| {
            for thread in 0..2 * STRIPES as u64 {
                let count = &count;
                scope.spawn(move || {
                    // Even threads add 100 keys, odd ones remove 40: some stripes go below
                    // zero (wrapping), the sum must not.
                    for _ in 0..100 {
                        count.counter().fetch_add(1, Ordering::Relaxed);
                    }
                    if thread % 2 == 1 {
                        for _ in 0..140 {
                            count.counter().fetch_sub(1, Ordering::Relaxed);
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
}
