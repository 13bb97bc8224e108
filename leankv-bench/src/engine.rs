//! The key-value interface every benchmarked engine is driven through ([`Engine`]), the engines
//! the benchmarks know ([`EngineKind`]) and how one is set up for a run ([`Setup`],
//! [`PoolSize`], [`DurabilityLevel`]). The implementations live in `engines`, one file each.

use crate::diskstats::Disk;
use anyhow::Result;
use clap::ValueEnum;
use leankv::ablations::{HashTable, InMemory, Lean, Lru, Mmap, Pessimistic, Policy, Traditional};

/// Page I/O an engine has done so far (engines that cannot tell report zeros).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub page_reads: u64,
    pub page_writes: u64,
}

/// The commit unit of engines driven one operation at a time.
pub const OPERATION_COMMITS: &str =
    "operation: each write of a transaction commits on its own, so a crash can leave a \
     transaction partly applied";

/// What [`Engine::scan`] calls on each pair, in key order, until it returns false.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// A table of an engine: its index in the [`Setup::tables`] the engine was opened with.
pub type Table = usize;

/// The reads and writes the drivers make, on an engine or inside one of its transactions.
pub trait Operations {
    /// Reads `key` the way a user of the engine would, through its natural public call, and
    /// hands the value to `consume`; false if absent. Engines whose natural call returns an
    /// owned value (leankv's `Tree::get`) pay its allocation here.
    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool>;
    /// Copies the value of `key` into `value`; false if absent. By default through
    /// [`Engine::natural_read`], which for engines that lend a slice is their fastest read.
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        self.natural_read(table, key, &mut |found| value.extend_from_slice(found))
    }
    /// Reads `keys` and hands each value found to `found(index, value)` (`index` is the
    /// key's position in `keys`; any order); returns how many were found. By default one
    /// natural read after another; engines with a read of many keys that overlaps their I/O
    /// use it (leankv: `Tree::get_many_with`).
    fn get_many(
        &self,
        table: Table,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize> {
        let mut count = 0;
        for (index, key) in keys.iter().enumerate() {
            count += usize::from(self.natural_read(table, key, &mut |value| found(index, value))?);
        }
        Ok(count)
    }
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
    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()>;
}

/// What the drivers need from an engine. Implementations are shared by all worker threads.
/// Each operation stands alone (the engines' transactions are not used across operations).
pub trait Engine: Operations + Send + Sync {
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
    /// Runs `body` as one transaction: engines that can make its writes one atomic commit do
    /// (see [`Engine::transaction_unit`]); the others run each operation as its own commit
    /// (`body(self)`).
    fn transaction(&self, body: &mut dyn FnMut(&dyn Operations) -> Result<()>) -> Result<()>;
    /// What one commit holds inside [`Engine::transaction`], for the results.
    fn transaction_unit(&self) -> &'static str {
        OPERATION_COMMITS
    }
    /// Makes everything written so far durable (or as durable as the engine gets).
    fn flush(&self) -> Result<()>;
    /// Settings a reader of the results needs: memory budget, durability, compression.
    fn settings(&self) -> String;
    /// The block device the engine reads its pages from, if it has one the kernel counts.
    fn disk(&self) -> Option<Disk> {
        None
    }
}

/// Reads up to `count` pairs of `table` from `start` on; returns how many there were.
pub fn scan_count(
    engine: &dyn Operations,
    table: Table,
    start: &[u8],
    count: usize,
) -> Result<usize> {
    let mut seen = 0;
    if count > 0 {
        engine.scan(table, start, None, &mut |_, _| {
            seen += 1;
            seen < count
        })?;
    }
    Ok(seen)
}

