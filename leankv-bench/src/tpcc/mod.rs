//! TPC-C (the paper's main workload, Fig. 1 and 7–9) over the key-value interface: nine
//! relations and two secondary indexes as tables (`schema`), the specification's loader
//! (`load`, with the generators of `random`), the five transactions (`txn`) in the standard
//! mix without think times, and the consistency conditions (`check`).
//!
//! Each run starts from a freshly loaded database: engines with files load once into
//! `<dir>/tpcc-<format>-<W>w` and every run works on a copy; the in-memory baselines load per
//! run. A monitor samples throughput, page I/O, bytes written and the data size every second,
//! so runs whose data outgrows the pool (Fig. 9) show where and how throughput changes.

pub mod check;
pub mod load;
pub mod random;
pub mod schema;
pub mod txn;

use crate::cgroup::MemoryCap;
use crate::engine::{self, Engine, EngineKind, Setup};
use crate::report::{self, Latency, Machine, Table};
use crate::stats::{group_by, Spread};
use crate::suite::{stop_all_on_failure, tempdir_in, unix_time, PoolSize};
use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use random::{NurandConstants, TpccRandom};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use txn::{Kind, Outcome, Worker};

/// Seed of the loader and of the NURand constants (loads are reproducible).
const SEED: u64 = 0x7C_C0DE;
/// What a `tpcc` invocation runs: every engine × pool × thread count.
#[derive(Debug, Clone)]
pub struct Config {
    pub label: String,
    pub engines: Vec<EngineKind>,
    pub warehouses: u32,
    pub threads: Vec<usize>,
    pub duration: Duration,
    /// Each worker owns the warehouses `w` with `(w - 1) % threads == worker` and only
    /// starts transactions there (remote accesses still reach other warehouses).
    pub affinity: bool,
    pub pools: Vec<PoolSize>,
    /// Rounds over all runs, interleaved (engine after engine, round after round), so that
    /// drift of a shared machine hits every engine alike; the summary takes medians.
    pub repeat: usize,
    pub cooling_fraction: f64,
    pub check: bool,
    pub direct_io: bool,
    pub memory_cap: bool,
    pub data_dir: PathBuf,
    pub results: PathBuf,
}

/// One second of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub second: f64,
    pub tps: f64,
    pub page_reads_per_s: f64,
    pub page_writes_per_s: f64,
    pub mib_read_per_s: f64,
    pub mib_written_per_s: f64,
    pub data_mib: f64,
}

/// One measured run, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct TpccRecord {
    pub benchmark: &'static str,
    pub label: String,
    pub unix_time: u64,
    pub engine: &'static str,
    pub engine_settings: String,
    pub warehouses: u32,
    pub threads: usize,
    pub affinity: bool,
    /// Which of the `repeat` rounds this run belongs to (from 1).
    pub round: usize,
    pub duration_s: f64,
    pub pool_bytes: usize,
    pub data_bytes_start: u64,
    pub data_bytes_end: u64,
    /// Pool over the data at the start (≥ 1: the run starts in memory).
    pub pool_to_data: f64,
    pub transactions: u64,
    pub tps: f64,
    /// Committed New-Order transactions per minute (TPC-C's tpmC, without think times).
    pub new_orders_per_min: f64,
    pub committed: BTreeMap<&'static str, u64>,
    pub rolled_back: u64,
    pub latency: BTreeMap<&'static str, Latency>,
    pub page_reads_per_s: f64,
    pub page_writes_per_s: f64,
    pub mib_written_per_s: f64,
    pub engine_counters: BTreeMap<&'static str, u64>,
    pub peak_rss_bytes: u64,
    pub memory_cap_bytes: Option<u64>,
    pub cgroup_peak_bytes: Option<u64>,
    /// "passed", "failed" or "not run".
    pub check: &'static str,
    pub series: Vec<Sample>,
    pub direct_io: bool,
    pub machine: Machine,
}

