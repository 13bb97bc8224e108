//! Inserts at the size limits: every sequence of legal inserts completes, the tree matches a
//! `BTreeMap`, and the page file stays proportional to the live data.
//!
//! Regression: with 16 KiB pages, seven inserts of keys and values near the limits never
//! returned while the file grew without bound (a split could leave the incoming entry without
//! room, and the next split of a one-entry leaf made an empty sibling, forever).

use leankv::{Db, Options};
use std::collections::BTreeMap;

fn key(prefix: &str, filler: usize) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    key.extend(std::iter::repeat_n(b'a', filler));
    key
}

#[test]
fn seven_inserts_at_the_limits_finish() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().pool_size(64 << 20)).unwrap();
    let tree = db.open_tree("t").unwrap();
    let inserts = [
        (key("ccb", 297), 4096),
        (key("cba", 697), 4096),
        (key("", 0), 4096),
        (key("b", 1022), 4096),
        (key("bcbccccc", 0), 4000),
        (key("caa", 697), 0),
        (key("bca", 997), 4096),
    ];
    let mut model = BTreeMap::new();
    for (index, (key, value_len)) in inserts.into_iter().enumerate() {
        let value = vec![index as u8; value_len];
        tree.insert(&key, &value).unwrap();
        model.insert(key, value);
    }
    let found: BTreeMap<_, _> = tree.iter().map(Result::unwrap).collect();
    assert_eq!(found, model);
    drop(tree);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default().pool_size(64 << 20)).unwrap();
    let found: BTreeMap<_, _> = db
        .open_tree("t")
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(found, model);
    assert!(db.check_integrity().unwrap().is_ok());
}

/// A length at or near the limit, or a short one.
fn length_at_the_limits(rng: &mut fastrand::Rng, max: usize) -> usize {
    match rng.u8(..6) {
        0 => 0,
        1 => 1,
        2 => max - 1,
        3 => max,
        4 => rng.usize(max / 2..=max),
        _ => rng.usize(..=max),
    }
}

/// Random inserts, overwrites and removals with keys and values at the limits, for every page
/// size, on a pool that holds a fraction of the data; compared with a model after every
/// operation that touches a key, and in full at the end, after a reopen.
fn random_ops_at_the_limits(page_size: usize, seed: u64, operations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let frames = leankv::MIN_POOL_FRAMES * 2;
    let options = Options::default()
        .page_size(page_size)
        .pool_size(frames * (page_size + 512));
    let db = Db::open(dir.path(), options.clone()).unwrap();
    // The limits of the leaves: values longer than `max_value` live outside them (some are).
    let (max_key, max_value) = (db.max_key_size(), db.max_inline_value_size());
    let tree = db.open_tree("limits").unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for step in 0..operations {
        let key = if !keys.is_empty() && rng.bool() {
            keys[rng.usize(..keys.len())].clone()
        } else {
            // Few distinct first bytes: long shared prefixes, keys equal to fences.
            let len = length_at_the_limits(&mut rng, max_key);
            let key: Vec<u8> = (0..len).map(|_| b'a' + rng.u8(..3)).collect();
            keys.push(key.clone());
            key
        };
        if rng.u8(..4) == 0 {
            assert_eq!(tree.remove(&key).unwrap(), model.remove(&key).is_some());
        } else {
            let len = match rng.u8(..8) {
                0 => max_value + 1 + rng.usize(..2 * max_value),
                _ => length_at_the_limits(&mut rng, max_value),
            };
            let value = vec![step as u8; len];
            tree.insert(&key, &value).unwrap();
            model.insert(key.clone(), value);
        }
        assert_eq!(
            tree.get(&key).unwrap().as_ref(),
            model.get(&key),
            "step {step}"
        );
    }
    drop(tree);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let found: BTreeMap<_, _> = db
        .open_tree("limits")
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .collect();
    assert!(found == model, "scan after reopen differs from the model");
    // A large value takes whole pages of its own (24 bytes of each are its header).
    let stored = |len: usize| match len {
        len if len > max_value => len.div_ceil(page_size - 24) * page_size,
        len => len,
    };
    let live: usize = model.iter().map(|(k, v)| k.len() + stored(v.len())).sum();
    let file = db.stats().page_count as usize * page_size;
    // Each page holds at least a quarter page of entries once merged, more in practice;
    // a growth loop would exceed this by far.
    assert!(
        file <= 3 * live + 64 * page_size,
        "page file of {file} bytes for {live} live bytes"
    );
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn random_ops_at_the_limits_match_the_model_for_every_page_size() {
    let operations = std::env::var("LEANKV_LIMIT_OPS")
        .ok()
        .and_then(|ops| ops.parse().ok())
        .unwrap_or(1_500);
    for (index, page_size) in [4096, 8192, 16384, 32768, 65536].into_iter().enumerate() {
        random_ops_at_the_limits(page_size, 7 + index as u64, operations);
    }
}
