//! Several threads inserting, reading and removing with a small pool while scans run, then
//! everything verified. Stable keys (inserted before the threads start and never removed)
//! must appear in every scan, and every scan must be strictly monotonic (one scanner reads
//! forward, one backward).

use crate::common::{key, open, open_as, small, value_for};
use leankv::ablations::{HashTable, Lean, Lru, Policy, Traditional};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const STABLE: u64 = 3_000;
const WRITERS: u64 = 4;
const PER_WRITER: u64 = 4_000;

/// Stable keys are multiples of 1000 apart from the writers' keys: writer `w` owns the keys
/// `STABLE + w * PER_WRITER ..`, so writers never touch each other's keys.
fn stable_key(n: u64) -> Vec<u8> {
    key(n * 10)
}

fn writer_key(writer: u64, n: u64) -> Vec<u8> {
    key(n * 10 + 1 + writer)
}

/// The number `key` was made from; a multiple of 10 for stable keys only.
fn key_number(key: &[u8]) -> u64 {
    std::str::from_utf8(&key[3..]).unwrap().parse().unwrap()
}

#[test]
fn writers_readers_and_scanners_with_a_small_pool() {
    writers_readers_and_scanners::<Lean>();
}

#[test]
fn ablations_under_writers_readers_and_scanners() {
    writers_readers_and_scanners::<HashTable>();
    writers_readers_and_scanners::<Lru>();
    writers_readers_and_scanners::<Traditional>();
}

fn writers_readers_and_scanners<P: Policy>() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_as::<P>(dir.path(), small(64));
    let tree = db.open_tree("shared").unwrap();
    for n in 0..STABLE {
        tree.insert(stable_key(n), value_for(n, 0, 64)).unwrap();
    }
    let stop = AtomicBool::new(false);
    let scans = AtomicU64::new(0);
    let final_versions: Vec<Vec<Option<u64>>> = std::thread::scope(|scope| {
        for scanner in 0..2u64 {
            let (tree, stop, scans) = (&tree, &stop, &scans);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(100 + scanner);
                while !stop.load(Ordering::Relaxed) {
                    let start = rng.u64(..STABLE);
                    let end = (start + 1 + rng.u64(..800)).min(STABLE);
                    // Scanner 0 reads forward, scanner 1 backward.
                    let backward = scanner == 1;
                    let range = tree.range(stable_key(start)..stable_key(end));
                    let items: Box<dyn Iterator<Item = _>> = if backward {
                        Box::new(range.rev())
                    } else {
                        Box::new(range)
                    };
                    let mut stable_seen = Vec::new();
                    let mut previous: Option<Vec<u8>> = None;
                    for item in items {
                        let (k, v) = item.unwrap();
                        if let Some(previous) = &previous {
                            let ordered = if backward {
                                k < *previous
                            } else {
                                *previous < k
                            };
                            assert!(
                                ordered,
                                "scan not strictly monotonic (backward: {backward})"
                            );
                        }
                        let number = key_number(&k);
                        if number.is_multiple_of(10) {
                            let n = number / 10;
                            assert_eq!(v, value_for(n, 0, 64));
                            stable_seen.push(n);
                        }
                        previous = Some(k);
                    }
                    if backward {
                        stable_seen.reverse();
                    }
                    assert_eq!(
                        stable_seen,
                        (start..end).collect::<Vec<_>>(),
                        "scan missed stable keys (backward: {backward})"
                    );
                    scans.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let tree = &tree;
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(writer);
                    // Per key: the version last written, or None if removed / never written.
                    let mut versions = vec![None; PER_WRITER as usize];
                    for round in 0..4 * PER_WRITER {
                        let n = rng.u64(..PER_WRITER);
                        let k = writer_key(writer, n);
                        match rng.u8(..10) {
                            0..=5 => {
                                tree.insert(&k, value_for(n, round, 200)).unwrap();
                                versions[n as usize] = Some(round);
                            }
                            6 | 7 => {
                                let expected = versions[n as usize].map(|v| value_for(n, v, 200));
                                assert_eq!(tree.get(&k).unwrap(), expected);
                            }
                            _ => {
                                let existed = tree.remove(&k).unwrap();
                                assert_eq!(existed, versions[n as usize].is_some());
                                versions[n as usize] = None;
                            }
                        }
                    }
                    versions
                })
            })
            .collect();
        let versions = writers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        versions
    });
    assert!(scans.load(Ordering::Relaxed) > 0);
    let stats = db.stats();
    assert!(
        stats.evictions > 0 && stats.page_reads > 0,
        "pool never overflowed: {stats:?}"
    );

    // Verify everything, also after a reopen.
    let verify = |tree: &leankv::ablations::Tree<P>| {
        let mut expected = std::collections::BTreeMap::new();
        for n in 0..STABLE {
            expected.insert(stable_key(n), value_for(n, 0, 64));
        }
        for (writer, versions) in final_versions.iter().enumerate() {
            for (n, version) in versions.iter().enumerate() {
                if let Some(version) = version {
                    expected.insert(
                        writer_key(writer as u64, n as u64),
                        value_for(n as u64, *version, 200),
                    );
                }
            }
        }
        let found: Vec<_> = tree.iter().map(|item| item.unwrap()).collect();
        assert_eq!(found, expected.into_iter().collect::<Vec<_>>());
    };
    verify(&tree);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    drop(tree);
    db.close().unwrap();
    let db = open_as::<P>(dir.path(), small(64));
    verify(&db.open_tree("shared").unwrap());
}