/// Runs `config`, appending each run to the results file; fails if a check fails.
pub fn run(config: &Config) -> Result<Vec<TpccRecord>> {
    if config.warehouses == 0 || config.threads.contains(&0) {
        bail!("warehouses and threads must be positive");
    }
    let most_threads = config.threads.iter().copied().max().unwrap_or(1);
    if config.affinity && most_threads > config.warehouses as usize {
        bail!(
            "with warehouse affinity every worker needs a warehouse of its own: {} threads, \
             {} warehouses (add warehouses or pass --affinity false)",
            most_threads,
            config.warehouses
        );
    }
    if config.check && !config.affinity && most_threads > 1 {
        bail!("--check needs warehouse affinity or one thread (see `txn`)");
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let machine = Machine::probe(&config.data_dir);
    let reference_bytes = if config
        .pools
        .iter()
        .any(|p| matches!(p, PoolSize::OfData(_)))
    {
        report::disk_usage(&ensure_loaded(config, EngineKind::Leankv)?)
    } else {
        0
    };
    let mut records = Vec::new();
    for round in 1..=config.repeat.max(1) {
        for &kind in &config.engines {
            for &pool in &config.pools {
                for &threads in &config.threads {
                    let pool_bytes = pool.bytes(reference_bytes).max(64 << 20);
                    let record = run_one(config, kind, pool_bytes, threads, round, &machine)?;
                    report::append(&config.results, &record)?;
                    let failed = record.check == "failed";
                    records.push(record);
                    if failed {
                        bail!("the consistency check failed (violations above)");
                    }
                }
            }
        }
    }
    println!("{}", table(&records).render());
    if config.repeat > 1 {
        println!(
            "\nmedians over {} rounds:\n{}",
            config.repeat,
            summary(&records).render()
        );
    }
    Ok(records)
}

/// Where engine `kind` keeps its loaded copy of `config`'s warehouses.
fn data_path(config: &Config, kind: EngineKind) -> PathBuf {
    let format = kind.loader().name();
    config
        .data_dir
        .join(format!("tpcc-{format}-{}w", config.warehouses))
}

fn constants() -> NurandConstants {
    NurandConstants::for_load(&mut fastrand::Rng::with_seed(SEED))
}

/// Opens `kind` over `path` with a pool large enough to load everything into memory.
fn load_setup(config: &Config) -> Setup {
    let estimate = u64::from(config.warehouses) * (200 << 20);
    Setup {
        pool_bytes: estimate as usize,
        cooling_fraction: 0.1,
        direct_io: config.direct_io,
        data_bytes: estimate,
        tables: schema::TABLES,
        scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
    }
}

fn load_into(engine: &dyn Engine, config: &Config) -> Result<()> {
    let started = Instant::now();
    // One loader per core (warehouses are independent); the data does not depend on the count.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rows = load::load(engine, config.warehouses, threads, constants(), SEED)?;
    engine.flush()?;
    println!(
        "  loaded {} warehouses ({rows} rows) in {:.1} s",
        config.warehouses,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads `config`'s warehouses for `kind` unless a previous load finished; returns the path.
fn ensure_loaded(config: &Config, kind: EngineKind) -> Result<PathBuf> {
    let path = data_path(config, kind);
    engine::load_once(kind, &path, &load_setup(config), |engine| {
        println!("loading TPC-C into {}", path.display());
        load_into(engine, config)
    })?;
    Ok(path)
}

/// Copies the files of `from` (recursively, without the load marker) into `to`.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_name() != ".loaded" {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Reads every table once, so that a run whose data fits the pool starts in memory.
fn warm(engine: &dyn Engine) -> Result<()> {
    for table in 0..schema::TABLES.len() {
        engine.scan(table, &[], None, &mut |_, _| true)?;
    }
    Ok(())
}

/// The data size: what the engine reports, else the size of its files.
fn data_size(engine: &dyn Engine, dir: &Path) -> u64 {
    engine
        .data_bytes()
        .unwrap_or_else(|| report::disk_usage(dir))
}

fn run_one(
    config: &Config,
    kind: EngineKind,
    pool_bytes: usize,
    threads: usize,
    round: usize,
    machine: &Machine,
) -> Result<TpccRecord> {
    println!(
        "tpcc: {} with {} warehouses, {threads} threads, pool {} MiB",
        kind.name(),
        config.warehouses,
        pool_bytes >> 20
    );
    let scratch = tempdir_in(&config.data_dir)?;
    let setup = Setup {
        pool_bytes,
        cooling_fraction: config.cooling_fraction,
        direct_io: config.direct_io,
        // Mapped baselines size their mapping by this: room for the data to grow.
        data_bytes: load_setup(config).data_bytes * 4,
        tables: schema::TABLES,
        scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
    };
    let capped = config.memory_cap && kind != EngineKind::Inmem;
    let enter_cap = || MemoryCap::enter(pool_bytes as u64 * 11 / 10);
    let mut cap = if capped && kind.loads_per_run() {
        Some(enter_cap()?)
    } else {
        None
    };
    let engine = if kind.loads_per_run() {
        let engine = engine::open(kind, &scratch, &setup)?;
        load_into(engine.as_ref(), config)?;
        engine
    } else {
        copy_dir(&ensure_loaded(config, kind)?, &scratch)?;
        engine::open(kind, &scratch, &setup)?
    };
    if capped && cap.is_none() {
        cap = Some(enter_cap()?);
    }
    let data_bytes_start = data_size(engine.as_ref(), &scratch);
    if pool_bytes as u64 >= data_bytes_start {
        warm(engine.as_ref())?;
    }
    report::reset_peak_rss();
    let measured = measure(config, engine.as_ref(), &scratch, threads)?;
    let check = if config.check {
        let violations = check::violations(engine.as_ref(), config.warehouses)?;
        for violation in &violations {
            eprintln!("  CHECK FAILED: {violation}");
        }
        if violations.is_empty() {
            println!("  consistency conditions 1-4 hold");
            "passed"
        } else {
            "failed"
        }
    } else {
        "not run"
    };
    let data_bytes_end = data_size(engine.as_ref(), &scratch);
    let seconds = measured.elapsed.as_secs_f64();
    let per_second = |count: u64| count as f64 / seconds;
    let transactions: u64 = measured.committed.values().sum::<u64>() + measured.rolled_back;
    let record = TpccRecord {
        benchmark: "tpcc",
        label: config.label.clone(),
        unix_time: unix_time(),
        engine: kind.name(),
        engine_settings: engine.settings(),
        warehouses: config.warehouses,
        threads,
        affinity: config.affinity,
        round,
        duration_s: seconds,
        pool_bytes,
        data_bytes_start,
        data_bytes_end,
        pool_to_data: pool_bytes as f64 / data_bytes_start.max(1) as f64,
        transactions,
        tps: per_second(transactions),
        new_orders_per_min: per_second(measured.committed["new_order"]) * 60.0,
        committed: measured.committed,
        rolled_back: measured.rolled_back,
        latency: measured.latency,
        page_reads_per_s: per_second(measured.page_reads),
        page_writes_per_s: per_second(measured.page_writes),
        mib_written_per_s: measured.bytes_written as f64 / seconds / (1 << 20) as f64,
        engine_counters: measured.counters,
        peak_rss_bytes: report::peak_rss(),
        memory_cap_bytes: cap.as_ref().map(|cap| cap.limit_bytes),
        cgroup_peak_bytes: cap.as_ref().map(MemoryCap::peak_bytes),
        check,
        series: measured.series,
        direct_io: config.direct_io,
        machine: machine.clone(),
    };
    drop(cap);
    drop(engine);
    std::fs::remove_dir_all(&scratch)?;
    println!(
        "  {:.0} tps ({:.0} New-Order/min), data {} -> {} MiB",
        record.tps,
        record.new_orders_per_min,
        record.data_bytes_start >> 20,
        record.data_bytes_end >> 20
    );
    Ok(record)
}

/// What the workers and the monitor measured.
struct Measured {
    elapsed: Duration,
    committed: BTreeMap<&'static str, u64>,
    rolled_back: u64,
    latency: BTreeMap<&'static str, Latency>,
    page_reads: u64,
    page_writes: u64,
    bytes_written: u64,
    counters: BTreeMap<&'static str, u64>,
    series: Vec<Sample>,
}

/// Per-worker tallies.
struct Tally {
    histograms: Vec<Histogram<u64>>,
    committed: [u64; Kind::ALL.len()],
    rolled_back: u64,
}

fn measure(config: &Config, engine: &dyn Engine, dir: &Path, threads: usize) -> Result<Measured> {
    let io_before = engine.io();
    let counters_before = engine.counters();
    let (_, written_before) = report::process_io_bytes();
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = started + config.duration;
    let run_constants = NurandConstants::for_run(constants(), &mut fastrand::Rng::with_seed(SEED));
    let (tallies, series) = std::thread::scope(|scope| {
        let monitor = scope.spawn(|| monitor(engine, dir, &done, &stop, started));
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let (done, stop) = (&done, &stop);
                scope.spawn(move || {
                    stop_all_on_failure(stop, || {
                        let seed = SEED ^ (worker as u64 + 1) << 40;
                        let random = TpccRandom::new(seed, run_constants);
                        work(
                            config, engine, random, worker, threads, deadline, done, stop,
                        )
                    })
                })
            })
            .collect();
        let tallies: Vec<Result<Tally>> = workers
            .into_iter()
            .map(|worker| worker.join().expect("worker panicked"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        let series = monitor.join().expect("monitor panicked");
        (tallies, series)
    });
    let elapsed = started.elapsed();
    let tallies = tallies.into_iter().collect::<Result<Vec<_>>>()?;
    let io_after = engine.io();
    let (_, written_after) = report::process_io_bytes();
    let mut committed = BTreeMap::new();
    let mut latency = BTreeMap::new();
    for (index, kind) in Kind::ALL.iter().enumerate() {
        committed.insert(
            kind.name(),
            tallies.iter().map(|t| t.committed[index]).sum(),
        );
        let mut merged = new_histogram();
        for tally in &tallies {
            merged.add(&tally.histograms[index]).expect("same bounds");
        }
        latency.insert(kind.name(), Latency::of(&merged));
    }
    let counters = engine::counters_since(engine, &counters_before)
        .into_iter()
        .collect();
    Ok(Measured {
        elapsed,
        committed,
        rolled_back: tallies.iter().map(|t| t.rolled_back).sum(),
        latency,
        page_reads: io_after.page_reads - io_before.page_reads,
        page_writes: io_after.page_writes - io_before.page_writes,
        bytes_written: written_after.saturating_sub(written_before),
        counters,
        series,
    })
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// One worker: transactions from the standard mix until the deadline.
#[allow(clippy::too_many_arguments)]
fn work(
    config: &Config,
    engine: &dyn Engine,
    random: TpccRandom,
    worker: usize,
    threads: usize,
    deadline: Instant,
    done: &AtomicU64,
    stop: &AtomicBool,
) -> Result<Tally> {
    let own: Vec<u32> = (1..=config.warehouses)
        .filter(|w| !config.affinity || (*w as usize - 1) % threads == worker)
        .collect();
    let mut worker_state = Worker::new(engine, random, config.warehouses, worker as u32 + 1);
    let mut tally = Tally {
        histograms: (0..Kind::ALL.len()).map(|_| new_histogram()).collect(),
        committed: [0; Kind::ALL.len()],
        rolled_back: 0,
    };
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let kind = Kind::draw(&mut worker_state.random.rng);
        let w = own[worker_state.random.rng.usize(..own.len())];
        let started = Instant::now();
        let outcome = worker_state
            .run(kind, w)
            .with_context(|| format!("{} on warehouse {w}", kind.name()))?;
        let index = kind as usize;
        tally.histograms[index].saturating_record(started.elapsed().as_nanos() as u64);
        match outcome {
            Outcome::Committed => tally.committed[index] += 1,
            Outcome::RolledBack => tally.rolled_back += 1,
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(tally)
}

/// Samples throughput, I/O and data size once a second until `stop`, then once more for the
/// run's last partial second (unless it is too short to give a rate), so that even a run of
/// one second has a sample however the monitor's wake-ups fall.
fn monitor(
    engine: &dyn Engine,
    dir: &Path,
    done: &AtomicU64,
    stop: &AtomicBool,
    started: Instant,
) -> Vec<Sample> {
    let mut series = Vec::new();
    let mut last = (Instant::now(), 0, engine.io(), report::process_io_bytes());
    let mut next = started + Duration::from_secs(1);
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let now = Instant::now();
        if stopping && now - last.0 < Duration::from_millis(250) {
            break;
        }
        if !stopping && now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        next += Duration::from_secs(1);
        let current = (
            now,
            done.load(Ordering::Relaxed),
            engine.io(),
            report::process_io_bytes(),
        );
        let seconds = (current.0 - last.0).as_secs_f64();
        let rate = |count: u64| count as f64 / seconds;
        let mib = |bytes: u64| bytes as f64 / seconds / (1 << 20) as f64;
        series.push(Sample {
            second: (now - started).as_secs_f64(),
            tps: rate(current.1 - last.1),
            page_reads_per_s: rate(current.2.page_reads - last.2.page_reads),
            page_writes_per_s: rate(current.2.page_writes - last.2.page_writes),
            mib_read_per_s: mib(current.3 .0.saturating_sub(last.3 .0)),
            mib_written_per_s: mib(current.3 .1.saturating_sub(last.3 .1)),
            data_mib: data_size(engine, dir) as f64 / (1 << 20) as f64,
        });
        last = current;
        if stopping {
            break;
        }
    }
    series
}

/// Median, lowest and highest tps of each engine, thread count and pool over the rounds;
/// `×leankv` compares medians.
pub fn summary(records: &[TpccRecord]) -> Table {
    let groups: Vec<((&str, usize, usize), Spread)> =
        group_by(records, |r| (r.engine, r.threads, r.pool_bytes))
            .into_iter()
            .map(|(shape, runs)| {
                (
                    shape,
                    Spread::of(&runs.iter().map(|r| r.tps).collect::<Vec<_>>()),
                )
            })
            .collect();
    let mut table = Table::new(&[
        "engine",
        "threads",
        "pool MiB",
        "median tps",
        "min",
        "max",
        "×leankv",
    ]);
    for ((engine, threads, pool), tps) in &groups {
        let reference = groups
            .iter()
            .find(|((e, t, p), _)| *e == "leankv" && t == threads && p == pool)
            .map(|(_, tps)| tps.median);
        table.row(vec![
            engine.to_string(),
            threads.to_string(),
            (pool >> 20).to_string(),
            format!("{:.0}", tps.median),
            format!("{:.0}", tps.min),
            format!("{:.0}", tps.max),
            reference.map_or("-".into(), |r| format!("{:.2}", tps.median / r)),
        ]);
    }
    table
}

/// The results as a table; `×leankv` compares with leankv's run of the same shape and round.
pub fn table(records: &[TpccRecord]) -> Table {
    let mut table = Table::new(&[
        "engine",
        "threads",
        "pool MiB",
        "data MiB start->end",
        "tps",
        "×leankv",
        "NewOrd/min",
        "NO p99 µs",
        "reads/s",
        "MiB/s written",
        "check",
    ]);
    for record in records {
        let reference = records.iter().find(|other| {
            other.engine == "leankv"
                && other.threads == record.threads
                && other.pool_bytes == record.pool_bytes
                && other.round == record.round
        });
        table.row(vec![
            record.engine.to_string(),
            record.threads.to_string(),
            (record.pool_bytes >> 20).to_string(),
            format!(
                "{}->{}",
                record.data_bytes_start >> 20,
                record.data_bytes_end >> 20
            ),
            format!("{:.0}", record.tps),
            reference.map_or("-".into(), |r| format!("{:.2}", record.tps / r.tps)),
            format!("{:.0}", record.new_orders_per_min),
            format!("{:.0}", record.latency["new_order"].p99_us),
            format!("{:.0}", record.page_reads_per_s),
            format!("{:.1}", record.mib_written_per_s),
            record.check.to_string(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::schema::*;
    use super::*;

    fn config(dir: &Path) -> Config {
        Config {
            label: "test".into(),
            engines: vec![EngineKind::Leankv],
            warehouses: 2,
            threads: vec![2],
            duration: Duration::from_secs(1),
            affinity: true,
            pools: vec![PoolSize::Bytes(48 << 20)],
            repeat: 1,
            cooling_fraction: 0.1,
            check: true,
            direct_io: false,
            memory_cap: false,
            data_dir: dir.join("data"),
            results: dir.join("results.jsonl"),
        }
    }

    /// A few hundred transactions of each kind on two warehouses, with a pool a sixth of the
    /// data so that pages are evicted and read back, then the consistency checks; then
    /// damage that each check must notice.
    #[test]
    fn every_transaction_keeps_the_database_consistent() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let setup = Setup {
            pool_bytes: 48 << 20,
            ..load_setup(&config)
        };
        let engine = engine::open(EngineKind::Leankv, dir.path(), &setup).unwrap();
        let engine = engine.as_ref();
        load::load(engine, 2, 2, constants(), SEED).unwrap();
        assert!(check::violations(engine, 2).unwrap().is_empty());
        let run_constants = NurandConstants::for_run(constants(), &mut fastrand::Rng::new());
        let mut worker = Worker::new(engine, TpccRandom::new(5, run_constants), 2, 1);
        let mut rolled_back = 0;
        for kind in Kind::ALL {
            for n in 0..300 {
                let outcome = worker.run(kind, 1 + n % 2).unwrap();
                rolled_back += u32::from(outcome == Outcome::RolledBack);
            }
        }
        assert!(
            rolled_back < 20,
            "{rolled_back} rollbacks, expected about 3"
        );
        let counters: BTreeMap<_, _> = engine.counters().into_iter().collect();
        assert!(
            counters["evictions"] > 0 && counters["page_reads"] > 0,
            "{counters:?}"
        );
        let violations = check::violations(engine, 2).unwrap();
        assert!(violations.is_empty(), "{violations:?}");

        // Delivery removed the oldest new orders and stamped their lines.
        let mut buffer = Vec::new();
        assert!(!engine
            .get(
                NEW_ORDER,
                &order_key(1, 1, load::FIRST_UNDELIVERED),
                &mut buffer
            )
            .unwrap());
        assert!(engine
            .get(
                ORDER_LINE,
                &order_line_key(1, 1, load::FIRST_UNDELIVERED, 1),
                &mut buffer
            )
            .unwrap());
        assert_ne!(OrderLine::decode(&buffer).unwrap().delivery_date, 0);

        // Condition 1: a payment that reached the district but not the warehouse.
        engine
            .update(DISTRICT, &district_key(2, 3), &mut |bytes| {
                let mut district = District::decode(bytes).unwrap();
                district.ytd += 1;
                district.encode_into(bytes);
            })
            .unwrap();
        // Condition 4: a lost order line.
        assert!(engine
            .delete(ORDER_LINE, &order_line_key(1, 4, 17, 1))
            .unwrap());
        // Conditions 2 and 3: an undelivered order lost from NEW-ORDER, inside the range.
        let mut new_orders = Vec::new();
        engine
            .scan(NEW_ORDER, &district_key(1, 5), None, &mut |key, _| {
                new_orders.push(key.to_vec());
                new_orders.len() < 2
            })
            .unwrap();
        assert!(engine.delete(NEW_ORDER, &new_orders[1]).unwrap());
        let violations = check::violations(engine, 2).unwrap().join("\n");
        assert!(
            violations.contains("condition 1, warehouse 2"),
            "{violations}"
        );
        assert!(
            violations.contains("condition 4, district 1/4"),
            "{violations}"
        );
        assert!(
            violations.contains("condition 3, district 1/5"),
            "{violations}"
        );
    }

    /// The driver end to end: two workers with affinity for a second, time series, checks,
    /// and the record in the results file.
    #[test]
    fn a_short_run_records_its_time_series_and_passes_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let records = run(&config).unwrap();
        let record = &records[0];
        assert_eq!(record.check, "passed");
        assert!(record.transactions > 0 && record.committed["new_order"] > 0);
        assert!(!record.series.is_empty() && record.series.iter().all(|s| s.second > 0.0));
        assert!(record.data_bytes_end > record.data_bytes_start);
        assert_eq!(report::read_records(&config.results).unwrap().len(), 1);
        // Rounds reuse the load and start from the loaded state again.
        let again = run(&Config {
            repeat: 2,
            ..config
        })
        .unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!((again[0].round, again[1].round), (1, 2));
        assert!(again
            .iter()
            .all(|r| r.data_bytes_start == record.data_bytes_start));
        let medians = summary(&again).render();
        assert!(
            medians.contains("leankv") && medians.contains("1.00"),
            "{medians}"
        );
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let too_many_threads = Config {
            threads: vec![3],
            ..config(dir.path())
        };
        let error = run(&too_many_threads).unwrap_err().to_string();
        assert!(error.contains("affinity"), "{error}");
        let unchecked = Config {
            affinity: false,
            ..config(dir.path())
        };
        assert!(run(&unchecked).unwrap_err().to_string().contains("--check"));
    }
}
