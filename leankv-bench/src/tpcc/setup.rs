//! What a TPC-C invocation runs ([`Config`]) and the loaded databases it starts from: loaded
//! once per engine format into `<dir>/tpcc-<format>-<W>w`, copied for every run.

use super::load;
use super::random::NurandConstants;
use super::schema;
use crate::engine::{
    page_size_suffix, DurabilityLevel, Engine, EngineKind, PoolSize, Setup, LOAD_DURABILITY,
};
use crate::engines;
use crate::harness;
use crate::report;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::info;

/// Seed of the loader and of the NURand constants (loads are reproducible).
pub(super) const SEED: u64 = 0x7C_C0DE;
/// What a `tpcc` invocation runs: every engine × pool × thread count.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub label: String,
    pub engines: Vec<EngineKind>,
    pub warehouses: u32,
    pub threads: Vec<usize>,
    #[serde(serialize_with = "harness::seconds")]
    pub duration: Duration,
    /// Unmeasured transactions before each run when the pool does not hold the data (with
    /// data in memory, the run starts after reading it all).
    #[serde(serialize_with = "harness::seconds")]
    pub warmup: Duration,
    /// Each worker owns the warehouses `w` with `(w - 1) % threads == worker` and only
    /// starts transactions there (remote accesses still reach other warehouses).
    pub affinity: bool,
    pub pools: Vec<PoolSize>,
    /// Rounds over all runs, interleaved (round after round; within a round, each engine and
    /// durability in turn for each pool and thread count), so that drift of a shared machine
    /// hits every engine alike; the summaries take medians and ratios paired by round.
    pub repeat: usize,
    pub cooling_fraction: f64,
    pub check: bool,
    pub direct_io: bool,
    pub memory_cap: bool,
    /// Of the measured runs, each in turn (the first is the others' baseline); with engines
    /// that cannot commit a transaction at once, of every write it makes (see `txn`).
    pub durabilities: Vec<DurabilityLevel>,
    /// Log bytes between leankv's checkpoints in the measured runs (`None`: leankv's default).
    pub checkpoint_every: Option<u64>,
    pub data_dir: PathBuf,
    pub results: PathBuf,
    /// leankv's page size (loads are kept per page size).
    pub page_size: usize,
}

/// Where engine `kind` keeps its loaded copy of `config`'s warehouses.
pub(super) fn data_path(config: &Config, kind: EngineKind) -> PathBuf {
    let format = kind.loader().name();
    config.data_dir.join(format!(
        "tpcc-{format}-{}w{}",
        config.warehouses,
        page_size_suffix(config.page_size)
    ))
}

pub(super) fn constants() -> NurandConstants {
    NurandConstants::for_load(&mut fastrand::Rng::with_seed(SEED))
}

/// Opens `kind` over `path` with a pool large enough to load everything into memory.
pub(super) fn load_setup(config: &Config) -> Setup {
    let estimate = u64::from(config.warehouses) * (200 << 20);
    Setup {
        pool_bytes: estimate as usize,
        cooling_fraction: 0.1,
        direct_io: config.direct_io,
        data_bytes: estimate,
        tables: schema::TABLES,
        scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
        durability: LOAD_DURABILITY,
        checkpoint_every: None,
        page_size: config.page_size,
    }
}

pub(super) fn load_into(engine: &dyn Engine, config: &Config) -> Result<()> {
    let started = Instant::now();
    // One loader per core (warehouses are independent); the data does not depend on the count.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rows = load::load(engine, config.warehouses, threads, constants(), SEED)?;
    engine.flush()?;
    info!(
        "loaded {} warehouses ({rows} rows) in {:.1} s",
        config.warehouses,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads `config`'s warehouses for `kind` unless a previous load finished; returns the path.
pub(crate) fn ensure_loaded(config: &Config, kind: EngineKind) -> Result<PathBuf> {
    let path = data_path(config, kind);
    engines::load_once(kind, &path, &load_setup(config), |engine| {
        info!("loading TPC-C into {}", path.display());
        load_into(engine, config)
    })?;
    Ok(path)
}

/// Copies the files of `from` (recursively, without the load marker) into `to`, synced: a run
/// must not start while the copy is still being written back (the device busy with it, and on
/// ext4 direct writes past the part on disk count as extending the file, taking its lock).
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_name() != ".loaded" {
            std::fs::copy(entry.path(), &target)
                .and_then(|_| std::fs::File::open(&target)?.sync_all())
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The data size: what the engine reports, else the size of its files.
pub(super) fn data_size(engine: &dyn Engine, dir: &Path) -> u64 {
    engine
        .data_bytes()
        .unwrap_or_else(|| report::disk_usage(dir))
}
