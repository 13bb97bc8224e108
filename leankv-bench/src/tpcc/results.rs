//! What a TPC-C run records (per-second samples and the run's totals) and the tables printed
//! at the end: every run, and medians over rounds.

use crate::diskstats::DiskReads;
use crate::engine::DurabilityLevel;
use crate::harness::Record;
use crate::report::{rate_or_dash, Latency, Table};
use crate::stats::{group_by, paired_table, Observation, Spread};
use serde::Serialize;
use std::collections::BTreeMap;

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
pub type TpccRecord = Record<TpccRun>;

/// What one TPC-C run measured, with its parameters.
#[derive(Debug, Clone, Serialize)]
pub struct TpccRun {
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
    pub durability: DurabilityLevel,
    /// What one commit covers: each write of a transaction commits on its own (see `txn`).
    pub commit_unit: &'static str,
    /// Write-ahead log bytes written and log syncs per second (leankv; `None` for engines that
    /// do not report them).
    pub log_mib_written_per_s: Option<f64>,
    pub log_syncs_per_s: Option<f64>,
    pub engine_counters: BTreeMap<&'static str, u64>,
    pub peak_rss_bytes: u64,
    /// What the device under the data did during the run (engines that report their device).
    pub device: Option<DiskReads>,
    pub memory_cap_bytes: Option<u64>,
    pub cgroup_peak_bytes: Option<u64>,
    /// "passed", "failed" or "not run".
    pub check: &'static str,
    pub series: Vec<Sample>,
    pub direct_io: bool,
}

/// Median, lowest and highest tps of each engine, durability, thread count and pool over the
/// rounds; `×leankv` compares medians.
pub fn summary(records: &[TpccRecord]) -> Table {
    type Shape = (&'static str, DurabilityLevel, usize, usize);
    let groups: Vec<(Shape, Spread)> = group_by(records, |r| {
        (r.engine, r.durability, r.threads, r.pool_bytes)
    })
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
        "durability",
        "threads",
        "pool MiB",
        "median tps",
        "min",
        "max",
        "×leankv",
    ]);
    for ((engine, durability, threads, pool), tps) in &groups {
        let reference = groups
            .iter()
            .find(|((e, d, t, p), _)| {
                *e == "leankv" && d == durability && t == threads && p == pool
            })
            .map(|(_, tps)| tps.median);
        table.row(vec![
            engine.to_string(),
            durability.name().to_string(),
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

/// Each durability against the first within each engine, and each engine against the first
/// at each durability, paired by round within runs of one thread count and pool (`None` if
/// nothing pairs).
pub fn paired(records: &[TpccRecord]) -> Option<Table> {
    let observations: Vec<Observation> = records
        .iter()
        .map(|r| Observation {
            shape: format!("{}T, pool {} MiB", r.threads, r.pool_bytes >> 20),
            engine: r.engine.to_string(),
            setting: r.durability.name().to_string(),
            round: r.round,
            rate: r.tps,
        })
        .collect();
    paired_table(&observations)
}

/// The results as a table; `×leankv` compares with leankv's run of the same shape, durability
/// and round.
pub fn table(records: &[TpccRecord]) -> Table {
    let mut table = Table::new(&[
        "engine",
        "durability",
        "threads",
        "pool MiB",
        "data MiB start->end",
        "tps",
        "×leankv",
        "NewOrd/min",
        "NO p99 µs",
        "reads/s",
        "MiB/s written",
        "log MiB/s",
        "log syncs/s",
        "check",
    ]);
    for record in records {
        let reference = records.iter().find(|other| {
            other.engine == "leankv"
                && other.durability == record.durability
                && other.threads == record.threads
                && other.pool_bytes == record.pool_bytes
                && other.round == record.round
        });
        table.row(vec![
            record.engine.to_string(),
            record.durability.name().to_string(),
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
            rate_or_dash(record.log_mib_written_per_s, 1),
            rate_or_dash(record.log_syncs_per_s, 0),
            record.check.to_string(),
        ]);
    }
    table
}
