//! A suite of YCSB runs: every engine × cooling fraction × thread count × distribution, side
//! by side in one invocation, with data loaded once per file format and reused across runs
//! (and across invocations: a `.loaded` marker records a finished load).

use crate::cgroup::{open_capped, MemoryCap};
use crate::diskstats::DiskReads;
use crate::engine::LOAD_DURABILITY;
use crate::engine::{
    counter, page_size_suffix, DurabilityLevel, Engine, EngineKind, PoolSize, ReadPath, Setup,
};
use crate::engines;
use crate::harness::{self, tempdir_in, Environment, Record};
use crate::report::{self, Latency, Table};
use crate::stats::{group_by, paired_table, round_order, Observation, Spread};
use crate::workload::{Distribution, LoadOrder, Mix};
use crate::ycsb::{self, RunSpec};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// What a suite runs.
#[derive(Debug, Clone, Serialize)]
pub struct Suite {
    pub label: String,
    pub engines: Vec<EngineKind>,
    pub records: u64,
    pub value_size: usize,
    pub threads: Vec<usize>,
    pub distributions: Vec<Distribution>,
    pub mix: Mix,
    /// The call YCSB reads go through.
    pub reads: ReadPath,
    /// Keys per read call (see [`RunSpec::read_batch`]).
    pub read_batch: usize,
    /// Operations per second over all threads (see [`RunSpec::target`]).
    pub target: Option<f64>,
    #[serde(serialize_with = "harness::seconds")]
    pub duration: Duration,
    /// Unmeasured run before the measured ones when the data does not fit the pool.
    #[serde(serialize_with = "harness::seconds")]
    pub warmup: Duration,
    pub pool: PoolSize,
    pub cooling: Vec<f64>,
    pub direct_io: bool,
    /// Run each engine (except `inmem`) in a memory cgroup of the pool size + 10%.
    pub memory_cap: bool,
    /// Of the measured runs (loads run with [`LOAD_DURABILITY`]).
    pub durability: DurabilityLevel,
    /// Log bytes between leankv's checkpoints in the measured runs (`None`: leankv's default).
    pub checkpoint_every: Option<u64>,
    pub data_dir: PathBuf,
    pub results: PathBuf,
    /// Which round of repeated runs this suite is (from 1), stored with every record.
    pub round: usize,
    /// leankv's page size (loads are kept per page size).
    pub page_size: usize,
    /// The order the load inserts records in (loads are kept per order).
    pub load_order: LoadOrder,
}

/// One measured run, as saved to the results file.
pub type RunRecord = Record<YcsbRun>;

/// What one YCSB run measured, with its parameters.
#[derive(Debug, Clone, Serialize)]
pub struct YcsbRun {
    pub engine: &'static str,
    pub engine_settings: String,
    pub records: u64,
    pub value_size: usize,
    pub data_bytes: u64,
    pub pool_bytes: usize,
    pub pool_to_data: f64,
    pub cooling_fraction: f64,
    pub threads: usize,
    /// Which round of repeated runs this one belongs to (from 1).
    pub round: usize,
    pub distribution: String,
    pub theta: f64,
    pub mix: String,
    /// The call reads went through (`copy` or `natural`).
    pub reads: ReadPath,
    /// Keys per read call (1: one `get` per read; more: `get_many`).
    pub read_batch: usize,
    /// The operations per second the threads were paced to (`None`: unpaced).
    pub target_ops_per_s: Option<f64>,
    pub duration_s: f64,
    pub ops: u64,
    pub ops_per_s: f64,
    pub ops_by_kind: BTreeMap<&'static str, u64>,
    pub latency: Latency,
    pub page_reads_per_s: f64,
    pub page_writes_per_s: f64,
    pub durability: DurabilityLevel,
    /// Write-ahead log bytes written and log syncs per second (leankv; `None` for engines that
    /// do not report them).
    pub log_mib_written_per_s: Option<f64>,
    pub log_syncs_per_s: Option<f64>,
    /// The engine's counters over the run (leankv: evictions, cooling hits, restarts, ...).
    pub engine_counters: BTreeMap<&'static str, u64>,
    pub peak_rss_bytes: u64,
    /// What the device under the data did during the run (engines that report their device).
    pub device: Option<DiskReads>,
    /// The memory cgroup's limit and its peak use (page cache included), when capped.
    pub memory_cap_bytes: Option<u64>,
    pub cgroup_peak_bytes: Option<u64>,
    pub direct_io: bool,
}

