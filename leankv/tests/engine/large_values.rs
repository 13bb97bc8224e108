//! Values longer than a leaf holds: stored in pages of their own, read whole or in parts,
//! through every API that returns values, freed and reused when replaced or removed, across
//! reopens, under concurrent overwrites, and checked by `check_integrity`.

use crate::common::{open, small};
use leankv::testing::{FaultKind, FaultyStorage, FileStorage};
use leankv::{Db, Error, WriteBatch};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A value of `len` bytes that differs from every other (`seed`) at every position.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed * 131) as u8 ^ (i >> 12) as u8)
        .collect()
}

/// Sizes around every boundary: inline limit, one page of payload, several pages.
fn sizes(db: &Db) -> Vec<usize> {
    let inline = db.max_inline_value_size();
    let payload = db.stats().page_size - 24;
    vec![
        inline,
        inline + 1,
        payload - 1,
        payload,
        payload + 1,
        3 * payload,
        100 * payload + 7,
        1 << 20,
    ]
}

#[test]
fn large_values_round_trip_through_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(64));
    let tree = db.open_tree("t").unwrap();
    let sizes = sizes(&db);
    for (n, &len) in sizes.iter().enumerate() {
        tree.insert([n as u8], pattern(n as u64, len)).unwrap();
    }
    for (n, &len) in sizes.iter().enumerate() {
        let expected = pattern(n as u64, len);
        let key = [n as u8];
        assert!(
            tree.get(key).unwrap().unwrap() == expected,
            "get of {len} bytes"
        );
        assert_eq!(tree.value_len(key).unwrap(), Some(len as u64));
        assert!(tree.contains_key(key).unwrap());
        let sum = tree
            .get_with(key, |value| {
                value.iter().map(|&b| u64::from(b)).sum::<u64>()
            })
            .unwrap();
        assert_eq!(sum, Some(expected.iter().map(|&b| u64::from(b)).sum()));
        // Parts: at the start, across page boundaries, at the end, past the end.
        for (offset, part) in [
            (0, 10),
            (len / 2, 5000),
            (len.saturating_sub(3), 10),
            (len + 5, 4),
        ] {
            let got = tree.get_range(key, offset as u64, part).unwrap().unwrap();
            let start = offset.min(len);
            let end = (offset + part).min(len);
            assert!(got == expected[start..end], "part {offset}+{part} of {len}");
        }
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = tree.iter().map(Result::unwrap).collect();
    let reversed: Vec<(Vec<u8>, Vec<u8>)> = tree.iter().rev().map(Result::unwrap).collect();
    assert_eq!(all.len(), sizes.len());
    for (n, (key, value)) in all.iter().enumerate() {
        assert_eq!(key, &[n as u8]);
        assert!(*value == pattern(n as u64, sizes[n]));
    }
    assert!(reversed.into_iter().rev().eq(all.iter().cloned()));
    let mut scanned = 0;
    tree.scan::<&[u8], _>(.., |key, value| {
        assert!(*value == pattern(u64::from(key[0]), sizes[key[0] as usize]));
        scanned += 1;
        true
    })
    .unwrap();
    assert_eq!(scanned, sizes.len());
    assert_eq!(tree.last().unwrap().unwrap().1.len(), 1 << 20);
    assert_eq!(tree.get_range([99u8], 0, 1).unwrap(), None);
    assert_eq!(tree.value_len([99u8]).unwrap(), None);
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn replaced_and_removed_large_values_free_their_pages_for_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(64));
    let tree = db.open_tree("t").unwrap();
    let big = 200 * 4096;
    tree.insert("a", pattern(1, big)).unwrap();
    tree.insert("b", pattern(2, big)).unwrap();
    // Overwrite (large over large, small over large, large over small) and remove, many
    // times, without a flush: the file must not grow with the number of rounds. (Pages freed
    // are reused once the log holding their release is durable: a write that would grow the
    // file makes it durable first.)
    let mut pages_after_warm_up = 0;
    for round in 0..20u64 {
        tree.insert("a", pattern(10 + round, big)).unwrap();
        tree.insert("b", b"small").unwrap();
        tree.insert("b", pattern(100 + round, big - 5000)).unwrap();
        assert!(tree.remove("b").unwrap());
        tree.insert("b", pattern(200 + round, big)).unwrap();
        if round == 2 {
            pages_after_warm_up = db.stats().page_count;
        }
    }
    assert!(
        db.stats().page_count <= pages_after_warm_up + 8,
        "page file grew from {pages_after_warm_up} to {} pages",
        db.stats().page_count
    );
    assert!(tree.get("a").unwrap().unwrap() == pattern(29, big));
    assert!(tree.get("b").unwrap().unwrap() == pattern(219, big));
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    // Everything freed shows as free after a reopen too: no page leaked.
    drop(tree);
    db.close().unwrap();
    let db = open(dir.path(), small(64));
    let tree = db.open_tree("t").unwrap();
    assert!(tree.get("a").unwrap().unwrap() == pattern(29, big));
    assert!(db.check_integrity().unwrap().is_ok());
    assert_eq!(tree.remove_range::<&[u8], _>(..).unwrap(), 2);
    assert!(db.drop_tree("t").unwrap());
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn batches_compare_and_swap_and_fetch_update_carry_large_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(64));
    let (t, u) = (db.open_tree("t").unwrap(), db.open_tree("u").unwrap());
    let big = |seed| pattern(seed, 50_000);
    let mut batch = WriteBatch::new();
    batch.insert(&t, "x", big(1));
    batch.insert(&u, "y", big(2));
    batch.insert(&t, "x", big(3)); // the later change wins; the first value is freed
    db.write(batch).unwrap();
    assert!(t.get("x").unwrap().unwrap() == big(3));
    assert!(u.get("y").unwrap().unwrap() == big(2));

    // Compare-and-swap against a large current value, to a large new one.
    let stale = t
        .compare_and_swap("x", Some(&big(1)), Some(&big(4)))
        .unwrap();
    assert!(stale.unwrap_err().current.unwrap() == big(3));
    t.compare_and_swap("x", Some(&big(3)), Some(&big(4)))
        .unwrap()
        .unwrap();
    assert!(t.get("x").unwrap().unwrap() == big(4));
    t.compare_and_swap("x", Some(&big(4)), None)
        .unwrap()
        .unwrap();
    assert_eq!(t.get("x").unwrap(), None);

    // Read-modify-write that grows a value past the leaf limit and shrinks it back.
    let grow = |old: Option<&[u8]>| {
        let mut value = old.unwrap_or_default().to_vec();
        value.extend_from_slice(&[9; 3000]);
        Some(value)
    };
    for _ in 0..5 {
        u.fetch_update("grow", grow).unwrap();
    }
    assert_eq!(u.value_len("grow").unwrap(), Some(15_000));
    let before = u.fetch_update("grow", |_| Some(b"short".to_vec())).unwrap();
    assert_eq!(before, Some(vec![9; 15_000]));
    match u.update_in_place("y", |bytes| bytes.fill(0)) {
        Err(Error::ValueTooLarge { len, max }) => {
            assert_eq!((len, max), (50_000, db.max_inline_value_size()))
        }
        other => panic!("{other:?}"),
    }
    assert!(u.get("y").unwrap().unwrap() == big(2), "left unchanged");
    drop((t, u));
    db.close().unwrap();
    let db = open(dir.path(), small(64));
    assert!(db.open_tree("u").unwrap().get("y").unwrap().unwrap() == big(2));
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
}

