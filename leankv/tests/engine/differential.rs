//! Random operations against `BTreeMap` (every API that reads or writes keys, parts of values
//! included), with a pool far smaller than the data, reopening the
//! database between rounds (with a second tree dropped every other round), and finally
//! removing almost everything.

use crate::common::{open_as, small, value_for};
use leankv::ablations::{HashTable, Lean, Lru, Pessimistic, Policy, Traditional};
use leankv::testing::{MemoryStorage, Storage};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

fn random_key(rng: &mut fastrand::Rng) -> Vec<u8> {
    // Variable lengths, shared prefixes, and the empty key.
    match rng.u8(..20) {
        0 => Vec::new(),
        1 => vec![0; rng.usize(1..4)],
        _ => format!("k{:06}{}", rng.u32(..40_000), "x".repeat(rng.usize(..24))).into_bytes(),
    }
}

fn check_range<P: Policy>(
    tree: &leankv::ablations::Tree<P>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut fastrand::Rng,
) {
    let (a, b) = (random_key(rng), random_key(rng));
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let bounds = match rng.u8(..4) {
        0 => (Bound::Included(low), Bound::Excluded(high)),
        1 => (Bound::Excluded(low), Bound::Included(high)),
        2 => (Bound::Unbounded, Bound::Included(high)),
        _ => (Bound::Included(low), Bound::Unbounded),
    };
    let expected: Vec<_> = model
        .range(bounds.clone())
        .take(300)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let found: Vec<_> = tree
        .range(bounds.clone())
        .take(300)
        .map(|item| item.unwrap())
        .collect();
    assert_eq!(found, expected);
    // The visitor scan sees the same pairs and stops when told.
    let mut visited = Vec::new();
    tree.scan(bounds, |key, value| {
        visited.push((key.to_vec(), value.to_vec()));
        visited.len() < 300
    })
    .unwrap();
    assert_eq!(visited, expected);
}

/// Looks up a few dozen keys at once (some absent, some twice, one longer than any key can
/// be), most of them on pages the small pool has let go.
fn check_get_many<P: Policy>(
    tree: &leankv::ablations::Tree<P>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut fastrand::Rng,
) {
    let mut keys: Vec<Vec<u8>> = (0..rng.usize(1..40)).map(|_| random_key(rng)).collect();
    keys.push(keys[0].clone());
    keys.push(vec![b'k'; 70_000]);
    let expected: Vec<_> = keys.iter().map(|key| model.get(key).cloned()).collect();
    assert_eq!(tree.get_many(&keys).unwrap(), expected);
    let mut answered = vec![0; keys.len()];
    tree.get_many_with(&keys, |index, value| {
        answered[index] += 1;
        assert_eq!(value, expected[index].as_deref());
    })
    .unwrap();
    assert!(answered.iter().all(|&calls| calls == 1));
}

/// Removes a range of up to a few hundred key numbers (about 1% of the keys), with random
/// inclusive and exclusive ends, sometimes open at one end within the keys of one number.
fn remove_range<P: Policy>(
    tree: &leankv::ablations::Tree<P>,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut fastrand::Rng,
) {
    let number = rng.u32(..40_000);
    let low = format!("k{number:06}").into_bytes();
    let high = format!("k{:06}", number + rng.u32(..400)).into_bytes();
    let bounds = match rng.u8(..5) {
        0 => (Bound::Included(low), Bound::Excluded(high)),
        1 => (Bound::Excluded(low), Bound::Included(high)),
        2 => (Bound::Included(low), Bound::Included(high)),
        3 => (Bound::Excluded(low), Bound::Excluded(high)),
        _ => {
            // Within the keys of one number: "k000123" < "k000123x" < ... < "k000124".
            let mut after = low.clone();
            after.extend(b"x".repeat(rng.usize(..24)));
            (Bound::Excluded(after), Bound::Excluded(high))
        }
    };
    let expected: Vec<Vec<u8>> = if matches!((&bounds.0, &bounds.1),
        (Bound::Excluded(a), Bound::Excluded(b)) if a >= b)
    {
        Vec::new()
    } else {
        model
            .range(bounds.clone())
            .map(|(k, _)| k.clone())
            .collect()
    };
    assert_eq!(tree.remove_range(bounds).unwrap(), expected.len() as u64);
    for key in expected {
        model.remove(&key);
    }
}

/// A compare-and-swap expecting the current value half the time, another value otherwise;
/// a quarter of them remove.
fn compare_and_swap<P: Policy>(
    tree: &leankv::ablations::Tree<P>,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    key: Vec<u8>,
    round: u64,
    max_value: usize,
    rng: &mut fastrand::Rng,
) {
    let current = model.get(&key).cloned();
    let expected = match rng.u8(..4) {
        0 | 1 => current.clone(),
        2 => None,
        _ => Some(value_for(rng.u64(..), round, 16)),
    };
    let new = (rng.u8(..4) != 0).then(|| value_for(rng.u64(..), round, max_value));
    let outcome = tree
        .compare_and_swap(&key, expected.as_deref(), new.as_deref())
        .unwrap();
    if expected == current {
        assert_eq!(outcome, Ok(()));
        match new {
            Some(value) => model.insert(key, value),
            None => model.remove(&key),
        };
    } else {
        let error = leankv::CompareAndSwapError {
            current,
            proposed: new,
        };
        assert_eq!(outcome, Err(error));
    }
}

