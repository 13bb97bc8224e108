//! `large-values`: writing and reading values of 1 MiB, 16 MiB and 256 MiB (by default) next to
//! the device's sequential write and read bandwidth, measured with fio on as many bytes just
//! before and just after each size (the device's rate swings by half within minutes on the
//! shared VMs, so each ratio compares with the mean of two adjacent measurements); and the
//! peak memory of writing and reading one value of a gigabyte with a 64 MiB pool.
//!
//! Writes are timed up to a `flush` that makes them durable (the device's writes end with an
//! `fsync` too); reads get each value whole. Large values are read and written past the pool
//! with direct I/O, so the page cache does not flatter either side.

use crate::device;
use crate::engine::DurabilityLevel;
use crate::harness::{in_scratch_dir, Record, Sitting};
use crate::report::{self, Table};
use crate::CommonArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;
use tracing::info;

#[derive(Args)]
pub struct LargeValueArgs {
    /// Value sizes to measure, in bytes (suffixes K, M, G).
    #[arg(long, value_delimiter = ',', default_value = "1M,16M,256M", value_parser = byte_count)]
    sizes: Vec<u64>,
    /// Bytes written (and read) per size: that many values of the size, at least one.
    #[arg(long, default_value = "1G", value_parser = byte_count)]
    total: u64,
    /// Buffer pool in bytes.
    #[arg(long, default_value = "64M", value_parser = byte_count)]
    pool: u64,
    /// When a commit is durable (`off`: without the write-ahead log).
    #[arg(long, value_enum, default_value_t = DurabilityLevel::default())]
    durability: DurabilityLevel,
    /// The value whose peak memory is measured (0: skip), written and read with `--pool`.
    #[arg(long, default_value = "1G", value_parser = byte_count)]
    memory_value: u64,
    /// Most seconds per fio job measuring the device (0: skip the device).
    #[arg(long, default_value_t = 30)]
    fio_seconds: u64,
    /// Label stored with the records (defaults to a time stamp).
    #[arg(long)]
    label: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A byte count (`1G`, `16M`: see [`crate::engine::parse_bytes`]) or `0`.
fn byte_count(text: &str) -> Result<u64, String> {
    match text {
        "0" => Ok(0),
        _ => crate::engine::parse_bytes(text).ok_or_else(|| format!("{text:?}: expected e.g. 16M")),
    }
}

/// One value size, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct LargeValueRun {
    pub value_bytes: u64,
    pub values: u64,
    pub pool_bytes: u64,
    pub durability: DurabilityLevel,
    /// Writing every value and the `flush` after it.
    pub write_mib_s: f64,
    pub read_mib_s: f64,
    /// The device's sequential 1 MiB direct writes (ending with an fsync) and reads of as many
    /// bytes, mean of just before and just after (0 when skipped).
    pub device_write_mib_s: f64,
    pub device_read_mib_s: f64,
}

/// The peak memory of one large value, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct LargeValueMemory {
    pub value_bytes: u64,
    pub pool_bytes: u64,
    /// Peak resident memory while inserting (the caller holding the value) and while reading
    /// it back (into a buffer `get` returns), each measured from a reset peak.
    pub write_peak_bytes: u64,
    pub read_peak_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum LargeValueRecord {
    Throughput(LargeValueRun),
    Memory(LargeValueMemory),
}

fn options(args: &LargeValueArgs, pool: u64) -> leankv::Options {
    let options = leankv::Options::default()
        .pool_size(pool as usize)
        .direct_io(args.common.direct_io);
    match args.durability.leankv() {
        Some(durability) => options.durability(durability),
        None => options.write_ahead_log(false),
    }
}

/// A value of `len` bytes whose first bytes name it.
fn value(len: u64, n: u64) -> Vec<u8> {
    let mut value: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
    let tag = n.to_le_bytes();
    let tagged = value.len().min(8);
    value[..tagged].copy_from_slice(&tag[..tagged]);
    value
}

/// Writes and reads `total / size` values of `size` bytes on a fresh database in `dir`.
fn throughput(args: &LargeValueArgs, size: u64, dir: &Path) -> Result<LargeValueRun> {
    let values = (args.total / size).max(1);
    let db = leankv::Db::open(dir, options(args, args.pool))?;
    let tree = db.open_tree("values")?;
    let mut buffer = value(size, 0);
    let started = Instant::now();
    for n in 0..values {
        buffer[..8].copy_from_slice(&n.to_le_bytes());
        tree.insert(n.to_be_bytes(), &buffer)?;
    }
    db.flush()?;
    let write_s = started.elapsed().as_secs_f64();
    drop(buffer);
    let mut read = 0u64;
    let started = Instant::now();
    for n in 0..values {
        let got = tree
            .get(n.to_be_bytes())?
            .with_context(|| format!("value {n} missing"))?;
        if got.len() as u64 != size || got[..8] != n.to_le_bytes() {
            bail!("value {n} read back wrong");
        }
        read += got.len() as u64;
    }
    let read_s = started.elapsed().as_secs_f64();
    let mib = (values * size) as f64 / f64::from(1 << 20);
    info!(
        "{} x {} MiB: written at {:.0} MiB/s, read at {:.0} MiB/s",
        values,
        size >> 20,
        mib / write_s,
        read as f64 / f64::from(1 << 20) / read_s
    );
    drop(tree);
    db.close()?;
    Ok(LargeValueRun {
        value_bytes: size,
        values,
        pool_bytes: args.pool,
        durability: args.durability,
        write_mib_s: mib / write_s,
        read_mib_s: mib / read_s,
        device_write_mib_s: 0.0,
        device_read_mib_s: 0.0,
    })
}

