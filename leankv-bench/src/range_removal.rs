//! `remove-range`: `Tree::remove_range` over most of a large tree next to removing the same keys
//! one by one with `Tree::remove`, each on its own fresh load in the same sitting: wall time,
//! the pages in use before and after (from `check_integrity`), and the log written.

use crate::engine::{DurabilityLevel, PoolSize};
use crate::harness::{in_scratch_dir, Record, Sitting};
use crate::report::{self, Table};
use crate::CommonArgs;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;
use tracing::info;

#[derive(Args)]
pub struct RangeRemovalArgs {
    /// Records to load: 8-byte big-endian keys 0..records.
    #[arg(long, default_value_t = 10_000_000)]
    records: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 120)]
    value_size: usize,
    /// Share of the keys removed, from the middle of the key space.
    #[arg(long, default_value_t = 0.9)]
    fraction: f64,
    /// Buffer pool: bytes (512M, 4G) or a multiple of the loaded data (2x, 0.25x).
    #[arg(long, default_value = "4G")]
    pool: PoolSize,
    /// When a commit is durable (`off`: without the write-ahead log).
    #[arg(long, value_enum, default_value_t = DurabilityLevel::default())]
    durability: DurabilityLevel,
    /// Ways of removing, each measured on its own load, in this order.
    #[arg(long, value_delimiter = ',', default_value = "range,one-by-one")]
    methods: Vec<Method>,
    /// Label stored with the records (defaults to a time stamp).
    #[arg(long)]
    label: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// How the keys are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// One `Tree::remove_range` call.
    Range,
    /// `Tree::remove` for each key, in ascending order.
    OneByOne,
}

/// One removal, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct RangeRemovalRun {
    pub method: Method,
    pub records: u64,
    pub value_size: usize,
    pub removed: u64,
    pub pool_bytes: usize,
    pub durability: DurabilityLevel,
    /// The removal's wall time, and that of the `flush` after it (writing what it changed).
    pub remove_s: f64,
    pub flush_s: f64,
    /// Pages the tree and catalog use, before and after (the rest of the file is free).
    pub pages_before: u64,
    pub pages_after: u64,
    pub log_bytes: u64,
    pub page_reads: u64,
}

fn options(args: &RangeRemovalArgs, pool_bytes: usize) -> leankv::Options {
    let options = leankv::Options::default()
        .pool_size(pool_bytes)
        .direct_io(args.common.direct_io);
    match args.durability.leankv() {
        Some(durability) => options.durability(durability),
        None => options.write_ahead_log(false),
    }
}

fn key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// Loads a fresh database in `dir` and removes the middle keys as `method` says.
fn measure(args: &RangeRemovalArgs, method: Method, dir: &Path) -> Result<RangeRemovalRun> {
    let data_bytes = args.records * (8 + args.value_size as u64);
    let pool_bytes = args.pool.bytes(data_bytes).max(64 << 20);
    let db = leankv::Db::open(dir, options(args, pool_bytes))?;
    let tree = db.open_tree("data")?;
    let value = vec![0xa5u8; args.value_size];
    let started = Instant::now();
    for n in 0..args.records {
        tree.insert(key(n), &value)?;
        if (n + 1) % 2_000_000 == 0 {
            info!("{method:?}: loaded {} M records", (n + 1) / 1_000_000);
        }
    }
    db.flush()?;
    info!(
        "{method:?}: {} records loaded in {:.1} s",
        args.records,
        started.elapsed().as_secs_f64()
    );
    let pages_before = db.check_integrity()?.pages;
    let removed_keys = (args.records as f64 * args.fraction) as u64;
    let (low, high) = (
        (args.records - removed_keys) / 2,
        (args.records + removed_keys) / 2,
    );
    let before = db.stats();
    let started = Instant::now();
    let removed = match method {
        Method::Range => tree.remove_range(key(low)..key(high))?,
        Method::OneByOne => {
            let mut removed = 0;
            for n in low..high {
                removed += u64::from(tree.remove(key(n))?);
            }
            removed
        }
    };
    let remove_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    db.flush()?;
    let flush_s = started.elapsed().as_secs_f64();
    let after = db.stats();
    if removed != high - low || tree.len()? != args.records - removed {
        bail!("{method:?} removed {removed} keys of {}", high - low);
    }
    let report = db.check_integrity()?;
    if !report.is_ok() {
        bail!("{method:?}: the integrity check failed: {report}");
    }
    info!("{method:?}: removed {removed} keys in {remove_s:.2} s (flush {flush_s:.2} s)");
    drop(tree);
    db.close()?;
    Ok(RangeRemovalRun {
        method,
        records: args.records,
        value_size: args.value_size,
        removed,
        pool_bytes,
        durability: args.durability,
        remove_s,
        flush_s,
        pages_before,
        pages_after: report.pages,
        log_bytes: after.log_bytes_written - before.log_bytes_written,
        page_reads: after.page_reads - before.page_reads,
    })
}

/// Measures every method on its own load, appends the records to the results file and prints
/// them.
pub fn run(args: &RangeRemovalArgs) -> Result<Vec<Record<RangeRemovalRun>>> {
    if !(0.0..=1.0).contains(&args.fraction) || args.records == 0 {
        bail!("--fraction must lie in 0..=1 and --records be positive");
    }
    let Sitting {
        label,
        data_dir,
        environment,
    } = args.common.sitting("remove-range", args.label.as_deref())?;
    let options = serde_json::json!({
        "records": args.records,
        "value_size": args.value_size,
        "fraction": args.fraction,
        "pool": args.pool,
        "durability": args.durability,
        "direct_io": args.common.direct_io,
    });
    let mut records = Vec::new();
    for &method in &args.methods {
        let run = in_scratch_dir(&data_dir, |dir| measure(args, method, dir))?;
        records.push(Record {
            header: environment.header("remove-range", &label, &options),
            run,
        });
    }
    let results = args.common.results();
    for record in &records {
        report::append(&results, record)?;
    }
    println!("{}", table(&records).render());
    println!("results appended to {} (label {label})", results.display());
    Ok(records)
}

/// The records as a table, with each one's time relative to the first's.
pub fn table(records: &[Record<RangeRemovalRun>]) -> Table {
    let mut table = Table::new(&[
        "method",
        "records",
        "removed",
        "pool MiB",
        "durability",
        "remove s",
        "keys/s",
        "time / first",
        "flush s",
        "pages before",
        "pages after",
        "log MiB",
        "page reads",
    ]);
    let first = records.first().map(|record| record.remove_s);
    for record in records {
        table.row(vec![
            format!("{:?}", record.method),
            record.records.to_string(),
            record.removed.to_string(),
            (record.pool_bytes >> 20).to_string(),
            record.durability.name().into(),
            format!("{:.3}", record.remove_s),
            format!("{:.0}", record.removed as f64 / record.remove_s),
            first.map_or("-".into(), |first| {
                format!("{:.1}", record.remove_s / first)
            }),
            format!("{:.2}", record.flush_s),
            record.pages_before.to_string(),
            record.pages_after.to_string(),
            format!("{:.1}", record.log_bytes as f64 / (1 << 20) as f64),
            record.page_reads.to_string(),
        ]);
    }
    table
}
