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
//! Invariant: a known count equals the number of keys in its tree once the writes that
//! changed it are complete (a write changes its tree and its count under its leaf's latch).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One tree's key count.
#[derive(Debug, Default)]
pub(crate) struct KeyCount {
    /// Keys added minus keys removed, wrapping; the count itself once `known`.
    keys: AtomicU64,
    known: AtomicBool,
}

impl KeyCount {
    fn known(keys: u64) -> KeyCount {
        KeyCount {
            keys: AtomicU64::new(keys),
            known: AtomicBool::new(true),
        }
    }

    /// The counter writes change.
    pub(crate) fn counter(&self) -> &AtomicU64 {
        &self.keys
    }

    /// The count, if known.
    pub(crate) fn get(&self) -> Option<u64> {
        self.known
            .load(Ordering::Acquire)
            .then(|| self.keys.load(Ordering::Acquire))
    }

    /// Sets the count (found by a scan: exact if no write ran meanwhile; or saved).
    pub(crate) fn set_counted(&self, keys: u64) {
        self.keys.store(keys, Ordering::Release);
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
