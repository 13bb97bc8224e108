//! The scan experiment (paper Fig. 12): two threads scan a large and a small tree over and
//! over, concurrently, with pools from below the small tree's size to above both trees' sum.
//! Per second it samples each tree's scan speed and the bytes read from storage; the device's
//! sequential read bandwidth is measured with fio before and after, so the large scan's read
//! rate can be stated as a fraction of it.
//!
//! What it shows: with a pool that holds the small tree, the small tree's scans should run at
//! memory speed while the large tree streams through the pool (hinting keeps the large scan's
//! leaves cooling, read-ahead keeps its reads flowing).

use crate::engine::{DurabilityLevel, Engine, EngineKind, PoolSize, Setup, Table, LOAD_DURABILITY};
use crate::engines;
use crate::harness::{self, Clock, Environment, Record};
use crate::report;
use crate::workload::fill_value;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tracing::info;

const SMALL: Table = 0;
const LARGE: Table = 1;
const TABLES: &[&str] = &["small", "large"];
/// Pairs per `put_batch` call while loading.
const LOAD_BATCH: usize = 10_000;
/// Records a scanner counts locally before publishing them.
const PUBLISH_EVERY: u64 = 4_096;

/// What a `scan` invocation runs: every engine × pool × read-ahead depth.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub label: String,
    pub engines: Vec<EngineKind>,
    pub small_records: u64,
    pub large_records: u64,
    pub value_size: usize,
    /// Bytes, or multiples of both trees' data together.
    pub pools: Vec<PoolSize>,
    pub prefetch: Vec<usize>,
    #[serde(serialize_with = "harness::seconds")]
    pub duration: Duration,
    /// Seconds of fio before and after the runs (0: no fio).
    pub fio_seconds: u64,
    pub direct_io: bool,
    pub data_dir: PathBuf,
    pub results: PathBuf,
}

/// One second of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub second: f64,
    pub large_mib_per_s: f64,
    pub small_mib_per_s: f64,
    pub read_mib_per_s: f64,
}

/// One run, as saved to the results file.
pub type ScanRecord = Record<ScanRun>;

/// What one scan run measured, with its parameters.
#[derive(Debug, Clone, Serialize)]
pub struct ScanRun {
    pub engine: &'static str,
    pub engine_settings: String,
    pub small_records: u64,
    pub large_records: u64,
    pub value_size: usize,
    pub data_bytes: u64,
    pub pool_bytes: usize,
    pub pool_to_data: f64,
    pub prefetch: usize,
    pub duration_s: f64,
    /// Scanned record bytes (key + value) per second, per tree.
    pub large_mib_per_s: f64,
    pub small_mib_per_s: f64,
    pub large_full_scans: u64,
    pub small_full_scans: u64,
    /// Bytes read from storage per second (`/proc/self/io`).
    pub read_mib_per_s: f64,
    /// fio's sequential read bandwidth in this sitting (mean of before and after), if run.
    pub device_sequential_mib_s: Option<f64>,
    pub engine_counters: BTreeMap<&'static str, u64>,
    pub series: Vec<Sample>,
    pub direct_io: bool,
}

