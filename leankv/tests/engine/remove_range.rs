//! `Tree::remove_range`: whole leaves are cut out (the log grows by far less than removing the
//! keys one by one would write), their pages are freed and reused, the count and contents stay
//! exact through reopens with and without the log and with a pool far smaller than the tree,
//! and it runs safely next to inserts and scans. Crash atomicity: `crash_recovery.rs`.

use crate::common::{key, open, small, value_for};
use leankv::Options;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn cuts_out_whole_leaves_frees_their_pages_and_keeps_the_rest() {
    for (log, frames) in [(true, 64), (false, 64), (true, 4096)] {
        let dir = tempfile::tempdir().unwrap();
        let options = small(frames).write_ahead_log(log);
        let db = open(dir.path(), options.clone());
        let tree = db.open_tree("t").unwrap();
        let keys = 60_000;
        for n in 0..keys {
            tree.insert(key(n), value_for(n, 0, 40)).unwrap();
        }
        let pages_before = db.check_integrity().unwrap().pages;
        let log_before = db.stats().log_bytes_written;
        // 90% from the middle, from inside one leaf to inside another.
        let (low, high) = (keys / 20 + 3, keys - keys / 20 - 3);
        let removed = tree.remove_range(key(low)..key(high)).unwrap();
        assert_eq!(removed, high - low);
        assert_eq!(tree.len().unwrap(), keys - removed);
        db.flush().unwrap();
        if log {
            // Removing the keys one by one logs at least ~25 bytes per key. A step logs the
            // pages it changes and cuts out only leaves already in memory: a pool of 64 frames
            // holds few of the ~900 leaves, so its steps are many, and how many depends on how
            // far the read-ahead got (7.7-10.1 bytes per key in 45 runs); a pool holding them
            // all cuts out a parent's leaves in one step (~1 byte per key).
            let logged = db.stats().log_bytes_written - log_before;
            let bound = if frames == 64 {
                removed * 25 / 2
            } else {
                removed * 2
            };
            assert!(logged < bound, "{logged} bytes of log for {removed} keys");
        }
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "{report}");
        assert!(
            report.pages * 5 < pages_before,
            "{} of {pages_before} pages left",
            report.pages
        );
        let expected: Vec<u64> = (0..low).chain(high..keys).collect();
        let check = |tree: &leankv::Tree| {
            let found: Vec<Vec<u8>> = tree.iter().map(|item| item.unwrap().0).collect();
            assert_eq!(found, expected.iter().map(|&n| key(n)).collect::<Vec<_>>());
            assert_eq!(tree.len().unwrap(), expected.len() as u64);
            assert_eq!(tree.get(key(low)).unwrap(), None);
            assert_eq!(
                tree.get(key(high)).unwrap(),
                Some(value_for(high, 0, 40)),
                "the excluded end stays"
            );
        };
        check(&tree);
        // Freed pages are reused: once the keys are back, few pages of the file are free.
        db.close().unwrap();
        let db = open(dir.path(), options);
        let tree = db.open_tree("t").unwrap();
        check(&tree);
        for n in low..high {
            tree.insert(key(n), value_for(n, 1, 40)).unwrap();
        }
        let in_use = db.check_integrity().unwrap().pages;
        let page_count = db.stats().page_count;
        assert!(
            page_count - 1 - in_use < page_count / 10,
            "log {log} frames {frames}: {in_use} of {page_count} pages in use after refilling"
        );
        assert_eq!(tree.len().unwrap(), keys);
        // Everything, then nothing is left to remove.
        assert_eq!(tree.remove_range::<&[u8], _>(..).unwrap(), keys);
        assert_eq!(tree.remove_range::<&[u8], _>(..).unwrap(), 0);
        assert!(tree.is_empty().unwrap());
        assert_eq!(tree.first().unwrap(), None);
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "{report}");
        assert!(
            report.pages <= 3,
            "{} pages left in an empty tree",
            report.pages
        );
        db.close().unwrap();
    }
}

type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

#[test]
fn bounds_of_every_kind_remove_exactly_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(128));
    let tree = db.open_tree("t").unwrap();
    let fill = |tree: &leankv::Tree| {
        for n in 0..3_000 {
            tree.insert(key(n), value_for(n, 0, 100)).unwrap();
        }
    };
    let cases: Vec<KeyRange> = vec![
        (Bound::Included(key(10)), Bound::Included(key(2_000))),
        (Bound::Excluded(key(10)), Bound::Excluded(key(2_000))),
        (Bound::Unbounded, Bound::Excluded(key(1_500))),
        (Bound::Excluded(key(1_500)), Bound::Unbounded),
        (Bound::Included(key(7)), Bound::Included(key(7))),
        (Bound::Excluded(key(7)), Bound::Included(key(7))),
        (Bound::Included(key(9)), Bound::Excluded(key(8))),
        (
            Bound::Included(b"a".to_vec()),
            Bound::Excluded(b"b".to_vec()),
        ),
        (Bound::Included(b"z".to_vec()), Bound::Unbounded),
    ];
    for (start, end) in cases {
        fill(&tree);
        let expected: Vec<u64> = (0..3_000)
            .filter(|&n| (start.clone(), end.clone()).contains(&key(n)))
            .collect();
        let removed = tree.remove_range((start.clone(), end.clone())).unwrap();
        assert_eq!(removed, expected.len() as u64, "{start:?}..{end:?}");
        assert_eq!(tree.len().unwrap(), 3_000 - removed);
        for n in [
            0, 7, 8, 9, 10, 11, 1_499, 1_500, 1_501, 1_999, 2_000, 2_001, 2_999,
        ] {
            assert_eq!(
                tree.contains_key(key(n)).unwrap(),
                !expected.contains(&n),
                "{start:?}..{end:?}: key {n}"
            );
        }
        assert!(db.check_integrity().unwrap().is_ok());
    }
    let too_long = vec![b'k'; db.max_key_size() + 1];
    assert!(matches!(
        tree.remove_range(too_long..),
        Err(leankv::Error::KeyTooLarge { .. })
    ));
}

