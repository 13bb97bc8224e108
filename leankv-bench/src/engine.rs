//! The key-value interface every benchmarked engine is driven through, and the engines built
//! from leankv itself: the engine, its ablations (paper Fig. 7) and the in-memory baseline.
//! Peer engines live in `peers` behind cargo features.

use anyhow::{Context, Result};
use clap::ValueEnum;
use leankv::ablations::{
    Db, HashTable, InMemory, Lean, Lru, Mmap, Pessimistic, Policy, Traditional, Tree,
};
use leankv::Options;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// Page I/O an engine has done so far (engines that cannot tell report zeros).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub page_reads: u64,
    pub page_writes: u64,
}

/// A table of an engine: its index in the [`Setup::tables`] the engine was opened with.
pub type Table = usize;

/// What the drivers need from an engine. Implementations are shared by all worker threads.
/// Each operation stands alone (the engines' transactions are not used across operations).
pub trait Engine: Send + Sync {
    /// Copies the value of `key` into `value`; false if absent.
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;
    /// Inserts or overwrites.
    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Inserts many pairs (the loader's path; engines with costly commits batch them).
    fn put_batch(&self, table: Table, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        pairs
            .iter()
            .try_for_each(|(key, value)| self.put(table, key, value))
    }
    /// Rewrites the value of `key` with `modify` (keeping its length), atomically with respect
    /// to other updates of the same key; false if absent.
    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool>;
    /// Removes `key`; false if it was absent.
    fn delete(&self, table: Table, key: &[u8]) -> Result<bool>;
    /// Calls `visit` on the pairs from `start` on (up to `end`, excluded, if given), in key
    /// order, until it returns false or the range ends. Knowing the end lets engines stop
    /// reading (and reading ahead) there.
    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()>;
    fn io(&self) -> IoCounters {
        IoCounters::default()
    }
    /// Bytes of data the engine holds, if it can tell (else callers measure its files).
    fn data_bytes(&self) -> Option<u64> {
        None
    }
    /// The engine's own counters, by name (empty for engines that expose none).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// Makes everything written so far durable (or as durable as the engine gets).
    fn flush(&self) -> Result<()>;
    /// Settings a reader of the results needs: memory budget, durability, compression.
    fn settings(&self) -> String;
}

/// Reads up to `count` pairs of `table` from `start` on; returns how many there were.
pub fn scan_count(engine: &dyn Engine, table: Table, start: &[u8], count: usize) -> Result<usize> {
    let mut seen = 0;
    if count > 0 {
        engine.scan(table, start, None, &mut |_, _| {
            seen += 1;
            seen < count
        })?;
    }
    Ok(seen)
}

/// How much each of `engine`'s counters grew since `before` (an earlier `counters()`).
pub fn counters_since(
    engine: &dyn Engine,
    before: &[(&'static str, u64)],
) -> Vec<(&'static str, u64)> {
    engine
        .counters()
        .into_iter()
        .map(|(name, after)| {
            let earlier = before
                .iter()
                .find_map(|&(n, value)| (n == name).then_some(value))
                .unwrap_or(0);
            (name, after.saturating_sub(earlier))
        })
        .collect()
}

/// Runs `load` on `kind`'s loader (see [`EngineKind::loader`]) opened over `path`, unless a
/// previous load finished there (it leaves a `.loaded` marker); a partial load is removed first.
pub fn load_once(
    kind: EngineKind,
    path: &Path,
    setup: &Setup,
    load: impl FnOnce(&dyn Engine) -> Result<()>,
) -> Result<()> {
    let marker = path.join(".loaded");
    if marker.exists() {
        return Ok(());
    }
    if path.exists() {
        std::fs::remove_dir_all(path)?;
    }
    let engine = open(kind.loader(), path, setup)?;
    load(engine.as_ref())?;
    drop(engine);
    std::fs::write(&marker, "loaded\n")?;
    Ok(())
}

/// Every engine the benchmarks know, whether or not this build includes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// leankv as built: swizzling, cooling-stage replacement, optimistic latches.
    Leankv,
    /// Ablation: page translation through a sharded hash table instead of swips.
    HashTable,
    /// Ablation: LRU list updated on every access instead of random unswizzling + FIFO.
    Lru,
    /// Ablation: shared/exclusive latch coupling instead of optimistic latches.
    Pessimistic,
    /// All three ablations: a traditional buffer manager.
    Traditional,
    /// The same tree on plain memory, no replacement (the pool must hold everything).
    Inmem,
    /// The same tree with its nodes in an mmapped file, paged by the kernel.
    Mmap,
    /// RocksDB (feature `rocksdb`).
    Rocksdb,
    /// LMDB through heed (feature `lmdb`).
    Lmdb,
    /// redb (feature `redb`).
    Redb,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Leankv => Lean::NAME,
            EngineKind::HashTable => HashTable::NAME,
            EngineKind::Lru => Lru::NAME,
            EngineKind::Pessimistic => Pessimistic::NAME,
            EngineKind::Traditional => Traditional::NAME,
            EngineKind::Inmem => InMemory::NAME,
            EngineKind::Mmap => Mmap::NAME,
            EngineKind::Rocksdb => "rocksdb",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Redb => "redb",
        }
    }

