//! Tree tests that need the internals: the pessimistic (shared-latch) paths, which the retry
//! loop only takes after repeated conflicts, are driven directly here.

use super::*;
use crate::buffer::policy::{HashTable, Lean, Lru, Traditional};
use crate::buffer::{BufferConfig, Counter};
use crate::io::MemoryStorage;

fn tree_with_small_pool<P: Policy>() -> BTree<P> {
    tree_with::<P>(48, 0)
}

fn tree_with<P: Policy>(frames: u32, prefetch_depth: usize) -> BTree<P> {
    let config = BufferConfig {
        page_size: 4096,
        frames,
        cooling_fraction: 0.1,
        prefault: false,
        background_writer: false,
        pool_file: None,
        prefetch_depth,
        generation: 1,
    };
    let bm = BufferManager::new(
        Arc::new(MemoryStorage::new()),
        &config,
        &page_kinds(),
        1,
        Vec::new(),
        None,
    )
    .unwrap();
    BTree::create(&bm, &crate::key_count::KeyCounts::default()).unwrap()
}

fn key(n: u32) -> [u8; 4] {
    n.wrapping_mul(2_654_435_761).to_be_bytes()
}

/// Runs `test` for the engine and for each evicting ablation.
macro_rules! for_each_evicting_policy {
    ($test:ident) => {
        $test::<Lean>();
        $test::<HashTable>();
        $test::<Lru>();
        $test::<Traditional>();
    };
}

#[test]
fn pessimistic_descents_find_and_change_what_optimistic_ones_do() {
    for_each_evicting_policy!(pessimistic_descents);
}

fn pessimistic_descents<P: Policy>() {
    let tree = tree_with_small_pool::<P>();
    let count = 20_000;
    for n in 0..count {
        tree.insert(&key(n), &n.to_le_bytes(), 0, &mut Vec::new())
            .unwrap();
    }
    // Lookups under shared-latch coupling, bringing evicted pages back in along the way.
    for n in 0..count {
        let value = tree
            .bm
            .run(|_| {
                tree.read_leaf(&key(n), Bound::AtLeast, LatchMode::Pessimistic, |leaf| {
                    let (index, found) = leaf.lower_bound(&key(n));
                    found.then(|| leaf.value(index).to_vec())
                })
            })
            .unwrap();
        assert_eq!(
            value,
            Some(n.to_le_bytes().to_vec()),
            "{}: key {n}",
            P::NAME
        );
    }
    // Writes through the exclusive pessimistic descent.
    for n in (0..count).step_by(2) {
        tree.bm
            .run(|_| {
                let (frame, mut guard) =
                    tree.descend_exclusive(&key(n), 0, LatchMode::Pessimistic)?;
                let (index, found) = tree.node(frame).lower_bound(&key(n));
                assert!(found);
                NodeMut::new(tree.bm.page_mut(frame, &mut guard)).remove_at(index);
                tree.bm.frame(frame).set_dirty(true);
                Ok(())
            })
            .unwrap();
    }
    let mut buffer = Vec::new();
    for n in 0..count {
        assert_eq!(tree.lookup(&key(n), &mut buffer).unwrap(), n % 2 == 1);
    }
    let counters = tree.bm.counters();
    assert!(
        counters[crate::buffer::Counter::PageReads as usize] > 0,
        "pool too large"
    );
}

#[test]
fn splits_and_merges_through_the_pessimistic_path() {
    for_each_evicting_policy!(pessimistic_splits_and_merges);
}

fn pessimistic_splits_and_merges<P: Policy>() {
    let tree = tree_with_small_pool::<P>();
    let value = [5u8; 200];
    for n in 0..3_000 {
        let k = key(n);
        loop {
            let step = tree
                .bm
                .run(|_| {
                    let (frame, mut guard) =
                        tree.descend_exclusive(&k, 0, LatchMode::Pessimistic)?;
                    let leaf = tree.node(frame);
                    let incoming = Incoming {
                        key: &k,
                        size: entry_size(true, k.len(), value.len()),
                    };
                    if !split::has_room(&leaf, incoming) {
                        return Ok(Some((frame, incoming)));
                    }
                    let index = leaf.lower_bound(&k).0;
                    NodeMut::new(tree.bm.page_mut(frame, &mut guard)).insert_at(index, &k, &value);
                    tree.bm.frame(frame).set_dirty(true);
                    Ok(None)
                })
                .unwrap();
            match step {
                None => break,
                Some((frame, incoming)) => tree
                    .bm
                    .run(|_| tree.split(frame, &k, incoming, LatchMode::Pessimistic))
                    .unwrap(),
            }
        }
    }
    for n in 0..3_000 {
        let k = key(n);
        let leaf = tree
            .bm
            .run(|_| {
                let (frame, mut guard) = tree.descend_exclusive(&k, 0, LatchMode::Pessimistic)?;
                let index = tree.node(frame).lower_bound(&k).0;
                NodeMut::new(tree.bm.page_mut(frame, &mut guard)).remove_at(index);
                tree.bm.frame(frame).set_dirty(true);
                Ok(frame)
            })
            .unwrap();
        let mut frame = leaf;
        while let Some(parent) = tree
            .bm
            .run(|_| tree.merge(frame, &k, LatchMode::Pessimistic))
            .unwrap()
        {
            if parent == tree.root() {
                tree.bm.run(|_| tree.collapse_root()).unwrap();
                break;
            }
            frame = parent;
        }
    }
    let mut buffer = Vec::new();
    assert!((0..3_000).all(|n| !tree.lookup(&key(n), &mut buffer).unwrap()));
    assert!(
        tree.node(tree.root()).level() <= 1,
        "merges shrank the tree"
    );
}

/// Read-ahead registers a page only while its parent shows the version the lookup that
/// stopped there saw: a target whose parent changed since is skipped (its page is read on
/// demand), a current one is read by the read-ahead threads and then found by the lookup.
#[test]
fn read_ahead_skips_targets_whose_parent_changed() {
    let tree = tree_with::<Lean>(96, 8);
    for n in 0..3_000 {
        tree.insert(&key(n), &[7; 200], 0, &mut Vec::new()).unwrap();
    }
    let mut buffer = Vec::new();
    // A key on disk now (reading a page may unswizzle others: parents change); not one whose
    // page is cooling (unswizzled, yet in memory: read-ahead rightly skips it).
    let on_disk = || {
        let mut buffer = Vec::new();
        (0..3_000)
            .find_map(
                |n| match tree.lookup_in_memory(&key(n), &mut buffer).unwrap() {
                    Err(target) if !tree.bm.cooling_or_in_flight(target.page_id) => {
                        Some((n, target))
                    }
                    _ => None,
                },
            )
            .expect("a key on disk")
    };
    let (stale_key, stale) = on_disk();
    let read_ahead = || tree.bm.counters()[Counter::PrefetchReads as usize];
    let before = read_ahead();
    let changed = ReadAhead {
        // The version a later exclusive latch of the parent leaves.
        version: stale.version + (1 << 17),
        ..stale
    };
    tree.bm.read_ahead(&mut [changed]);
    assert!(tree.lookup(&key(stale_key), &mut buffer).unwrap());
    assert_eq!(
        read_ahead(),
        before,
        "a target whose parent changed was read ahead"
    );
    let (fresh_key, fresh) = on_disk();
    tree.bm.read_ahead(&mut [fresh]);
    assert!(tree.lookup(&key(fresh_key), &mut buffer).unwrap());
    assert_eq!(read_ahead(), before + 1);
}