#[test]
fn runs_next_to_inserts_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(256));
    let tree = db.open_tree("t").unwrap();
    // Keys 0..40_000 step 2; the writer inserts odd keys meanwhile; the removal takes
    // 10_000..30_000.
    for n in (0..40_000).step_by(2) {
        tree.insert(key(n), value_for(n, 0, 60)).unwrap();
    }
    let removing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut inserted = Vec::new();
            for n in (1..40_000).step_by(2) {
                tree.insert(key(n), value_for(n, 1, 60)).unwrap();
                inserted.push(n);
                if !removing.load(Ordering::Acquire) && n > 30_000 {
                    break;
                }
            }
            inserted
        });
        let scanner = scope.spawn(|| {
            let mut scans = 0;
            while removing.load(Ordering::Acquire) || scans < 3 {
                let mut previous: Option<Vec<u8>> = None;
                for item in tree.range(key(5_000)..key(35_000)) {
                    let (found, _) = item.unwrap();
                    assert!(previous.as_ref().is_none_or(|p| *p < found), "order broken");
                    previous = Some(found);
                }
                scans += 1;
            }
        });
        let removed = tree.remove_range(key(10_000)..key(30_000)).unwrap();
        removing.store(false, Ordering::Release);
        let inserted = writer.join().unwrap();
        scanner.join().unwrap();
        // Every even key in the range was there from the start: all of them went.
        assert!(removed >= 10_000, "removed {removed}");
        for n in (10_000..30_000).step_by(2) {
            assert!(!tree.contains_key(key(n)).unwrap(), "key {n} survived");
        }
        // Every key outside the range is there, and odd keys inside it are there or not as
        // the race went: the count says exactly what is there.
        for n in (0..10_000).chain(30_000..40_000) {
            let expected = n % 2 == 0 || inserted.contains(&n);
            assert_eq!(tree.contains_key(key(n)).unwrap(), expected, "key {n}");
        }
        assert_eq!(tree.len().unwrap(), tree.iter().count() as u64);
    });
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_tree_larger_than_the_pool_loses_a_range_by_reading_only_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default()
        .page_size(4096)
        .pool_size(96 * (4096 + 512));
    let db = open(dir.path(), options);
    let tree = db.open_tree("t").unwrap();
    for n in 0..50_000 {
        tree.insert(key(n), value_for(n, 0, 80)).unwrap();
    }
    assert!(db.stats().evictions > 0);
    assert_eq!(tree.remove_range(key(1)..key(49_999)).unwrap(), 49_998);
    assert_eq!(tree.len().unwrap(), 2);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(report.pages < 10, "{report:?}");
}

#[test]
fn a_removal_that_fails_halfway_fails_the_log_and_is_all_or_nothing_after_reopening() {
    use leankv::testing::{FaultKind, FaultyStorage, FileStorage, Storage};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| -> Arc<dyn Storage> {
        Arc::new(FileStorage::open(&dir.path().join(name), false).unwrap())
    };
    let (pages, logs) = (
        file("leankv.pages"),
        [file("leankv.wal-0"), file("leankv.wal-1")],
    );
    let faulty = Arc::new(FaultyStorage::new(pages.clone()));
    let db =
        leankv::Db::open_with_files(dir.path(), small(32), faulty.clone(), logs.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    for n in 0..20_000 {
        tree.insert(key(n), value_for(n, 0, 100)).unwrap();
    }
    db.flush().unwrap();
    // The removal must read leaves back: the reads fail after a few.
    faulty.fail_reads(20, u64::MAX, FaultKind::Fail(std::io::ErrorKind::Other));
    assert!(tree.remove_range(key(1_000)..key(19_000)).is_err());
    // Part of the removal is logged: no later commit may be acknowledged.
    faulty.heal();
    assert!(tree.insert(key(0), "after").is_err());
    drop(tree);
    let _ = db.close();
    let db = leankv::Db::open_with_files(dir.path(), small(32), pages, logs).unwrap();
    let tree = db.open_tree("t").unwrap();
    let keys = tree.iter().count();
    assert!(
        keys == 20_000 || keys == 2_000,
        "{keys} keys: the range is partly there"
    );
    assert_eq!(tree.get(key(0)).unwrap(), Some(value_for(0, 0, 100)));
    assert_eq!(tree.len().unwrap(), keys as u64);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    eprintln!("{keys} keys after reopening; {:?}", db.stats().recovery);
}
