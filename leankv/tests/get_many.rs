//! `Tree::get_many`: many keys looked up at once, their pages read together, beyond memory
//! and under concurrent writes.

mod common;

use common::{key, open, small};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// A value that names its key and version, so a reader can tell a value that was written
/// from one that was not.
fn versioned(n: u64, version: u64) -> Vec<u8> {
    let mut value = format!("{n}:{version}:").into_bytes();
    value.resize(40 + (n % 50) as usize, b'.');
    value
}

fn parse(value: &[u8]) -> (u64, u64) {
    let text = std::str::from_utf8(value).unwrap();
    let mut parts = text.split(':');
    let n = parts.next().unwrap().parse().unwrap();
    let version = parts.next().unwrap().parse().unwrap();
    assert_eq!(
        value,
        versioned(n, version),
        "a value that was never written"
    );
    (n, version)
}

/// With a pool of 48 small pages and ~600 leaves, nearly every batch meets leaves on disk:
/// they are read ahead together (the read-ahead threads count them) and every answer
/// matches the map, absent keys and repeated keys included.
#[test]
fn batches_beyond_memory_match_a_map_and_are_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(48));
    let tree = db.open_tree("t").unwrap();
    let mut model = BTreeMap::new();
    for n in (0..60_000).step_by(2) {
        tree.insert(key(n), versioned(n, 0)).unwrap();
        model.insert(key(n), versioned(n, 0));
    }
    let before = db.stats().prefetch_reads;
    let mut rng = fastrand::Rng::with_seed(5);
    for batch in 0..300 {
        let mut keys: Vec<Vec<u8>> = (0..rng.usize(1..=32))
            .map(|_| key(rng.u64(..60_000)))
            .collect();
        if batch % 3 == 0 {
            keys.push(keys[0].clone());
        }
        let expected: Vec<_> = keys.iter().map(|key| model.get(key).cloned()).collect();
        assert_eq!(tree.get_many(&keys).unwrap(), expected, "batch {batch}");
    }
    assert!(
        db.stats().prefetch_reads > before,
        "no page was read ahead for the batches"
    );
    assert_eq!(
        tree.get_many::<&[u8]>(&[]).unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
    assert!(db.check_integrity().unwrap().is_ok());
}

/// Readers of batches beside writers, with a pool far smaller than the data: every answer is
/// a value written for that key (no torn, invented or misplaced value). Bounded by operation
/// counts.
#[test]
fn batches_beside_writers_see_only_written_values() {
    const KEYS: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(64));
    let tree = db.open_tree("t").unwrap();
    for n in 0..KEYS {
        tree.insert(key(n), versioned(n, 0)).unwrap();
    }
    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..2u64)
            .map(|thread| {
                let tree = tree.clone();
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(thread);
                    for version in 1..=6_000 {
                        // Each writer owns the keys of its parity: versions per key grow.
                        let n = rng.u64(..KEYS / 2) * 2 + thread;
                        tree.insert(key(n), versioned(n, version)).unwrap();
                        if version % 5 == 0 {
                            tree.remove(key(n)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for reader in 0..2u64 {
            let (tree, writing) = (tree.clone(), &writing);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(10 + reader);
                let mut batches = 0;
                while batches < 200 || writing.load(Ordering::Relaxed) {
                    let numbers: Vec<u64> = (0..16).map(|_| rng.u64(..KEYS)).collect();
                    let keys: Vec<Vec<u8>> = numbers.iter().map(|&n| key(n)).collect();
                    tree.get_many_with(&keys, |index, value| {
                        if let Some(value) = value {
                            assert_eq!(parse(value).0, numbers[index], "another key's value");
                        }
                    })
                    .unwrap();
                    batches += 1;
                    if batches >= 5_000 {
                        break;
                    }
                }
            });
        }
        for writer in writers {
            writer.join().unwrap();
        }
        writing.store(false, Ordering::Relaxed);
    });
    assert!(db.check_integrity().unwrap().is_ok());
}