/// Runs `config`, appending each run to the results file.
pub fn run(config: &Config) -> Result<Vec<ScanRecord>> {
    if config.small_records == 0 || config.large_records == 0 {
        bail!("both trees need records");
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let environment = Environment::probe(&config.data_dir);
    let fio = |when: &str| -> Result<Option<f64>> {
        if config.fio_seconds == 0 {
            return Ok(None);
        }
        let mib_s = crate::device::sequential_read_mib_s(&config.data_dir, config.fio_seconds)?;
        info!("device {when}: {mib_s:.0} MiB/s sequential (fio, 1 MiB O_DIRECT reads)");
        Ok(Some(mib_s))
    };
    let before = fio("before")?;
    let mut records = Vec::new();
    for &kind in &config.engines {
        let path = ensure_loaded(config, kind)?;
        let data_bytes = report::data_disk_usage(&path);
        for &pool in &config.pools {
            for &prefetch in &config.prefetch {
                let pool_bytes = pool.bytes(data_bytes).max(16 << 20);
                records.push(run_one(
                    config,
                    kind,
                    &path,
                    data_bytes,
                    pool_bytes,
                    prefetch,
                    &environment,
                )?);
            }
        }
    }
    let after = fio("after")?;
    let device = before.zip(after).map(|(a, b)| (a + b) / 2.0);
    for record in &mut records {
        record.device_sequential_mib_s = device;
        report::append(&config.results, record)?;
    }
    println!("{}", table(&records).render());
    Ok(records)
}

fn data_path(config: &Config, kind: EngineKind) -> PathBuf {
    let format = kind.loader().name();
    config.data_dir.join(format!(
        "scan-{format}-{}+{}x{}",
        config.small_records, config.large_records, config.value_size
    ))
}

/// Loads both trees in key order (as a table would be bulk loaded) unless done before.
fn ensure_loaded(config: &Config, kind: EngineKind) -> Result<PathBuf> {
    if kind.loads_per_run() {
        bail!(
            "{} keeps no files; the scan experiment needs data on disk",
            kind.name()
        );
    }
    let path = data_path(config, kind);
    let load_setup = Setup {
        durability: LOAD_DURABILITY,
        ..setup(config, 1 << 30, 0)
    };
    engines::load_once(kind, &path, &load_setup, |engine| {
        info!(
            "loading {} + {} records into {}",
            config.small_records,
            config.large_records,
            path.display()
        );
        for (table, records) in [(SMALL, config.small_records), (LARGE, config.large_records)] {
            let mut batch = Vec::with_capacity(LOAD_BATCH);
            for index in 0..records {
                let mut value = vec![0; config.value_size];
                fill_value(&mut value, index, 0);
                batch.push((index.to_be_bytes().to_vec(), value));
                if batch.len() == LOAD_BATCH || index + 1 == records {
                    engine.put_batch(table, &batch)?;
                    batch.clear();
                }
            }
        }
        engine.flush()
    })?;
    Ok(path)
}

fn setup(config: &Config, pool_bytes: usize, prefetch: usize) -> Setup {
    Setup {
        pool_bytes,
        cooling_fraction: 0.1,
        direct_io: config.direct_io,
        data_bytes: 0,
        tables: TABLES,
        scan_prefetch: prefetch,
        // Scans only read: leankv's default serves.
        durability: DurabilityLevel::default(),
        checkpoint_every: None,
        page_size: leankv::DEFAULT_PAGE_SIZE,
    }
}

/// Scans `table` from start to end, over and over, until the clock says stop; counts records
/// and scans.
fn scan_repeatedly(
    engine: &dyn Engine,
    table: Table,
    records: &AtomicU64,
    scans: &AtomicU64,
    clock: &Clock<'_>,
) -> Result<()> {
    while clock.running() {
        let mut unpublished = 0;
        engine.scan(table, &[], None, &mut |_, _| {
            unpublished += 1;
            if unpublished == PUBLISH_EVERY {
                records.fetch_add(unpublished, Ordering::Relaxed);
                unpublished = 0;
                return clock.running();
            }
            true
        })?;
        records.fetch_add(unpublished, Ordering::Relaxed);
        scans.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    config: &Config,
    kind: EngineKind,
    loaded: &Path,
    data_bytes: u64,
    pool_bytes: usize,
    prefetch: usize,
    environment: &Environment,
) -> Result<ScanRecord> {
    info!(
        "scan: {} with pool {} MiB ({:.2}x data), read-ahead {prefetch}",
        kind.name(),
        pool_bytes >> 20,
        pool_bytes as f64 / data_bytes as f64
    );
    // Scans only read, so the loaded files serve every run as they are. Without direct I/O,
    // pages cached by the OS would flatter the next run (dropping needs root; best effort).
    if !config.direct_io {
        crate::cgroup::drop_page_cache().ok();
    }
    let engine = engines::open(kind, loaded, &setup(config, pool_bytes, prefetch))?;
    let engine = engine.as_ref();
    let record_mib = (8 + config.value_size) as f64 / (1 << 20) as f64;
    let counts = [AtomicU64::new(0), AtomicU64::new(0)];
    let scans = [AtomicU64::new(0), AtomicU64::new(0)];
    // Thread 0 scans the small tree, thread 1 the large one.
    let tables = [SMALL, LARGE];
    let mut last = ([0, 0], report::process_io_bytes().0);
    let timed = harness::run_timed(
        engine,
        tables.len(),
        config.duration,
        |thread, clock| {
            let table = tables[thread];
            scan_repeatedly(engine, table, &counts[table], &scans[table], clock)
        },
        |tick| {
            let current = [
                counts[SMALL].load(Ordering::Relaxed),
                counts[LARGE].load(Ordering::Relaxed),
            ];
            let (read, _) = report::process_io_bytes();
            let scanned = |table: Table| (current[table] - last.0[table]) as f64 * record_mib;
            let sample = Sample {
                second: tick.second,
                large_mib_per_s: scanned(LARGE) / tick.interval,
                small_mib_per_s: scanned(SMALL) / tick.interval,
                read_mib_per_s: tick.mib_rate(read.saturating_sub(last.1)),
            };
            last = (current, read);
            Some(sample)
        },
    )?;
    let elapsed = timed.elapsed.as_secs_f64();
    let rate = |table: Table| counts[table].load(Ordering::Relaxed) as f64 * record_mib / elapsed;
    let run = ScanRun {
        engine: kind.name(),
        engine_settings: engine.settings(),
        small_records: config.small_records,
        large_records: config.large_records,
        value_size: config.value_size,
        data_bytes,
        pool_bytes,
        pool_to_data: pool_bytes as f64 / data_bytes as f64,
        prefetch,
        duration_s: elapsed,
        large_mib_per_s: rate(LARGE),
        small_mib_per_s: rate(SMALL),
        large_full_scans: scans[LARGE].load(Ordering::Relaxed),
        small_full_scans: scans[SMALL].load(Ordering::Relaxed),
        read_mib_per_s: timed.bytes_read as f64 / (1 << 20) as f64 / elapsed,
        device_sequential_mib_s: None,
        engine_counters: timed.counters.into_iter().collect(),
        series: timed.series,
        direct_io: config.direct_io,
    };
    println!(
        "  large {:.0} MiB/s, small {:.0} MiB/s, read {:.0} MiB/s",
        run.large_mib_per_s, run.small_mib_per_s, run.read_mib_per_s
    );
    Ok(Record {
        header: environment.header("scan", &config.label, config),
        run,
    })
}

/// The results as a table.
pub fn table(records: &[ScanRecord]) -> report::Table {
    let mut table = report::Table::new(&[
        "engine",
        "pool MiB",
        "pool/data",
        "read-ahead",
        "large MiB/s",
        "small MiB/s",
        "read MiB/s",
        "% of fio seq",
        "prefetched",
        "scan-cooled",
    ]);
    for record in records {
        table.row(vec![
            record.engine.to_string(),
            (record.pool_bytes >> 20).to_string(),
            format!("{:.2}", record.pool_to_data),
            record.prefetch.to_string(),
            format!("{:.0}", record.large_mib_per_s),
            format!("{:.0}", record.small_mib_per_s),
            format!("{:.0}", record.read_mib_per_s),
            record.device_sequential_mib_s.map_or("-".into(), |device| {
                format!("{:.0}%", record.read_mib_per_s / device * 100.0)
            }),
            record
                .engine_counters
                .get("prefetch_reads")
                .copied()
                .unwrap_or(0)
                .to_string(),
            record
                .engine_counters
                .get("scan_cooled")
                .copied()
                .unwrap_or(0)
                .to_string(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_trees_are_scanned_and_the_large_one_is_read_from_storage() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            label: "test".into(),
            engines: vec![EngineKind::Leankv],
            small_records: 20_000,
            large_records: 200_000,
            value_size: 100,
            pools: vec![PoolSize::Bytes(16 << 20)],
            prefetch: vec![8],
            duration: Duration::from_secs(2),
            fio_seconds: 0,
            direct_io: false,
            data_dir: dir.path().join("data"),
            results: dir.path().join("results.jsonl"),
        };
        let records = run(&config).unwrap();
        let record = &records[0];
        assert!(record.pool_to_data < 1.0, "{}", record.pool_to_data);
        assert!(record.small_full_scans > 0 && record.large_mib_per_s > 0.0);
        assert!(record.engine_counters["page_reads"] > 0);
        assert!(record.engine_counters["prefetch_reads"] > 0);
        assert!(!record.series.is_empty());
        assert_eq!(report::read_records(&config.results).unwrap().len(), 1);
        assert!(table(&records).render().contains("leankv"));
    }
}