/// The value of counter `name` in `counters` (`None`: the engine has no such counter).
pub fn counter(counters: &[(&'static str, u64)], name: &str) -> Option<u64> {
    counters
        .iter()
        .find_map(|&(n, value)| (n == name).then_some(value))
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
            let earlier = counter(before, name).unwrap_or(0);
            (name, after.saturating_sub(earlier))
        })
        .collect()
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

    /// Whether this engine runs at the `index`-th of the durabilities asked for: engines that
    /// keep nothing beyond the process never log, so they run at the first only.
    pub fn runs_at_durability(self, index: usize) -> bool {
        index == 0 || !self.loads_per_run()
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

/// When a commit is durable: the `--durability` levels. Each engine maps a level to the
/// closest setting it has, and its settings string says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DurabilityLevel {
    /// No write-ahead log: leankv as the paper's logging-free engine (a crash loses everything
    /// since the last flush); peers log as little as they can.
    Off,
    /// Logged, but never synced on the commit's account (when the log's buffer fills, at
    /// checkpoints and on flush).
    None,
    /// Logged and synced within a bounded delay (leankv: 10 ms). leankv's default.
    #[default]
    Eventual,
    /// Synced before the commit returns (leankv: group commit).
    Immediate,
}

impl DurabilityLevel {
    pub fn name(self) -> &'static str {
        match self {
            DurabilityLevel::Off => "off",
            DurabilityLevel::None => "none",
            DurabilityLevel::Eventual => "eventual",
            DurabilityLevel::Immediate => "immediate",
        }
    }

    /// leankv's durability for this level; `None` for `off` (no log at all).
    pub fn leankv(self) -> Option<leankv::Durability> {
        match self {
            DurabilityLevel::Off => None,
            DurabilityLevel::None => Some(leankv::Durability::None),
            DurabilityLevel::Eventual => Some(leankv::Durability::Eventual),
            DurabilityLevel::Immediate => Some(leankv::Durability::Immediate),
        }
    }
}

/// Which call the YCSB reads go through: the `--reads` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadPath {
    /// Each engine's fastest read: the value copied into a buffer the worker reuses (leankv:
    /// `Tree::get_with`; the peers lend a slice).
    #[default]
    Copy,
    /// Each engine's natural public read, as users call it: leankv's `Tree::get` returns an
    /// owned `Vec` (one allocation per read); LMDB, RocksDB and redb lend a slice.
    Natural,
}

impl ReadPath {
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Copy => "copy",
            ReadPath::Natural => "natural",
        }
    }
}

/// What loads run under: loads are not measured and end with a flush, so the cheapest level
/// serves (a load in leankv's format opens under any level once closed cleanly).
pub const LOAD_DURABILITY: DurabilityLevel = DurabilityLevel::Off;

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
    pub durability: DurabilityLevel,
    /// Log bytes between leankv's checkpoints (`None`: leankv's default).
    pub checkpoint_every: Option<u64>,
    /// leankv's page size for a new database (an existing one keeps its own).
    pub page_size: usize,
}

/// What a data directory's name adds for a page size other than leankv's default (loads are
/// kept per page size: a database keeps the page size it was created with).
pub fn page_size_suffix(page_size: usize) -> String {
    if page_size == leankv::DEFAULT_PAGE_SIZE {
        String::new()
    } else {
        format!("-{}k", page_size >> 10)
    }
}

/// A page size argument: a power of two from 4K to 64K (bytes, or with a K suffix).
pub fn parse_page_size(text: &str) -> Result<usize, String> {
    parse_bytes(text)
        .map(|bytes| bytes as usize)
        .filter(|bytes| bytes.is_power_of_two() && (4096..=65536).contains(bytes))
        .ok_or_else(|| format!("{text:?}: expected a power of two from 4K to 64K"))
}

#[cfg(test)]
impl Setup {
    /// A small setup for tests: an 8 MiB pool, one table "t", buffered I/O, no read-ahead.
    pub fn for_tests(durability: DurabilityLevel) -> Setup {
        Setup {
            pool_bytes: 8 << 20,
            cooling_fraction: 0.1,
            direct_io: false,
            data_bytes: 1 << 20,
            tables: &["t"],
            scan_prefetch: 0,
            durability,
            checkpoint_every: None,
            page_size: leankv::DEFAULT_PAGE_SIZE,
        }
    }
}

/// The memory budget of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PoolSize {
    Bytes(usize),
    /// A multiple of the data's size on disk (0.2 = data five times the pool).
    OfData(f64),
}

