//! `Db::drop_tree`: the tree's name and keys go and its pages are freed for reuse; handles that
//! outlive it fail with `Error::TreeDropped` (also while other threads use it as it is dropped);
//! other trees stay intact; with and without the log, through reopens. Crash atomicity:
//! `crash_recovery.rs`.

use crate::common::{key, open, small, value_for};
use leankv::{Error, WriteBatch};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn drops_names_keys_and_pages_and_handles_fail_afterwards() {
    for log in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let options = small(64).write_ahead_log(log);
        let db = open(dir.path(), options.clone());
        let (doomed, kept) = (
            db.open_tree("doomed").unwrap(),
            db.open_tree("kept").unwrap(),
        );
        for n in 0..20_000 {
            doomed.insert(key(n), value_for(n, 0, 200)).unwrap();
            if n % 4 == 0 {
                kept.insert(key(n), value_for(n, 1, 200)).unwrap();
            }
        }
        let pages_before = db.check_integrity().unwrap().pages;
        assert!(db.drop_tree("doomed").unwrap());
        assert!(!db.drop_tree("doomed").unwrap());
        assert!(!db.drop_tree("never there").unwrap());
        assert_eq!(db.tree_names().unwrap(), ["kept"]);
        // Every use of the old handle fails; a batch that names it changes nothing.
        assert!(matches!(doomed.get(key(1)), Err(Error::TreeDropped)));
        assert!(matches!(
            doomed.insert(key(1), "x"),
            Err(Error::TreeDropped)
        ));
        assert!(matches!(doomed.len(), Err(Error::TreeDropped)));
        assert!(matches!(doomed.is_empty(), Err(Error::TreeDropped)));
        assert!(matches!(
            doomed.iter().next(),
            Some(Err(Error::TreeDropped))
        ));
        assert!(matches!(
            doomed.remove_range(key(0)..key(9)),
            Err(Error::TreeDropped)
        ));
        let mut batch = WriteBatch::new();
        batch.insert(&kept, "batch", "x");
        batch.insert(&doomed, "batch", "x");
        assert!(matches!(db.write(batch), Err(Error::TreeDropped)));
        assert_eq!(kept.get("batch").unwrap(), None);
        // Its pages are free: the other tree alone is left.
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.trees, 2, "the catalog and the kept tree");
        assert!(
            report.pages * 3 < pages_before,
            "{} of {pages_before} pages in use",
            report.pages
        );
        assert_eq!(kept.len().unwrap(), 5_000);
        // The name starts a new, empty tree whose pages reuse the freed ones.
        let page_count = db.stats().page_count;
        let reborn = db.open_tree("doomed").unwrap();
        assert!(reborn.is_empty().unwrap());
        for n in 0..10_000 {
            reborn.insert(key(n), value_for(n, 2, 200)).unwrap();
        }
        assert_eq!(db.stats().page_count, page_count, "freed pages are reused");
        drop((doomed, reborn, kept));
        db.close().unwrap();
        let db = open(dir.path(), options);
        let (reborn, kept) = (
            db.open_tree("doomed").unwrap(),
            db.open_tree("kept").unwrap(),
        );
        assert_eq!(
            (reborn.len().unwrap(), kept.len().unwrap()),
            (10_000, 5_000)
        );
        assert_eq!(reborn.get(key(3)).unwrap(), Some(value_for(3, 2, 200)));
        assert_eq!(kept.get(key(4)).unwrap(), Some(value_for(4, 1, 200)));
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "{report}");
        db.close().unwrap();
    }
}

#[test]
fn a_tree_dropped_while_threads_use_it_fails_them_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(128));
    let (doomed, kept) = (
        db.open_tree("doomed").unwrap(),
        db.open_tree("kept").unwrap(),
    );
    for n in 0..10_000 {
        doomed.insert(key(n), value_for(n, 0, 100)).unwrap();
    }
    let dropped = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..3u64)
            .map(|thread| {
                let (doomed, kept, dropped) = (doomed.clone(), &kept, &dropped);
                scope.spawn(move || {
                    // Writes, reads and scans until the tree is gone, then a few more.
                    let mut after = 0;
                    for n in 0u64.. {
                        let outcome = match n % 3 {
                            0 => doomed.insert(key(n + thread), "new"),
                            1 => doomed.get(key(n)).map(drop),
                            _ => doomed
                                .range(key(n)..)
                                .take(50)
                                .try_for_each(|item| item.map(drop)),
                        };
                        match outcome {
                            Ok(()) => assert!(after == 0, "an operation succeeded after a failure"),
                            Err(Error::TreeDropped) => after += 1,
                            Err(other) => panic!("unexpected error {other}"),
                        }
                        kept.insert(key(thread * 1_000_000 + n), "kept").unwrap();
                        if after > 100 || (dropped.load(Ordering::Acquire) && after > 0) {
                            return n;
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(db.drop_tree("doomed").unwrap());
        dropped.store(true, Ordering::Release);
        for worker in workers {
            worker.join().unwrap();
        }
    });
    assert!(matches!(doomed.get(key(0)), Err(Error::TreeDropped)));
    assert_eq!(db.tree_names().unwrap(), ["kept"]);
    assert_eq!(kept.len().unwrap(), kept.iter().count() as u64);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
}