    /// Engines that share leankv's file format: data loaded once serves all of them.
    pub fn uses_leankv_files(self) -> bool {
        matches!(
            self,
            EngineKind::Leankv
                | EngineKind::HashTable
                | EngineKind::Lru
                | EngineKind::Pessimistic
                | EngineKind::Traditional
        )
    }

    /// The engine that writes the files this one reads: leankv's format serves all its
    /// policies, so data loaded once serves every one of them.
    pub fn loader(self) -> EngineKind {
        if self.uses_leankv_files() {
            EngineKind::Leankv
        } else {
            self
        }
    }

    /// Engines that keep no files between runs and are loaded afresh for each.
    pub fn loads_per_run(self) -> bool {
        matches!(self, EngineKind::Inmem | EngineKind::Mmap)
    }

    /// Engines whose cached data lives in the OS page cache (to be capped by a memory
    /// cgroup); RocksDB only when it reads without O_DIRECT.
    pub fn uses_page_cache(self, direct_io: bool) -> bool {
        match self {
            EngineKind::Lmdb | EngineKind::Redb | EngineKind::Mmap => true,
            EngineKind::Rocksdb => !direct_io,
            _ => false,
        }
    }
}

/// How an engine is set up for a run.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Memory budget for cached pages, in bytes.
    pub pool_bytes: usize,
    pub cooling_fraction: f64,
    pub direct_io: bool,
    /// Size of the data (leankv's page file); engines that map all of it size mappings by it.
    pub data_bytes: u64,
    /// The tables to open (created if missing); `Table` indexes this list.
    pub tables: &'static [&'static str],
    /// Leaves leankv's range scans read ahead at most (0: none).
    pub scan_prefetch: usize,
}

impl Setup {
    fn leankv_options(&self) -> Options {
        Options::default()
            .pool_size(self.pool_bytes)
            .cooling_fraction(self.cooling_fraction)
            .direct_io(self.direct_io)
            .scan_prefetch(self.scan_prefetch)
    }
}

/// Opens engine `kind` with its files in `dir` (created if missing).
pub fn open(kind: EngineKind, dir: &Path, setup: &Setup) -> Result<Arc<dyn Engine>> {
    let engine: Arc<dyn Engine> = match kind {
        EngineKind::Leankv => Arc::new(LeanEngine::<Lean>::open(dir, setup)?),
        EngineKind::HashTable => Arc::new(LeanEngine::<HashTable>::open(dir, setup)?),
        EngineKind::Lru => Arc::new(LeanEngine::<Lru>::open(dir, setup)?),
        EngineKind::Pessimistic => Arc::new(LeanEngine::<Pessimistic>::open(dir, setup)?),
        EngineKind::Traditional => Arc::new(LeanEngine::<Traditional>::open(dir, setup)?),
        EngineKind::Inmem => Arc::new(LeanEngine::<InMemory>::open_in_memory(dir, setup)?),
        EngineKind::Mmap => Arc::new(LeanEngine::<Mmap>::open_in_memory(dir, setup)?),
        EngineKind::Rocksdb | EngineKind::Lmdb | EngineKind::Redb => {
            crate::peers::open(kind, dir, setup)?
        }
    };
    Ok(engine)
}

/// leankv under buffer-management policy `P`.
pub struct LeanEngine<P: Policy> {
    db: Db<P>,
    trees: Vec<Tree<P>>,
    settings: String,
}

impl<P: Policy> LeanEngine<P> {
    fn open(dir: &Path, setup: &Setup) -> Result<Self> {
        let db = Db::<P>::open_with_policy(dir, setup.leankv_options())
            .with_context(|| format!("opening {} in {}", P::NAME, dir.display()))?;
        Self::with_db(db, setup)
    }

    /// The policies that never evict keep their pages in the pool alone (for `Mmap` a
    /// mapped file in `dir`, sized for all data whatever the budget); the `MemoryStorage`
    /// behind them only holds the superblock.
    fn open_in_memory(dir: &Path, setup: &Setup) -> Result<Self> {
        let storage = Arc::new(leankv::testing::MemoryStorage::new());
        let mut options = setup.leankv_options().background_writer(false);
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

    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
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

/// Fails with the feature to enable for an engine left out of this build.
#[cfg(not(all(feature = "lmdb", feature = "redb", feature = "rocksdb")))]
pub fn not_built(kind: EngineKind, feature: &str) -> Result<Arc<dyn Engine>> {
    anyhow::bail!(
        "{} is not part of this build: rebuild with `--features {feature}` (or `peers`)",
        kind.name()
    )
}
