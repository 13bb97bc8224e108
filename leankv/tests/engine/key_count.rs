//! `Tree::len` is exact through every kind of write, concurrent writers, clean reopens with and
//! without the write-ahead log, and the scan that counts a tree whose count was lost (a crash
//! without the log). Crash recovery of the count: `crash_recovery.rs` and `kill_loop.rs`.

use crate::common::{key, open, small, value_for};
use leankv::testing::{CrashSimulator, Storage};
use leankv::{Db, Options, WriteBatch};
use std::sync::Arc;

/// Every write that changes the key count, each checked against the keys present.
fn write_everything(db: &Db) {
    let tree = db.open_tree("t").unwrap();
    let other = db.open_tree("other").unwrap();
    assert_eq!((tree.len().unwrap(), tree.is_empty().unwrap()), (0, true));
    for n in 0..500 {
        tree.insert(key(n), value_for(n, 0, 300)).unwrap();
    }
    // Overwrites, removals of present and absent keys.
    for n in 0..100 {
        tree.insert(key(n), value_for(n, 1, 300)).unwrap();
        assert!(tree.remove(key(n + 100)).unwrap());
        assert!(!tree.remove(key(n + 10_000)).unwrap());
    }
    assert_eq!(tree.len().unwrap(), 400);
    // A batch over two trees: two new keys, one overwrite, one removal, one absent removal.
    let mut batch = WriteBatch::new();
    batch.insert(&tree, key(20_000), "new");
    batch.insert(&tree, key(20_001), "new");
    batch.insert(&tree, key(0), "overwritten");
    batch.remove(&tree, key(1));
    batch.remove(&tree, key(30_000));
    batch.insert(&other, "x", "y");
    db.write(batch).unwrap();
    assert_eq!((tree.len().unwrap(), other.len().unwrap()), (401, 1));
    // Conditional writes: insert-if-absent, a failed swap, remove-if-equal, a read-modify-write
    // that removes.
    assert!(tree
        .compare_and_swap(key(40_000), None, Some(b"v"))
        .unwrap()
        .is_ok());
    assert!(tree
        .compare_and_swap(key(40_000), None, Some(b"w"))
        .unwrap()
        .is_err());
    assert!(tree
        .compare_and_swap(key(40_000), Some(b"v"), None)
        .unwrap()
        .is_ok());
    tree.fetch_update(key(2), |_| None).unwrap();
    tree.fetch_update(key(50_000), |_| Some(b"made".to_vec()))
        .unwrap();
    assert_eq!(tree.len().unwrap(), 401);
    assert_eq!(tree.len().unwrap(), tree.iter().count() as u64);
}

#[test]
fn the_count_follows_every_write_and_survives_clean_reopens() {
    for log in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let options = || small(64).write_ahead_log(log);
        let db = open(dir.path(), options());
        write_everything(&db);
        db.close().unwrap();
        let db = open(dir.path(), options());
        let tree = db.open_tree("t").unwrap();
        assert_eq!(tree.len().unwrap(), 401, "log {log}");
        assert_eq!(db.open_tree("other").unwrap().len().unwrap(), 1);
        // Kept, not counted again.
        assert_eq!(db.stats().trees_counted_by_scan, 0, "log {log}");
        // And it goes on counting after the reopen.
        tree.insert(key(60_000), "").unwrap();
        assert_eq!(tree.len().unwrap(), 402);
        db.close().unwrap();
        let db = open(dir.path(), options());
        assert_eq!(db.open_tree("t").unwrap().len().unwrap(), 402, "log {log}");
        assert_eq!(db.stats().trees_counted_by_scan, 0, "log {log}");
        db.close().unwrap();
    }
}

/// A database kept without the log and opened after a crash (`open_after_crash`) has no
/// trustworthy count: the first `len` counts the tree, and counting goes on from there.
#[test]
fn a_count_lost_in_a_crash_without_the_log_is_counted_again() {
    let dir = tempfile::tempdir().unwrap();
    let options = || small(64).write_ahead_log(false);
    let sim = CrashSimulator::new();
    let files = ["pages", "wal-0", "wal-1"].map(|name| sim.storage(name) as Arc<dyn Storage>);
    let open_files = |files: &[Arc<dyn Storage>; 3], options: Options| {
        let [pages, wal0, wal1] = files.clone();
        Db::open_with_files(dir.path(), options, pages, [wal0, wal1]).unwrap()
    };
    let db = open_files(&files, options());
    let tree = db.open_tree("t").unwrap();
    for n in 0..300 {
        tree.insert(key(n), value_for(n, 0, 100)).unwrap();
    }
    // Everything written and synced, but the database is still open when the crash comes.
    db.flush().unwrap();
    sim.crash();
    drop(tree);
    drop(db);
    let recovered = sim.recover(7);
    let files = ["pages", "wal-0", "wal-1"].map(|name| recovered.storage(name) as Arc<dyn Storage>);
    let db = open_files(&files, options().open_after_crash(true));
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap(), 300);
    assert_eq!(db.stats().trees_counted_by_scan, 1);
    tree.insert(key(1_000), "").unwrap();
    assert!(tree.remove(key(0)).unwrap());
    assert_eq!(tree.len().unwrap(), 300);
    drop(tree);
    db.close().unwrap();
    // Closed cleanly, the count is saved again.
    let db = open_files(&files, options());
    assert_eq!(db.open_tree("t").unwrap().len().unwrap(), 300);
    assert_eq!(db.stats().trees_counted_by_scan, 0);
}

/// Threads insert and remove overlapping keys (new keys, overwrites, removals of present and
/// absent keys) with a small pool: afterwards the count is the number of keys present.
#[test]
fn concurrent_writers_leave_an_exact_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(48));
    let tree = db.open_tree("t").unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let tree = &tree;
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(thread);
                for n in 0..3_000 {
                    let key = key(rng.u64(..2_000));
                    if rng.u8(..3) == 0 {
                        tree.remove(&key).unwrap();
                    } else {
                        tree.insert(&key, value_for(n, thread, 150)).unwrap();
                    }
                }
            });
        }
    });
    assert!(db.stats().evictions > 0, "the pool must have evicted");
    assert_eq!(tree.len().unwrap(), tree.iter().count() as u64);
    drop(tree);
    db.close().unwrap();
    let db = Db::open(dir.path(), small(48)).unwrap();
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap(), tree.iter().count() as u64);
    assert_eq!(db.stats().trees_counted_by_scan, 0);
}
