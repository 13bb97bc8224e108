//! `Tree::get_many`: many keys looked up at once, their pages read together, beyond memory
//! and under concurrent writes.

use crate::common::{key, open, small};
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
/// they are read ahead together (the read-ahead threads count them), a few at a time (a batch
/// holds more keys than the cooling stage has room for, some batches hundreds more: no page
/// read ahead is evicted before its key uses it, so no page is read twice for one batch), and
/// every answer matches the map, absent keys and repeated keys included.
#[test]
fn batches_beyond_memory_match_a_map_and_are_read_ahead() {
    batches_beyond_memory(small(48), true);
}

/// Without read-ahead threads the same answers, each page read on demand.
#[test]
fn batches_without_read_ahead_match_a_map() {
    batches_beyond_memory(small(48).scan_prefetch(0), false);
}

fn batches_beyond_memory(options: leankv::Options, read_ahead: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), options);
    let tree = db.open_tree("t").unwrap();
    let mut model = BTreeMap::new();
    for n in (0..60_000).step_by(2) {
        tree.insert(key(n), versioned(n, 0)).unwrap();
        model.insert(key(n), versioned(n, 0));
    }
    let before = db.stats();
    let mut looked_up = 0;
    let mut rng = fastrand::Rng::with_seed(5);
    for batch in 0..300 {
        let len = if batch % 10 == 0 {
            rng.usize(200..=600)
        } else {
            rng.usize(1..=32)
        };
        let mut keys: Vec<Vec<u8>> = (0..len).map(|_| key(rng.u64(..60_000))).collect();
        if batch % 3 == 0 {
            keys.push(keys[0].clone());
        }
        let expected: Vec<_> = keys.iter().map(|key| model.get(key).cloned()).collect();
        assert_eq!(tree.get_many(&keys).unwrap(), expected, "batch {batch}");
        looked_up += keys.len() as u64;
    }
    let after = db.stats();
    let read_ahead_pages = after.prefetch_reads - before.prefetch_reads;
    assert_eq!(
        read_ahead_pages > 0,
        read_ahead,
        "{read_ahead_pages} pages read ahead"
    );
    // At most a page per key (a leaf; an inner node now and then): a page read ahead and
    // evicted before its key came would be read again.
    let reads = after.page_reads - before.page_reads;
    assert!(
        reads <= looked_up + looked_up / 10,
        "{reads} pages read for {looked_up} keys"
    );
    assert_eq!(
        tree.get_many::<&[u8]>(&[]).unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
    assert!(db.check_integrity().unwrap().is_ok());
}

/// Readers of batches beside writers, with a pool far smaller than the data: every answer is
/// a value written for that key (no torn, invented or misplaced value), never older than one
/// the same reader saw before, and a key never removed is always found. Bounded by operation
/// counts.
#[test]
fn batches_beside_writers_see_only_written_values() {
    batches_beside_writers(small(64));
}

/// The same with every page in memory, where a batch's lookups run interleaved, step by step
/// (each key's descent one level at a time, beside the others' and the writers' splits and
/// merges).
#[test]
fn batches_in_memory_beside_writers_see_only_written_values() {
    batches_beside_writers(small(4096));
}

fn batches_beside_writers(options: leankv::Options) {
    const KEYS: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), options);
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
                        if version % 5 == 0 && n % 4 < 2 {
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
                let mut newest = vec![0u64; KEYS as usize];
                let mut batches = 0;
                while batches < 200 || writing.load(Ordering::Relaxed) {
                    let numbers: Vec<u64> = (0..16).map(|_| rng.u64(..KEYS)).collect();
                    let keys: Vec<Vec<u8>> = numbers.iter().map(|&n| key(n)).collect();
                    tree.get_many_with(&keys, |index, value| {
                        let n = numbers[index];
                        let Some(value) = value else {
                            assert!(n % 4 < 2, "key {n}, never removed, was not found");
                            return;
                        };
                        let (found, version) = parse(value);
                        assert_eq!(found, n, "another key's value");
                        let seen = &mut newest[n as usize];
                        assert!(version >= *seen, "key {n}: version {version} after {seen}");
                        *seen = version;
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
