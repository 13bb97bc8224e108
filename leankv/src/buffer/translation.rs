//! The page-translation table of the `HashTable` and `Traditional` ablations: page id → frame
//! for every hot page, as in a traditional buffer manager (paper Fig. 2a).
//!
//! Sharded by page id, one mutex per shard, as a competent traditional buffer pool would do
//! it; every page access still takes one of these mutexes, which is the cost measured.
//! Lock order: a frame's latch, then its shard, then the cooling stage.

use super::frame::FrameId;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxHashMap;

const SHARDS: usize = 64;

/// One shard of the table, locked.
pub(crate) type TranslationShard<'a> = MutexGuard<'a, FxHashMap<u64, FrameId>>;

pub(crate) struct TranslationTable {
    shards: Vec<Mutex<FxHashMap<u64, FrameId>>>,
}

impl TranslationTable {
    /// A table with no shards: the swizzling policies never touch it.
    pub(crate) fn unused() -> TranslationTable {
        TranslationTable { shards: Vec::new() }
    }

    pub(crate) fn new() -> TranslationTable {
        TranslationTable {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// The shard that holds `page_id`, locked.
    pub(crate) fn shard(&self, page_id: u64) -> TranslationShard<'_> {
        let hash = page_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        self.shards[hash as usize % SHARDS].lock()
    }

    pub(crate) fn lookup(&self, page_id: u64) -> Option<FrameId> {
        self.shard(page_id).get(&page_id).copied()
    }
}
