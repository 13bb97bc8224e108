//! Ranges read backwards and from both ends, `first`/`last` and prefix scans, checked against a
//! `BTreeMap` on trees many times the pool (so backward steps fault leaves in and read ahead
//! to the left), with keys of very different lengths up to the limit (deep trees, varied fences).

use crate::common::{open, small, value_for};
use leankv::{Db, Tree};
use std::collections::BTreeMap;
use std::ops::Bound;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys from a small alphabet with lengths up to 256 bytes, so that many share prefixes and
/// fences and separators have all shapes.
fn random_key(rng: &mut fastrand::Rng) -> Vec<u8> {
    let len = match rng.u8(..10) {
        0 => 0,
        1..=6 => rng.usize(1..12),
        _ => rng.usize(12..=256), // 256: the key limit of 4 KiB pages
    };
    (0..len).map(|_| b"abc\xff"[rng.usize(..4)]).collect()
}

fn random_bound(rng: &mut fastrand::Rng) -> Bound<Vec<u8>> {
    match rng.u8(..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

fn fill(tree: &Tree, model: &mut Model, rng: &mut fastrand::Rng, count: usize) {
    for n in 0..count {
        let key = random_key(rng);
        let value = value_for(n as u64, 1, 400);
        tree.insert(&key, &value).unwrap();
        model.insert(key, value);
    }
}

/// Reads `range` from `tree` and from `model` with the same random mix of `next` and
/// `next_back` and compares every step.
fn compare_mixed(
    tree: &Tree,
    model: &Model,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    rng: &mut fastrand::Rng,
) {
    // `BTreeMap::range` panics on a start above the end; the engine yields nothing there.
    let inverted = match (&range.0, &range.1) {
        (Bound::Included(start), Bound::Included(end)) => start > end,
        (
            Bound::Included(start) | Bound::Excluded(start),
            Bound::Included(end) | Bound::Excluded(end),
        ) => start >= end,
        _ => false,
    };
    let mut expected: Box<dyn DoubleEndedIterator<Item = (&Vec<u8>, &Vec<u8>)>> = if inverted {
        Box::new(std::iter::empty())
    } else {
        Box::new(model.range(range.clone()))
    };
    let mut found = tree.range(range.clone());
    let back_share = rng.u8(..=4); // from forward only to backward only
    loop {
        let backward = rng.u8(..4) < back_share;
        let (want, got) = if backward {
            (expected.next_back(), found.next_back())
        } else {
            (expected.next(), found.next())
        };
        let got = got.map(|item| item.unwrap());
        assert_eq!(
            got.as_ref().map(|(key, value)| (key, value)),
            want,
            "range {range:?}, backward step {backward}"
        );
        if want.is_none() {
            // Both ends are done: neither direction yields anything more.
            assert!(found.next().is_none() && found.next_back().is_none());
            return;
        }
    }
}

#[test]
fn mixed_directions_match_a_btreemap_on_a_tree_larger_than_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut model = Model::new();
    {
        let db = open(dir.path(), small(48));
        let tree = db.open_tree("t").unwrap();
        fill(&tree, &mut model, &mut rng, 8_000);
        db.close().unwrap();
    }
    // Reopened cold: the first steps in either direction fault their leaves in.
    let db = open(dir.path(), small(48));
    let tree = db.open_tree("t").unwrap();
    let stats = db.stats();
    assert!(
        stats.page_count > 10 * 48,
        "data must exceed the pool: {stats:?}"
    );
    let whole: Vec<_> = tree.iter().rev().map(|item| item.unwrap()).collect();
    let expected: Vec<_> = model
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(whole, expected);
    for _ in 0..300 {
        let range = (random_bound(&mut rng), random_bound(&mut rng));
        compare_mixed(&tree, &model, range, &mut rng);
    }
    // Removals leave gaps (and merges) that backward steps must cross.
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for key in keys.iter().filter(|_| rng.u8(..3) > 0) {
        assert!(tree.remove(key).unwrap());
        model.remove(key);
    }
    for _ in 0..200 {
        let range = (random_bound(&mut rng), random_bound(&mut rng));
        compare_mixed(&tree, &model, range, &mut rng);
    }
    assert!(db.stats().page_reads > 0);
}

#[test]
fn first_last_and_prefixes_match_a_btreemap() {
    let dir = tempfile::tempdir().unwrap();
    let db: Db = open(dir.path(), small(64));
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.first().unwrap(), None);
    assert_eq!(tree.last().unwrap(), None);
    assert!(tree.iter().next_back().is_none());
    let mut rng = fastrand::Rng::with_seed(11);
    let mut model = Model::new();
    fill(&tree, &mut model, &mut rng, 3_000);
    let pair = |(key, value): (&Vec<u8>, &Vec<u8>)| (key.clone(), value.clone());
    assert_eq!(tree.first().unwrap(), model.first_key_value().map(pair));
    assert_eq!(tree.last().unwrap(), model.last_key_value().map(pair));
    let prefixes: [&[u8]; 7] = [b"", b"a", b"ab", b"\xff", b"\xff\xff", b"c\xff", b"abcabc"];
    for prefix in prefixes {
        let expected: Vec<_> = model
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(pair)
            .collect();
        let forward: Vec<_> = tree.scan_prefix(prefix).map(|item| item.unwrap()).collect();
        assert_eq!(forward, expected, "prefix {prefix:?}");
        let mut backward: Vec<_> = tree
            .scan_prefix(prefix)
            .rev()
            .map(|item| item.unwrap())
            .collect();
        backward.reverse();
        assert_eq!(backward, expected, "prefix {prefix:?} backwards");
    }
}
