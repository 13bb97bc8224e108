//! One TPC-C run: a fresh copy of the loaded database (or a fresh load for the in-memory
//! baselines), warm-up when the pool holds the data, the workers on the shared harness with a
//! monitor sampling throughput, page I/O, bytes written and the data size each second, then
//! the optional consistency checks.

use super::random::{NurandConstants, TpccRandom};
use super::results::{Sample, TpccRecord, TpccRun};
use super::setup::{constants, copy_dir, data_size, ensure_loaded, load_into, load_setup};
use super::setup::{Config, SEED};
use super::txn::{Kind, Outcome, Worker};
use super::{check, schema};
use crate::cgroup::{open_capped, MemoryCap};
use crate::diskstats::DiskReads;
use crate::engine::{counter, DurabilityLevel, Engine, EngineKind, Setup};
use crate::engines;
use crate::harness::{self, tempdir_in, Clock, Environment, Record, Timed};
use crate::report::{self, new_histogram, Latency};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tracing::{error, info};

/// How one run differs from the others of a [`Config`].
#[derive(Debug, Clone, Copy)]
pub(super) struct RunShape {
    pub kind: EngineKind,
    pub durability: DurabilityLevel,
    pub pool_bytes: usize,
    pub threads: usize,
    pub round: usize,
}

