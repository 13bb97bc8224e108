//! leankv itself under each of its buffer-management policies: the engine, its ablations (paper
//! Fig. 7: hash-table translation, LRU, pessimistic latches, all three) and the baselines that
//! keep every page in memory (`inmem`) or in an mmapped file (`mmap`).

use crate::engine::{Engine, IoCounters, Setup, Table, Visit};
use anyhow::{Context, Result};
use leankv::ablations::{Db, Policy, Tree};
use leankv::Options;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// leankv's options for `setup`.
fn options(setup: &Setup) -> Options {
    Options::default()
        .pool_size(setup.pool_bytes)
        .cooling_fraction(setup.cooling_fraction)
        .direct_io(setup.direct_io)
        .scan_prefetch(setup.scan_prefetch)
}

/// leankv under buffer-management policy `P`.
pub struct LeanEngine<P: Policy> {
    db: Db<P>,
    trees: Vec<Tree<P>>,
    settings: String,
}

impl<P: Policy> LeanEngine<P> {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Self> {
        let db = Db::<P>::open_with_policy(dir, options(setup))
            .with_context(|| format!("opening {} in {}", P::NAME, dir.display()))?;
        Self::with_db(db, setup)
    }

    /// The policies that never evict keep their pages in the pool alone (for `Mmap` a
    /// mapped file in `dir`, sized for all data whatever the budget); the `MemoryStorage`
    /// behind them only holds the superblock.
    pub fn open_in_memory(dir: &Path, setup: &Setup) -> Result<Self> {
        let storage = Arc::new(leankv::testing::MemoryStorage::new());
        let mut options = options(setup).background_writer(false);
        if P::POOL_IN_FILE {
            let mapping = (setup.data_bytes as usize * 2).max(setup.pool_bytes);
            options = options.pool_size(mapping);
        }
        let db = Db::<P>::open_with_storage_and_policy(dir, options, storage)
            .with_context(|| format!("opening {}", P::NAME))?;
        Self::with_db(db, setup)
    }

    fn with_db(db: Db<P>, setup: &Setup) -> Result<Self> {
        let trees = setup
            .tables
            .iter()
            .map(|name| db.open_tree(name))
            .collect::<leankv::Result<_>>()?;
        let stats = db.stats();
        let settings = format!(
            "pool {} MiB, {} KiB pages, cooling {:.0}%, scan read-ahead {} leaves, I/O {:?}, \
             no WAL (flush on close)",
            setup.pool_bytes >> 20,
            stats.page_size >> 10,
            setup.cooling_fraction * 100.0,
            setup.scan_prefetch,
            stats.io_mode,
        );
        Ok(LeanEngine {
            db,
            trees,
            settings,
        })
    }
}

impl<P: Policy> Engine for LeanEngine<P> {
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        Ok(self.trees[table]
            .get_with(key, |found| value.extend_from_slice(found))?
            .is_some())
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.trees[table].insert(key, value)?)
    }

    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        Ok(self.trees[table].update_in_place(key, modify)?.is_some())
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        Ok(self.trees[table].remove(key)?)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(self.trees[table].scan::<&[u8], _>((Bound::Included(start), end), visit)?)
    }

    fn io(&self) -> IoCounters {
        let stats = self.db.stats();
        IoCounters {
            page_reads: stats.page_reads,
            page_writes: stats.page_writes,
        }
    }

    /// Pages allocated so far (the page file's high-water mark, whether or not it is written).
    fn data_bytes(&self) -> Option<u64> {
        let stats = self.db.stats();
        Some(stats.page_count * stats.page_size as u64)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let stats = self.db.stats();
        vec![
            ("page_reads", stats.page_reads),
            ("page_writes", stats.page_writes),
            ("background_writes", stats.background_writes),
            ("evictions", stats.evictions),
            ("unswizzles", stats.unswizzles),
            ("cooling_hits", stats.cooling_hits),
            ("restarts", stats.restarts),
            ("pessimistic_fallbacks", stats.pessimistic_fallbacks),
            ("read_waits", stats.read_waits),
            ("prefetch_reads", stats.prefetch_reads),
            ("scan_cooled", stats.scan_cooled),
        ]
    }

    fn flush(&self) -> Result<()> {
        if !P::EVICTS {
            return Ok(()); // nothing to make durable: its storage is memory
        }
        Ok(self.db.flush()?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }
}