/// What a `fetch_update` in the test makes of a value: removes one in five, else grows or
/// shrinks it (so that it no longer fits its leaf now and then), or makes one up.
fn rewritten(old: Option<&[u8]>, seed: u64, round: u64, max_value: usize) -> Option<Vec<u8>> {
    if seed.is_multiple_of(5) {
        return None;
    }
    let mut value = old.map_or_else(|| value_for(seed, round, max_value), <[u8]>::to_vec);
    if seed.is_multiple_of(2) {
        value.extend(value_for(seed, round, max_value / 2 + 1));
    } else {
        value.truncate(value.len() / 2);
    }
    value.truncate(max_value);
    Some(value)
}

/// Where a run keeps its database between opens.
#[derive(Clone, Copy)]
enum Place {
    /// The files in a directory, written and synced through the device.
    Files,
    /// A page file in memory, with the log in memory for each life (each life ends with a
    /// clean close, which leaves a page file that needs no log). For the ablations: what they
    /// are tested for is their buffer management, which evicts and reloads the same pages
    /// either way, where files would spend the test's time waiting for the device's syncs
    /// (every dirty page evicted from a tiny pool waits for the log to be synced first).
    Memory,
}

fn run<P: Policy>(
    place: Place,
    options: leankv::Options,
    rounds: u64,
    ops_per_round: usize,
    max_value: usize,
) {
    let dir = tempfile::tempdir().unwrap();
    let pages: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let open = |options: leankv::Options| match place {
        Place::Files => open_as::<P>(dir.path(), options),
        Place::Memory => {
            leankv::ablations::Db::open_with_storage_and_policy(dir.path(), options, pages.clone())
                .expect("open")
        }
    };
    let mut model = BTreeMap::new();
    let mut scratch_model = BTreeMap::new();
    let mut rng = fastrand::Rng::with_seed(42);
    let mut data_bytes = 0usize;
    for round in 0..rounds {
        let db = open(options.clone());
        let tree = db.open_tree("data").unwrap();
        for op in 0..ops_per_round {
            let key = random_key(&mut rng);
            match rng.u8(..11) {
                0..=5 => {
                    let value = value_for(rng.u64(..), round, max_value);
                    tree.insert(&key, &value).unwrap();
                    model.insert(key, value);
                }
                6 | 7 => assert_eq!(tree.get(&key).unwrap(), model.get(&key).cloned()),
                8 => assert_eq!(tree.remove(&key).unwrap(), model.remove(&key).is_some()),
                9 if op % 2 == 0 => {
                    compare_and_swap(&tree, &mut model, key, round, max_value, &mut rng)
                }
                9 => {
                    let seed = rng.u64(..);
                    let rewrite = |old: Option<&[u8]>| rewritten(old, seed, round, max_value);
                    let previous = tree.fetch_update(&key, rewrite).unwrap();
                    assert_eq!(previous, model.get(&key).cloned());
                    match rewrite(previous.as_deref()) {
                        Some(value) => model.insert(key, value),
                        None => model.remove(&key),
                    };
                }
                10 if op % 50 == 1 => remove_range(&tree, &mut model, &mut rng),
                _ if op % 20 == 0 => {
                    check_range(&tree, &model, &mut rng);
                    check_get_many(&tree, &model, &mut rng);
                    assert_eq!(tree.len().unwrap(), model.len() as u64);
                    assert_eq!(tree.is_empty().unwrap(), model.is_empty());
                }
                _ if op % 3 == 0 => {
                    // Part of a value, and its length, without reading the rest.
                    let expected = model.get(&key);
                    let len = expected.map_or(0, Vec::len);
                    let (offset, part) = (rng.usize(..=len + 2), rng.usize(..=len + 2));
                    let found = tree.get_range(&key, offset as u64, part).unwrap();
                    let slice = expected.map(|value| {
                        let start = offset.min(len);
                        value[start..(start + part).min(len)].to_vec()
                    });
                    assert_eq!(found, slice);
                    let value_len = tree.value_len(&key).unwrap();
                    assert_eq!(value_len, expected.map(|value| value.len() as u64));
                }
                _ => assert_eq!(tree.get(&key).unwrap(), model.get(&key).cloned()),
            }
        }
        assert_eq!(tree.len().unwrap(), model.len() as u64, "round {round}");
        data_bytes = model.iter().map(|(k, v)| k.len() + v.len()).sum();
        // A second tree, grown every round and dropped every other one.
        let scratch = db.open_tree("scratch").unwrap();
        for _ in 0..300 {
            let key = random_key(&mut rng);
            let value = value_for(rng.u64(..), round, max_value);
            scratch.insert(&key, &value).unwrap();
            scratch_model.insert(key, value);
        }
        let found: Vec<_> = scratch.iter().map(|item| item.unwrap()).collect();
        assert_eq!(found, scratch_model.clone().into_iter().collect::<Vec<_>>());
        let dropped = round % 2 == 1;
        if dropped {
            assert!(db.drop_tree("scratch").unwrap());
            assert!(matches!(scratch.len(), Err(leankv::Error::TreeDropped)));
            scratch_model.clear();
        }
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "round {round}: {report}");
        let trees = if dropped { 1 } else { 2 };
        assert_eq!(
            report.entries as usize,
            model.len() + scratch_model.len() + trees,
            "the catalog holds an entry per tree"
        );
        let stats = db.stats();
        assert!(stats.evictions > 0, "round {round}: the pool never filled");
        db.close().unwrap();
    }
    let pool = options.frames() * 4096;
    assert!(
        data_bytes >= 10 * pool,
        "data {data_bytes} B is not 10x the pool {pool} B"
    );

    // Everything is found after reopening; then remove almost everything.
    let db = open(options.clone());
    let scratch: Vec<_> = db
        .open_tree("scratch")
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(scratch, scratch_model.into_iter().collect::<Vec<_>>());
    assert!(db.drop_tree("scratch").unwrap());
    let tree = db.open_tree("data").unwrap();
    let all: Vec<_> = tree.iter().map(|item| item.unwrap()).collect();
    assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
    assert_eq!(tree.len().unwrap(), model.len() as u64);
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for (i, key) in keys.iter().enumerate() {
        if i % 100 != 0 {
            assert!(tree.remove(key).unwrap());
            model.remove(key);
        }
    }
    let pages_before = db.stats().page_count;
    db.close().unwrap();
    let db = open(options);
    let tree = db.open_tree("data").unwrap();
    let all: Vec<_> = tree.iter().map(|item| item.unwrap()).collect();
    assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
    assert_eq!(tree.len().unwrap(), model.len() as u64);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(
        report.pages * 10 < pages_before,
        "merges should free most pages: {} in use of {pages_before}",
        report.pages
    );
    // Freed pages are reused: refilling does not grow the file.
    for (i, key) in keys.iter().enumerate().take(keys.len() / 2) {
        tree.insert(key, value_for(i as u64, 9, 64)).unwrap();
    }
    assert_eq!(db.stats().page_count, pages_before);
    db.close().unwrap();
}