impl std::str::FromStr for PoolSize {
    type Err = String;

    /// A size (`512M`, `2G`, `1.5GiB`: binary units, by `parse-size`) or `0.2x` (a multiple of
    /// the data size).
    fn from_str(text: &str) -> Result<PoolSize, String> {
        let invalid = || format!("{text:?}: expected e.g. 512M, 2G or 0.2x");
        if let Some(factor) = text.strip_suffix('x') {
            return factor
                .parse::<f64>()
                .ok()
                .filter(|n| *n > 0.0 && n.is_finite())
                .map(PoolSize::OfData)
                .ok_or_else(invalid);
        }
        parse_bytes(text)
            .and_then(|bytes| usize::try_from(bytes).ok())
            .map(PoolSize::Bytes)
            .ok_or_else(invalid)
    }
}

/// leankv refuses shorter checkpoint intervals.
const MIN_CHECKPOINT: u64 = 1 << 20;

/// A checkpoint interval in log bytes (`256M`, `1G`): at least 1 MiB, as leankv asks.
pub fn parse_checkpoint_interval(text: &str) -> Result<u64, String> {
    parse_bytes(text)
        .filter(|&bytes| bytes >= MIN_CHECKPOINT)
        .ok_or_else(|| format!("{text:?}: expected a size of at least 1M, e.g. 256M or 1G"))
}

/// A positive size in bytes: `512M`, `2G`, `1.5GiB` (binary units, by `parse-size`).
pub fn parse_bytes(text: &str) -> Option<u64> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(text)
        .ok()
        .filter(|&bytes| bytes > 0)
}

impl std::fmt::Display for PoolSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolSize::Bytes(bytes) if bytes % (1 << 20) == 0 => write!(f, "{}M", bytes >> 20),
            PoolSize::Bytes(bytes) => write!(f, "{bytes}"),
            PoolSize::OfData(factor) => write!(f, "{factor}x"),
        }
    }
}

impl serde::Serialize for PoolSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl PoolSize {
    pub fn bytes(self, data_bytes: u64) -> usize {
        match self {
            PoolSize::Bytes(bytes) => bytes,
            PoolSize::OfData(factor) => (data_bytes as f64 * factor) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_parse() {
        assert_eq!("512M".parse(), Ok(PoolSize::Bytes(512 << 20)));
        assert_eq!("2G".parse(), Ok(PoolSize::Bytes(2 << 30)));
        assert_eq!("1.5GiB".parse(), Ok(PoolSize::Bytes(3 << 29)));
        assert!("0M".parse::<PoolSize>().is_err());
        assert_eq!("0.2x".parse(), Ok(PoolSize::OfData(0.2)));
        assert!("abc".parse::<PoolSize>().is_err());
        assert!("-1M".parse::<PoolSize>().is_err());
        assert_eq!(PoolSize::OfData(0.5).bytes(1000), 500);
    }

    #[test]
    fn page_sizes_parse_and_name_their_loads() {
        assert_eq!(parse_page_size("4K"), Ok(4096));
        assert_eq!(parse_page_size("65536"), Ok(65536));
        for wrong in ["2K", "128K", "12K", "big"] {
            assert!(parse_page_size(wrong).is_err(), "{wrong}");
        }
        assert_eq!(page_size_suffix(leankv::DEFAULT_PAGE_SIZE), "");
        assert_eq!(page_size_suffix(4096), "-4k");
    }

    #[test]
    fn durability_levels_parse_and_map_to_leankv() {
        for level in DurabilityLevel::value_variants() {
            assert_eq!(DurabilityLevel::from_str(level.name(), false), Ok(*level));
        }
        assert!(DurabilityLevel::from_str("sync", false).is_err());
        assert_eq!(DurabilityLevel::default(), DurabilityLevel::Eventual);
        assert_eq!(
            DurabilityLevel::default().leankv(),
            Some(leankv::Durability::default())
        );
        assert_eq!(DurabilityLevel::Off.leankv(), None);
        assert_eq!(
            DurabilityLevel::Immediate.leankv(),
            Some(leankv::Durability::Immediate)
        );
    }
}