#[test]
fn many_threads_insert_into_many_trees_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(48));
    std::thread::scope(|scope| {
        for thread in 0..6u64 {
            let db = &db;
            scope.spawn(move || {
                let tree = db.open_tree(&format!("tree-{}", thread % 3)).unwrap();
                for n in 0..2_000 {
                    tree.insert(key(n * 6 + thread), value_for(n, thread, 100))
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(db.tree_names().unwrap(), vec!["tree-0", "tree-1", "tree-2"]);
    for name in 0..3u64 {
        let tree = db.open_tree(&format!("tree-{name}")).unwrap();
        assert_eq!(tree.iter().count(), 4_000);
        for thread in [name, name + 3] {
            for n in (0..2_000).step_by(97) {
                assert_eq!(
                    tree.get(key(n * 6 + thread)).unwrap(),
                    Some(value_for(n, thread, 100))
                );
            }
        }
    }
    assert!(db.check_integrity().unwrap().is_ok());
}

/// Threads increment shared counters with `update_in_place` while other threads insert enough
/// data to keep the small pool evicting (counters included): no increment may be lost.
#[test]
fn in_place_updates_of_shared_counters_lose_nothing() {
    const COUNTERS: u64 = 8;
    const INCREMENTS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(48));
    let tree = db.open_tree("counters").unwrap();
    for counter in 0..COUNTERS {
        tree.insert(key(counter * 1_000_000), 0u64.to_le_bytes())
            .unwrap();
    }
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let tree = &tree;
            scope.spawn(move || {
                for n in 0..INCREMENTS {
                    let counter = key(((n + thread) % COUNTERS) * 1_000_000);
                    let updated = tree
                        .update_in_place(&counter, |bytes| {
                            let count = u64::from_le_bytes(bytes.try_into().unwrap());
                            bytes.copy_from_slice(&(count + 1).to_le_bytes());
                        })
                        .unwrap();
                    assert!(updated.is_some());
                    tree.insert(key(n * 8 + thread + 1), value_for(n, thread, 200))
                        .unwrap();
                }
            });
        }
    });
    assert!(db.stats().evictions > 0, "the pool must have evicted");
    let total: u64 = (0..COUNTERS)
        .map(|counter| {
            let bytes = tree.get(key(counter * 1_000_000)).unwrap().unwrap();
            u64::from_le_bytes(bytes.try_into().unwrap())
        })
        .sum();
    assert_eq!(total, 4 * INCREMENTS);
}

/// Threads increment shared counters, half of them through compare-and-swap retry loops, half
/// through `fetch_update`s that append a byte per increment (values grow, so leaves split under
/// them), among filler inserts that keep the small pool evicting: no increment may be lost.
#[test]
fn compare_and_swap_and_fetch_update_lose_no_increment() {
    const COUNTERS: u64 = 6;
    const INCREMENTS: u64 = 1_500;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(48));
    let counters = db.open_tree("counters").unwrap();
    let tallies = db.open_tree("tallies").unwrap();
    let decode = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap());
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (counters, tallies) = (&counters, &tallies);
            scope.spawn(move || {
                for n in 0..INCREMENTS {
                    let counter = key(((n + thread) % COUNTERS) * 1_000_000);
                    if thread % 2 == 0 {
                        loop {
                            let current = counters.get(&counter).unwrap();
                            let next = (current.as_deref().map_or(0, decode) + 1).to_le_bytes();
                            let swapped = counters
                                .compare_and_swap(&counter, current.as_deref(), Some(&next))
                                .unwrap();
                            match swapped {
                                Ok(()) => break,
                                Err(error) => {
                                    assert_ne!(error.current, current);
                                    assert_eq!(error.proposed.as_deref(), Some(&next[..]));
                                }
                            }
                        }
                    } else {
                        tallies
                            .fetch_update(&counter, |old| {
                                let mut tally = old.map_or_else(Vec::new, <[u8]>::to_vec);
                                tally.push(thread as u8);
                                Some(tally)
                            })
                            .unwrap();
                    }
                    let filler = key(n * 8 + thread + 1);
                    tallies.insert(&filler, value_for(n, thread, 200)).unwrap();
                }
            });
        }
    });
    assert!(db.stats().evictions > 0, "the pool must have evicted");
    let mut increments = 0;
    let mut tallied = [0u64; 4];
    for counter in 0..COUNTERS {
        let counter = key(counter * 1_000_000);
        increments += decode(&counters.get(&counter).unwrap().unwrap());
        for thread in tallies.get(&counter).unwrap().unwrap() {
            tallied[thread as usize] += 1;
        }
    }
    assert_eq!(increments, 2 * INCREMENTS);
    assert_eq!(tallied, [0, INCREMENTS, 0, INCREMENTS]);
    assert!(db.check_integrity().unwrap().is_ok());
}
