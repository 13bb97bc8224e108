//! Helpers shared by the integration tests.
#![allow(dead_code)]

use leankv::ablations::Policy;
use leankv::{Db, Options, Tree};
use std::collections::BTreeMap;
use std::path::Path;

/// Options for a small database: 4 KiB pages and a pool of `frames` frames, so that tests
/// with a few megabytes of data evict constantly.
pub fn small(frames: usize) -> Options {
    Options::default()
        .page_size(4096)
        .pool_size(frames * (4096 + 512))
}

pub fn open(dir: &Path, options: Options) -> Db {
    Db::open(dir, options).expect("open")
}

/// `open` with buffer-management policy `P` (the benchmarks' ablations).
pub fn open_as<P: Policy>(dir: &Path, options: Options) -> leankv::ablations::Db<P> {
    leankv::ablations::Db::open_with_policy(dir, options).expect("open")
}

/// Deterministic value for `key` at `version`, of varying length.
pub fn value_for(key: u64, version: u64, max_len: usize) -> Vec<u8> {
    let len = ((key.wrapping_mul(2654435761) ^ version) % max_len as u64) as usize;
    (0..len)
        .map(|i| (key as usize + i * 7 + version as usize) as u8)
        .collect()
}

pub fn key(n: u64) -> Vec<u8> {
    format!("key{n:08}").into_bytes()
}

/// Every pair of `tree`, whose keys the test wrote as text; panics on an error.
pub fn text_contents(tree: &Tree) -> BTreeMap<String, Vec<u8>> {
    tree.iter()
        .map(|item| {
            let (key, value) = item.unwrap();
            (String::from_utf8(key).unwrap(), value)
        })
        .collect()
}