/// One run of `shape`.
pub(super) fn run_one(
    config: &Config,
    shape: RunShape,
    environment: &Environment,
) -> Result<TpccRecord> {
    let RunShape {
        kind,
        durability,
        pool_bytes,
        threads,
        round,
    } = shape;
    info!(
        "tpcc: {} with {} warehouses, {threads} threads, pool {} MiB, durability {}",
        kind.name(),
        config.warehouses,
        pool_bytes >> 20,
        durability.name()
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
        durability,
        checkpoint_every: config.checkpoint_every,
        page_size: config.page_size,
    };
    let (engine, cap) = open_capped(kind, config.memory_cap, pool_bytes, || {
        if kind.loads_per_run() {
            let engine = engines::open(kind, &scratch, &setup)?;
            load_into(engine.as_ref(), config)?;
            Ok(engine)
        } else {
            copy_dir(&ensure_loaded(config, kind)?, &scratch)?;
            engines::open(kind, &scratch, &setup)
        }
    })?;
    let data_bytes_start = data_size(engine.as_ref(), &scratch);
    if pool_bytes as u64 >= data_bytes_start {
        harness::read_all(engine.as_ref(), 0..schema::TABLES.len())?;
    } else if !config.warmup.is_zero() {
        info!("warming up for {:.0} s", config.warmup.as_secs_f64());
        run_workers(
            config,
            engine.as_ref(),
            threads,
            config.warmup,
            &AtomicU64::new(0),
        )?;
    }
    let measured = measure(config, engine.as_ref(), &scratch, threads)?;
    let check = if config.check {
        let violations = check::violations(engine.as_ref(), config.warehouses)?;
        for violation in &violations {
            error!("CHECK FAILED: {violation}");
        }
        if violations.is_empty() {
            info!("consistency conditions 1-4 hold");
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
    let counters: Vec<_> = measured.counters.iter().map(|(&n, &v)| (n, v)).collect();
    let run = TpccRun {
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
        durability,
        commit_unit: engine.transaction_unit(),
        log_mib_written_per_s: counter(&counters, "log_bytes_written")
            .map(|bytes| per_second(bytes) / (1 << 20) as f64),
        log_syncs_per_s: counter(&counters, "log_syncs").map(per_second),
        engine_counters: measured.counters,
        peak_rss_bytes: measured.peak_rss_bytes,
        device: measured.device,
        memory_cap_bytes: cap.as_ref().map(|cap| cap.limit_bytes),
        cgroup_peak_bytes: cap.as_ref().map(MemoryCap::peak_bytes),
        check,
        series: measured.series,
        direct_io: config.direct_io,
    };
    let record = Record {
        header: environment.header("tpcc", &config.label, config),
        run,
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
    elapsed: std::time::Duration,
    committed: BTreeMap<&'static str, u64>,
    rolled_back: u64,
    latency: BTreeMap<&'static str, Latency>,
    page_reads: u64,
    page_writes: u64,
    bytes_written: u64,
    counters: BTreeMap<&'static str, u64>,
    series: Vec<Sample>,
    peak_rss_bytes: u64,
    device: Option<DiskReads>,
}

/// Per-worker tallies.
struct Tally {
    histograms: Vec<Histogram<u64>>,
    committed: [u64; Kind::ALL.len()],
    rolled_back: u64,
}

/// Runs the workers for the configured duration on the harness, sampling once a second.
fn measure(config: &Config, engine: &dyn Engine, dir: &Path, threads: usize) -> Result<Measured> {
    let done = AtomicU64::new(0);
    let mut last = (0, engine.io(), report::process_io_bytes());
    let timed: Timed<Tally, Sample> = harness::run_timed(
        engine,
        threads,
        config.duration,
        |worker, clock| work(config, engine, worker, threads, clock, &done),
        |tick| {
            let current = (
                done.load(Ordering::Relaxed),
                engine.io(),
                report::process_io_bytes(),
            );
            let sample = Sample {
                second: tick.second,
                tps: tick.rate(current.0 - last.0),
                page_reads_per_s: tick.rate(current.1.page_reads - last.1.page_reads),
                page_writes_per_s: tick.rate(current.1.page_writes - last.1.page_writes),
                mib_read_per_s: tick.mib_rate(current.2 .0.saturating_sub(last.2 .0)),
                mib_written_per_s: tick.mib_rate(current.2 .1.saturating_sub(last.2 .1)),
                data_mib: data_size(engine, dir) as f64 / (1 << 20) as f64,
            };
            last = current;
            Some(sample)
        },
    )?;
    let tallies = &timed.workers;
    let mut committed = BTreeMap::new();
    let mut latency = BTreeMap::new();
    for (index, kind) in Kind::ALL.iter().enumerate() {
        committed.insert(
            kind.name(),
            tallies.iter().map(|t| t.committed[index]).sum(),
        );
        let mut merged = new_histogram();
        for tally in tallies {
            merged.add(&tally.histograms[index]).expect("same bounds");
        }
        latency.insert(kind.name(), Latency::of(&merged));
    }
    Ok(Measured {
        elapsed: timed.elapsed,
        committed,
        rolled_back: tallies.iter().map(|t| t.rolled_back).sum(),
        latency,
        page_reads: timed.io.page_reads,
        page_writes: timed.io.page_writes,
        bytes_written: timed.bytes_written,
        counters: timed.counters.into_iter().collect(),
        series: timed.series,
        peak_rss_bytes: timed.peak_rss_bytes,
        device: timed.device,
    })
}

/// Runs `threads` workers on `engine` for `duration`, counting finished transactions in
/// `done`, for a caller that watches the run from outside (`recovery` kills it midway).
pub(crate) fn run_workers(
    config: &Config,
    engine: &dyn Engine,
    threads: usize,
    duration: Duration,
    done: &AtomicU64,
) -> Result<()> {
    harness::run_timed(
        engine,
        threads,
        duration,
        |worker, clock| work(config, engine, worker, threads, clock, done),
        |_| None::<()>,
    )?;
    Ok(())
}

/// One worker: transactions from the standard mix until the clock says stop.
fn work(
    config: &Config,
    engine: &dyn Engine,
    worker: usize,
    threads: usize,
    clock: &Clock<'_>,
    done: &AtomicU64,
) -> Result<Tally> {
    let own: Vec<u32> = (1..=config.warehouses)
        .filter(|w| !config.affinity || (*w as usize - 1) % threads == worker)
        .collect();
    let run_constants = NurandConstants::for_run(constants(), &mut fastrand::Rng::with_seed(SEED));
    let random = TpccRandom::new(clock.seed(worker), run_constants);
    let mut worker_state = Worker::new(engine, random, config.warehouses, worker as u32 + 1);
    let mut tally = Tally {
        histograms: (0..Kind::ALL.len()).map(|_| new_histogram()).collect(),
        committed: [0; Kind::ALL.len()],
        rolled_back: 0,
    };
    while clock.running() {
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