/// The process's peak resident memory (VmHWM), in bytes.
fn peak_resident() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/self/status")?;
    Ok(kib << 10)
}

/// Resets the peak that [`peak_resident`] reports to the current resident memory.
fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak resident memory")
}

/// Writes one value of `--memory-value` bytes with `--pool`, then reads it back, measuring the
/// peak resident memory of each from a reset peak.
fn memory(args: &LargeValueArgs, dir: &Path) -> Result<LargeValueMemory> {
    let db = leankv::Db::open(dir, options(args, args.pool))?;
    let tree = db.open_tree("values")?;
    let buffer = value(args.memory_value, 1);
    reset_peak()?;
    tree.insert("big", &buffer)?;
    db.flush()?;
    let write_peak_bytes = peak_resident()?;
    drop(buffer);
    reset_peak()?;
    let got = tree.get("big")?.context("the large value is missing")?;
    let read_peak_bytes = peak_resident()?;
    if got != value(args.memory_value, 1) {
        bail!("the large value read back wrong");
    }
    drop(got);
    drop(tree);
    db.close()?;
    let over = |peak: u64| (peak.saturating_sub(args.memory_value)) as f64 / args.pool as f64;
    info!(
        "one {} MiB value, {} MiB pool: peak beyond the value {:.2}x the pool writing, {:.2}x \
         reading",
        args.memory_value >> 20,
        args.pool >> 20,
        over(write_peak_bytes),
        over(read_peak_bytes)
    );
    Ok(LargeValueMemory {
        value_bytes: args.memory_value,
        pool_bytes: args.pool,
        write_peak_bytes,
        read_peak_bytes,
    })
}

/// Measures the device and leankv for every size, then the memory; appends the records to the
/// results file and prints them.
pub fn run(args: &LargeValueArgs) -> Result<Vec<Record<LargeValueRecord>>> {
    if args.sizes.iter().any(|&size| size < 8) || args.pool == 0 {
        bail!("value sizes must be at least 8 bytes and the pool positive");
    }
    let Sitting {
        label,
        data_dir,
        environment,
    } = args.common.sitting("large-values", args.label.as_deref())?;
    let options = serde_json::json!({
        "sizes": args.sizes,
        "total": args.total,
        "pool": args.pool,
        "durability": args.durability,
        "memory_value": args.memory_value,
        "direct_io": args.common.direct_io,
    });
    let mut records = Vec::new();
    for &size in &args.sizes {
        let device = || match args.fio_seconds {
            0 => Ok((0.0, 0.0)),
            seconds => {
                let bytes = (args.total / size).max(1) * size;
                device::sequential_write_read_mib_s(&data_dir, bytes, seconds)
            }
        };
        let before = device()?;
        let run = in_scratch_dir(&data_dir, |dir| throughput(args, size, dir))?;
        let after = device()?;
        records.push(LargeValueRecord::Throughput(LargeValueRun {
            device_write_mib_s: (before.0 + after.0) / 2.0,
            device_read_mib_s: (before.1 + after.1) / 2.0,
            ..run
        }));
    }
    let memory = match args.memory_value {
        0 => None,
        _ => Some(in_scratch_dir(&data_dir, |dir| memory(args, dir))?),
    };
    records.extend(memory.map(LargeValueRecord::Memory));
    let records: Vec<_> = records
        .into_iter()
        .map(|run| Record {
            header: environment.header("large-values", &label, &options),
            run,
        })
        .collect();
    let results = args.common.results();
    for record in &records {
        report::append(&results, record)?;
    }
    println!("{}", table(&records).render());
    println!("results appended to {} (label {label})", results.display());
    Ok(records)
}

/// The records as a table: throughput next to the device's, and peak memory.
pub fn table(records: &[Record<LargeValueRecord>]) -> Table {
    let mut table = Table::new(&[
        "value MiB",
        "values",
        "pool MiB",
        "durability",
        "write MiB/s",
        "device",
        "ratio",
        "read MiB/s",
        "device",
        "ratio",
        "peak MiB (write / read)",
    ]);
    let ratio = |engine: f64, device: f64| match device {
        0.0 => "-".to_string(),
        device => format!("{:.2}", engine / device),
    };
    for record in records {
        match &record.run {
            LargeValueRecord::Throughput(run) => table.row(vec![
                format!("{:.0}", run.value_bytes as f64 / f64::from(1 << 20)),
                run.values.to_string(),
                (run.pool_bytes >> 20).to_string(),
                run.durability.name().into(),
                format!("{:.0}", run.write_mib_s),
                format!("{:.0}", run.device_write_mib_s),
                ratio(run.write_mib_s, run.device_write_mib_s),
                format!("{:.0}", run.read_mib_s),
                format!("{:.0}", run.device_read_mib_s),
                ratio(run.read_mib_s, run.device_read_mib_s),
                "-".into(),
            ]),
            LargeValueRecord::Memory(memory) => table.row(vec![
                (memory.value_bytes >> 20).to_string(),
                "1".into(),
                (memory.pool_bytes >> 20).to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!(
                    "{} / {}",
                    memory.write_peak_bytes >> 20,
                    memory.read_peak_bytes >> 20
                ),
            ]),
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::byte_count;

    #[test]
    fn byte_counts_take_binary_suffixes_or_zero() {
        assert_eq!(byte_count("16M"), Ok(16 << 20));
        assert_eq!(byte_count("1G"), Ok(1 << 30));
        assert_eq!(byte_count("0"), Ok(0));
        assert!(byte_count("many").is_err());
    }
}