/// Runs the suite, appending each run to the results file and printing a table at the end.
pub fn run(suite: &Suite) -> Result<Vec<RunRecord>> {
    let records = run_engines(suite)?;
    println!("{}", table(&records).render());
    Ok(records)
}

/// Runs the suite `rounds` times with each of `durabilities`, interleaved (round after round,
/// each durability in turn within a round, so that the machine's drift reaches all alike; see
/// [`round_order`]), appending each run to the results file; prints the runs, the medians over
/// the rounds (with more than one) and the paired comparisons ([`paired`]).
pub fn run_rounds(
    suite: &Suite,
    durabilities: &[DurabilityLevel],
    rounds: usize,
) -> Result<Vec<RunRecord>> {
    let mut records = Vec::new();
    for round in 1..=rounds {
        for (index, durability) in round_order(durabilities, round) {
            let engines: Vec<EngineKind> = (round_order(&suite.engines, round).into_iter())
                .map(|(_, kind)| kind)
                .filter(|kind| kind.runs_at_durability(index))
                .collect();
            if engines.is_empty() {
                continue;
            }
            if rounds > 1 || durabilities.len() > 1 {
                info!("round {round}/{rounds}, durability {}", durability.name());
            }
            records.extend(run_engines(&Suite {
                engines,
                durability,
                round,
                ..suite.clone()
            })?);
        }
    }
    println!("{}", table(&records).render());
    if rounds > 1 {
        println!(
            "\nmedians over {rounds} rounds:\n{}",
            summary(&records).render()
        );
    }
    if let Some(paired) = paired(&records) {
        println!("\npaired by round:\n{}", paired.render());
    }
    Ok(records)
}

/// Each durability against the first within each engine, and each engine against the first
/// at each durability, paired by round within runs of one shape (`None` if nothing pairs).
pub fn paired(records: &[RunRecord]) -> Option<Table> {
    let observations: Vec<Observation> = records
        .iter()
        .map(|r| Observation {
            // In or beyond memory rather than pool/data, which moves with the data's size.
            shape: format!(
                "{}T, {}, {}, {} memory, cooling {}",
                r.threads,
                r.mix,
                r.distribution,
                if r.pool_to_data >= 1.0 {
                    "in"
                } else {
                    "beyond"
                },
                r.cooling_fraction
            ),
            engine: r.engine.to_string(),
            setting: r.durability.name().to_string(),
            round: r.round,
            rate: r.ops_per_s,
        })
        .collect();
    paired_table(&observations)
}

/// Every engine × cooling fraction of `suite`, appending each run to the results file.
fn run_engines(suite: &Suite) -> Result<Vec<RunRecord>> {
    std::fs::create_dir_all(&suite.data_dir)
        .with_context(|| format!("creating {}", suite.data_dir.display()))?;
    let environment = Environment::probe(&suite.data_dir);
    let mut records = Vec::new();
    for &kind in &suite.engines {
        let coolings: &[f64] = if kind.uses_leankv_files() {
            &suite.cooling
        } else {
            &suite.cooling[..1]
        };
        for &cooling in coolings {
            records.extend(run_engine(suite, kind, cooling, &environment)?);
        }
    }
    Ok(records)
}

/// Where engine `kind` keeps this suite's data.
fn data_path(suite: &Suite, kind: EngineKind) -> PathBuf {
    let format = kind.loader().name();
    suite.data_dir.join(format!(
        "{format}-{}x{}{}{}",
        suite.records,
        suite.value_size,
        page_size_suffix(suite.page_size),
        suite.load_order.suffix()
    ))
}