/// A batch that fails while writing its second large value is rolled back: the values it
/// replaced are back, and no page stays allocated for what it wrote (nothing leaks).
#[test]
fn a_batch_failing_at_a_large_value_rolls_back_without_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(FileStorage::open(&dir.path().join("leankv.pages"), false).unwrap());
    let storage = Arc::new(FaultyStorage::new(file.clone()));
    let db = Db::open_with_storage(dir.path(), small(64), storage.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    tree.insert("a", pattern(1, 30_000)).unwrap();
    tree.insert("b", pattern(2, 30_000)).unwrap();
    db.flush().unwrap();
    let mut batch = WriteBatch::new();
    batch.insert(&tree, "a", pattern(3, 30_000));
    batch.remove(&tree, "b");
    batch.insert(&tree, "c", pattern(4, 30_000));
    // The first large value's write goes through, the second one's fails.
    storage.fail_writes(1, 1, FaultKind::NoSpace);
    assert!(matches!(db.write(batch), Err(Error::Io { .. })));
    storage.heal();
    assert!(tree.get("a").unwrap().unwrap() == pattern(1, 30_000));
    assert!(tree.get("b").unwrap().unwrap() == pattern(2, 30_000));
    assert_eq!(tree.get("c").unwrap(), None);
    drop(tree);
    db.close().unwrap();
    let db =
        Db::open_with_storage(dir.path(), small(64), Arc::new(FaultyStorage::new(file))).unwrap();
    let tree = db.open_tree("t").unwrap();
    assert!(tree.get("a").unwrap().unwrap() == pattern(1, 30_000));
    assert!(tree.get("b").unwrap().unwrap() == pattern(2, 30_000));
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn readers_see_whole_values_while_writers_replace_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), small(64)));
    let tree = db.open_tree("t").unwrap();
    let len = 40_000;
    let versions = 60u64;
    tree.insert("k", pattern(0, len)).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                // Every read is one whole version: its first bytes say which.
                let mut reads = 0;
                while !done.load(Ordering::Acquire) || reads < 50 {
                    let value = tree.get("k").unwrap().unwrap();
                    let seed = (0..=versions)
                        .find(|&seed| value[..64] == pattern(seed, 64)[..])
                        .expect("a version that was written");
                    assert!(value == pattern(seed, len), "a torn value");
                    let part = tree.get_range("k", 30_000, 100).unwrap().unwrap();
                    assert_eq!(part.len(), 100);
                    reads += 1;
                }
            });
        }
        for version in 1..=versions {
            let value = pattern(version, len);
            if version % 7 == 0 {
                tree.compare_and_swap("k", Some(&pattern(version - 1, len)), Some(&value))
                    .unwrap()
                    .unwrap();
            } else {
                tree.insert("k", &value).unwrap();
            }
        }
        done.store(true, Ordering::Release);
    });
    assert!(tree.get("k").unwrap().unwrap() == pattern(versions, len));
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn large_values_without_the_log_survive_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let options = || small(64).write_ahead_log(false);
    let db = open(dir.path(), options());
    let tree = db.open_tree("t").unwrap();
    for n in 0..10u64 {
        tree.insert(n.to_be_bytes(), pattern(n, 20_000 + n as usize))
            .unwrap();
    }
    tree.insert(3u64.to_be_bytes(), b"small").unwrap();
    drop(tree);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let tree = db.open_tree("t").unwrap();
    for n in (0..10u64).filter(|&n| n != 3) {
        assert!(tree.get(n.to_be_bytes()).unwrap().unwrap() == pattern(n, 20_000 + n as usize));
    }
    assert!(db.check_integrity().unwrap().is_ok());
}