#[test]
fn small_pages_pool_ten_times_smaller_than_data() {
    run::<Lean>(Place::Files, small(32), 4, 9_000, 300);
}

/// The benchmarks' ablations must be as correct as the engine they are compared with.
#[test]
fn ablations_pool_ten_times_smaller_than_data() {
    run::<HashTable>(Place::Memory, small(32), 4, 9_000, 300);
    run::<Lru>(Place::Memory, small(32), 4, 9_000, 300);
    run::<Pessimistic>(Place::Memory, small(32), 4, 9_000, 300);
    run::<Traditional>(Place::Memory, small(32), 4, 9_000, 300);
}

#[test]
fn default_pages_with_large_values() {
    let options = leankv::Options::default().pool_size(32 * (16384 + 512));
    run::<Lean>(Place::Files, options, 3, 2_500, 4000);
}

/// Most values longer than a 4 KiB page's leaf holds (1 KiB), so they live in pages of their
/// own: replaced, removed by ranges, dropped with their tree, read by every scan.
#[test]
fn small_pages_with_values_beyond_the_leaf() {
    run::<Lean>(Place::Files, small(32), 3, 2_500, 6000);
}

/// The in-memory baselines (plain memory, and an mmapped file the kernel pages): the same map
/// while the pool holds everything, a clear error when it does not, and no reopening of a
/// database they would have to page in.
#[test]
fn in_memory_policies_are_maps_until_their_pool_is_full() {
    never_evicting::<leankv::ablations::InMemory>();
    never_evicting::<leankv::ablations::Mmap>();
}

fn never_evicting<P: Policy>() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_as::<P>(dir.path(), small(64));
    let tree = db.open_tree("data").unwrap();
    let mut model = BTreeMap::new();
    let mut rng = fastrand::Rng::with_seed(7);
    let full = loop {
        let key = random_key(&mut rng);
        let value = value_for(rng.u64(..), 0, 200);
        match tree.insert(&key, &value) {
            Ok(()) => {
                model.insert(key, value);
            }
            Err(error) => break error,
        }
        if rng.u8(..4) == 0 {
            let key = random_key(&mut rng);
            assert_eq!(tree.get(&key).unwrap(), model.get(&key).cloned());
        }
    };
    assert!(
        matches!(full, leankv::Error::PoolExhausted { frames: 64 }),
        "{full}"
    );
    assert_eq!(db.stats().evictions, 0);
    let all: Vec<_> = tree.iter().map(|item| item.unwrap()).collect();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    drop(tree);
    db.close().unwrap();
    let reopened = leankv::ablations::Db::<P>::open_with_policy(dir.path(), small(64));
    assert!(matches!(reopened, Err(leankv::Error::InvalidOptions(_))));
}