/// Every directory this suite loads data into (leankv's files serve as the size reference).
pub fn data_paths(suite: &Suite) -> Vec<PathBuf> {
    let mut paths = vec![data_path(suite, EngineKind::Leankv)];
    for &kind in &suite.engines {
        let path = data_path(suite, kind);
        if !kind.loads_per_run() && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// Removes its directories when dropped, and their parents if that leaves them empty.
pub struct RemoveOnDrop(pub Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for path in &self.0 {
            if path.exists() {
                if let Err(error) = std::fs::remove_dir_all(path) {
                    warn!("could not remove {}: {error}", path.display());
                }
            }
            if let Some(parent) = path.parent() {
                let _ = std::fs::remove_dir(parent); // only if empty
            }
        }
    }
}

/// Pool for loading: generous, so that loading measures inserts rather than eviction.
fn load_setup(suite: &Suite) -> Setup {
    let estimate = suite.records as usize * (suite.value_size + 8) * 2;
    Setup {
        pool_bytes: estimate.clamp(64 << 20, 8 << 30),
        cooling_fraction: 0.1,
        direct_io: suite.direct_io,
        data_bytes: estimate as u64,
        tables: ycsb::TABLES,
        scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
        durability: LOAD_DURABILITY,
        checkpoint_every: None,
        page_size: suite.page_size,
    }
}

/// Loads the suite's records into `path` unless a previous load finished there.
fn ensure_loaded(suite: &Suite, kind: EngineKind, path: &Path) -> Result<()> {
    engines::load_once(kind, path, &load_setup(suite), |engine| {
        info!("loading {} records into {}", suite.records, path.display());
        let rate = ycsb::load(engine, suite.records, suite.value_size, suite.load_order)?;
        info!("loaded at {rate:.0} records/s");
        Ok(())
    })
}

/// Size of the data as leankv stores it: the reference for pool sizes of all engines.
fn data_bytes(suite: &Suite) -> Result<u64> {
    let path = data_path(suite, EngineKind::Leankv);
    ensure_loaded(suite, EngineKind::Leankv, &path)?;
    Ok(report::data_disk_usage(&path))
}

fn run_engine(
    suite: &Suite,
    kind: EngineKind,
    cooling: f64,
    environment: &Environment,
) -> Result<Vec<RunRecord>> {
    let data_bytes = data_bytes(suite)?;
    if kind.uses_page_cache(suite.direct_io) && !suite.memory_cap {
        warn!(
            "{} caches through the OS page cache, which --pool does not cap; run it in \
             a memory cgroup of the pool's size for a beyond-memory comparison (bench/README.md)",
            kind.name()
        );
    }
    let setup = Setup {
        pool_bytes: suite.pool.bytes(data_bytes).max(1 << 20),
        cooling_fraction: cooling,
        direct_io: suite.direct_io,
        data_bytes,
        tables: ycsb::TABLES,
        scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
        durability: suite.durability,
        checkpoint_every: suite.checkpoint_every,
        page_size: suite.page_size,
    };
    let scratch = if kind.loads_per_run() {
        Some(tempdir_in(&suite.data_dir)?)
    } else {
        None
    };
    let (engine, cap) = open_capped(kind, suite.memory_cap, setup.pool_bytes, || {
        if let Some(scratch) = &scratch {
            let engine = engines::open(kind, scratch, &setup)?;
            info!("loading {} records into {}", suite.records, kind.name());
            ycsb::load(
                engine.as_ref(),
                suite.records,
                suite.value_size,
                suite.load_order,
            )?;
            Ok(engine)
        } else {
            let path = data_path(suite, kind);
            ensure_loaded(suite, kind, &path)?;
            engines::open(kind, &path, &setup)
        }
    })?;
    prepare(suite, engine.as_ref(), &setup, data_bytes)?;
    let next_insert = AtomicU64::new(suite.records + 1_000_000_000);
    let mut out = Vec::new();
    for &threads in &suite.threads {
        for &distribution in &suite.distributions {
            let spec = RunSpec {
                records: suite.records,
                value_size: suite.value_size,
                threads,
                distribution,
                mix: suite.mix.clone(),
                duration: suite.duration,
                reads: suite.reads,
                read_batch: suite.read_batch,
                target: suite.target,
            };
            let measured = ycsb::run(engine.as_ref(), &spec, &next_insert)?;
            let run = YcsbRun {
                engine: kind.name(),
                engine_settings: engine.settings(),
                records: suite.records,
                value_size: suite.value_size,
                data_bytes,
                pool_bytes: setup.pool_bytes,
                pool_to_data: setup.pool_bytes as f64 / data_bytes.max(1) as f64,
                cooling_fraction: cooling,
                threads,
                round: suite.round,
                distribution: distribution.to_string(),
                theta: distribution.theta(),
                mix: suite.mix.name.clone(),
                reads: suite.reads,
                read_batch: suite.read_batch,
                target_ops_per_s: suite.target,
                duration_s: measured.elapsed.as_secs_f64(),
                ops: measured.ops,
                ops_per_s: measured.ops_per_second(),
                ops_by_kind: measured
                    .ops_by_kind
                    .iter()
                    .filter(|(_, count)| *count > 0)
                    .map(|(op, count)| (op.name(), *count))
                    .collect(),
                latency: measured.latency,
                page_reads_per_s: measured.per_second(measured.io.page_reads),
                page_writes_per_s: measured.per_second(measured.io.page_writes),
                durability: suite.durability,
                log_mib_written_per_s: counter(&measured.counters, "log_bytes_written")
                    .map(|bytes| measured.per_second(bytes) / (1 << 20) as f64),
                log_syncs_per_s: counter(&measured.counters, "log_syncs")
                    .map(|syncs| measured.per_second(syncs)),
                engine_counters: measured.counters.iter().copied().collect(),
                peak_rss_bytes: measured.peak_rss_bytes,
                device: measured.device,
                memory_cap_bytes: cap.as_ref().map(|cap| cap.limit_bytes),
                cgroup_peak_bytes: cap.as_ref().map(MemoryCap::peak_bytes),
                direct_io: suite.direct_io,
            };
            let record = Record {
                header: environment.header("ycsb", &suite.label, suite),
                run,
            };
            println!(
                "  {:<12} {}T {:<10} {:<7} pool {:>6} MiB: {:>10.0} ops/s, p99 {:.1} µs, {:.0} reads/s",
                record.engine,
                threads,
                record.distribution,
                record.reads.name(),
                record.pool_bytes >> 20,
                record.ops_per_s,
                record.latency.p99_us,
                record.page_reads_per_s
            );
            report::append(&suite.results, &record)?;
            out.push(record);
        }
    }
    drop(engine);
    drop(cap);
    if let Some(scratch) = scratch {
        std::fs::remove_dir_all(scratch)?;
    }
    Ok(out)
}

/// Brings the engine to a steady state: all data in memory when the pool holds it (one full
/// scan), otherwise an unmeasured run of the suite's mix.
fn prepare(suite: &Suite, engine: &dyn Engine, setup: &Setup, data_bytes: u64) -> Result<()> {
    let started = Instant::now();
    if setup.pool_bytes as u64 >= data_bytes * 11 / 10 {
        let seen = harness::read_all(engine, [ycsb::TABLE])?;
        anyhow::ensure!(
            seen >= suite.records,
            "{} records found, {} loaded",
            seen,
            suite.records
        );
    } else if !suite.warmup.is_zero() {
        let spec = RunSpec {
            records: suite.records,
            value_size: suite.value_size,
            threads: *suite.threads.iter().max().unwrap_or(&1),
            distribution: suite.distributions[0],
            mix: suite.mix.clone(),
            duration: suite.warmup,
            reads: suite.reads,
            read_batch: suite.read_batch,
            // The warm-up brings the pool to a steady state as fast as it can.
            target: None,
        };
        ycsb::run(engine, &spec, &AtomicU64::new(u64::MAX / 2))?;
    }
    info!(
        "warmed up in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        engine.settings()
    );
    Ok(())
}

/// Whether `candidate` is leankv's run of the same shape as `run` (threads, keys, mix, in
/// memory or not, durability, round): the reference of the `×leankv` columns.
fn is_leankv_of(candidate: &YcsbRun, run: &YcsbRun) -> bool {
    candidate.engine == "leankv"
        && candidate.round == run.round
        && candidate.durability == run.durability
        && candidate.threads == run.threads
        && candidate.distribution == run.distribution
        && candidate.mix == run.mix
        && (candidate.pool_to_data >= 1.0) == (run.pool_to_data >= 1.0)
}

/// The results as a table; `×leankv` compares with leankv's run of the same shape.
pub fn table(records: &[RunRecord]) -> Table {
    let mut table = Table::new(&[
        "engine",
        "durability",
        "threads",
        "keys",
        "pool/data",
        "cooling",
        "ops/s",
        "×leankv",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "reads/s",
        "writes/s",
        "log MiB/s",
        "log syncs/s",
        "peak RSS MiB",
    ]);
    for record in records {
        let reference = records.iter().find(|other| is_leankv_of(other, record));
        table.row(vec![
            record.engine.to_string(),
            record.durability.name().to_string(),
            record.threads.to_string(),
            record.distribution.clone(),
            format!("{:.2}", record.pool_to_data),
            format!("{:.0}%", record.cooling_fraction * 100.0),
            format!("{:.0}", record.ops_per_s),
            reference.map_or("-".into(), |r| {
                format!("{:.2}", record.ops_per_s / r.ops_per_s)
            }),
            format!("{:.2}", record.latency.p50_us),
            format!("{:.2}", record.latency.p99_us),
            format!("{:.2}", record.latency.p999_us),
            format!("{:.0}", record.page_reads_per_s),
            format!("{:.0}", record.page_writes_per_s),
            report::rate_or_dash(record.log_mib_written_per_s, 1),
            report::rate_or_dash(record.log_syncs_per_s, 0),
            format!("{}", record.peak_rss_bytes >> 20),
        ]);
    }
    table
}

/// Median and spread of throughput over the rounds of each run shape (engine, durability,
/// threads, key distribution, mix, cooling, in memory or not); `×leankv` compares medians.
pub fn summary(records: &[RunRecord]) -> Table {
    let groups: Vec<(&RunRecord, Spread, Spread)> = group_by(records, |r| {
        (
            r.engine,
            r.durability,
            r.threads,
            r.distribution.clone(),
            r.mix.clone(),
            r.cooling_fraction.to_bits(),
            r.pool_to_data >= 1.0,
        )
    })
    .into_iter()
    .map(|(_, runs)| {
        let ops: Vec<f64> = runs.iter().map(|r| r.ops_per_s).collect();
        let p99: Vec<f64> = runs.iter().map(|r| r.latency.p99_us).collect();
        (runs[0], Spread::of(&ops), Spread::of(&p99))
    })
    .collect();
    let mut table = Table::new(&[
        "engine",
        "durability",
        "threads",
        "keys",
        "pool/data",
        "runs",
        "median ops/s",
        "min",
        "max",
        "range/median",
        "×leankv",
        "median p99 µs",
    ]);
    for (first, ops, p99) in &groups {
        let reference = groups
            .iter()
            .find(|(other, _, _)| is_leankv_of(other, first));
        table.row(vec![
            first.engine.to_string(),
            first.durability.name().to_string(),
            first.threads.to_string(),
            first.distribution.clone(),
            format!("{:.2}", first.pool_to_data),
            ops.runs.to_string(),
            format!("{:.0}", ops.median),
            format!("{:.0}", ops.min),
            format!("{:.0}", ops.max),
            format!("{:.1}%", ops.range_percent()),
            reference.map_or("-".into(), |(_, r, _)| {
                format!("{:.2}", ops.median / r.median)
            }),
            format!("{:.2}", p99.median),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_suite_runs_every_engine_and_records_each_run() {
        let dir = tempfile::tempdir().unwrap();
        let suite = Suite {
            label: "test".into(),
            engines: vec![
                EngineKind::Leankv,
                EngineKind::Inmem,
                EngineKind::Mmap,
                EngineKind::Lru,
            ],
            records: 20_000,
            value_size: 50,
            threads: vec![1, 2],
            distributions: vec![Distribution::Uniform],
            mix: Mix::preset('c').unwrap(),
            reads: ReadPath::Copy,
            read_batch: 1,
            target: None,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(100),
            pool: PoolSize::OfData(2.0),
            cooling: vec![0.1],
            direct_io: false,
            memory_cap: false,
            durability: DurabilityLevel::default(),
            checkpoint_every: None,
            data_dir: dir.path().join("data"),
            results: dir.path().join("results.jsonl"),
            round: 1,
            page_size: 4096,
            load_order: LoadOrder::Index,
        };
        let records = run(&suite).unwrap();
        assert_eq!(records.len(), 8);
        assert!(records[0].engine_settings.contains("4 KiB pages"));
        assert!(dir.path().join("data/leankv-20000x50-4k").is_dir());
        assert!(records.iter().all(|r| r.ops > 0 && r.pool_to_data >= 1.9));
        // leankv reopens its log-free load with its log; the baselines never log.
        assert!(records[0].engine_settings.contains("durability eventual"));
        assert!(records[0].log_syncs_per_s.is_some());
        assert!(records[2].engine_settings.contains("in-memory baseline"));
        assert_eq!(report::read_records(&suite.results).unwrap().len(), 8);
        // Beyond memory: the pool is a fifth of the data and pages are read.
        let small = Suite {
            engines: vec![EngineKind::Leankv],
            pool: PoolSize::OfData(0.2),
            threads: vec![1],
            ..suite
        };
        let records = run(&small).unwrap();
        assert!(records[0].page_reads_per_s > 0.0, "{:?}", records[0]);
        assert!(!records[0].engine_settings.contains("checkpoint every"));
        // A checkpoint interval asked for reaches leankv and its record.
        let checkpointed = Suite {
            checkpoint_every: Some(4 << 20),
            ..small.clone()
        };
        let settings = &run(&checkpointed).unwrap()[0].engine_settings;
        assert!(
            settings.contains("checkpoint every 4 MiB of log"),
            "{settings}"
        );
        // A second round: the summary has one line with the median of both.
        let mut rounds = records.clone();
        rounds.extend(
            run(&Suite {
                round: 2,
                ..small.clone()
            })
            .unwrap(),
        );
        assert_eq!((rounds[0].round, rounds[1].round), (1, 2));
        let medians = summary(&rounds).render();
        let lines: Vec<&str> = medians
            .lines()
            .filter(|l| l.starts_with("leankv"))
            .collect();
        assert_eq!(lines.len(), 1, "{medians}");
        assert!(lines[0].contains(" 2 "), "{medians}");
        assert!(medians.contains("1.00"), "{medians}");
        let counters = &records[0].engine_counters;
        assert!(
            counters["evictions"] > 0 && counters["unswizzles"] > 0,
            "{counters:?}"
        );
        let rendered = table(&records).render();
        assert!(rendered.contains("leankv"), "{rendered}");
        // Rounds of several durabilities: each in turn within a round, the baselines that
        // never log only at the first, and each compared with the first round by round.
        let updates = Suite {
            engines: vec![EngineKind::Leankv, EngineKind::Inmem],
            pool: PoolSize::OfData(2.0),
            mix: Mix::preset('a').unwrap(),
            ..small
        };
        let levels = [DurabilityLevel::Off, DurabilityLevel::None];
        let records = run_rounds(&updates, &levels, 2).unwrap();
        let order: Vec<(&str, &str, usize)> = records
            .iter()
            .map(|r| (r.engine, r.durability.name(), r.round))
            .collect();
        // Round 2 runs in reverse, so that no run always comes first.
        assert_eq!(
            order,
            [
                ("leankv", "off", 1),
                ("inmem", "off", 1),
                ("leankv", "none", 1),
                ("leankv", "none", 2),
                ("inmem", "off", 2),
                ("leankv", "off", 2),
            ]
        );
        assert!(records[0].engine_settings.contains("no WAL"));
        assert!(records[2].log_mib_written_per_s.unwrap() > 0.0);
        let rendered = paired(&records).unwrap().render();
        let rows: Vec<&str> = rendered.lines().skip(2).collect();
        assert_eq!(rows.len(), 2, "{rendered}");
        assert!(rows[0].contains("inmem off / leankv off"), "{rendered}");
        assert!(rows[1].contains("leankv none / leankv off"), "{rendered}");
        let ratio = |variant: usize, base: usize| {
            format!(
                "{:.2}",
                records[variant].ops_per_s / records[base].ops_per_s
            )
        };
        let per_round = format!(" {} {}  ", ratio(2, 0), ratio(3, 5));
        assert!(rows[1].contains(&per_round), "{per_round}\n{rendered}");
    }
}
