//! The device under the data directory, measured with fio in the same sitting as the engines
//! (DESIGN.md §5): random 16 KiB reads (leankv's page size) at queue depth 1 with one and two
//! jobs, and sequential 1 MiB reads, all with O_DIRECT; and synced writes: 4 KiB written and
//! `fdatasync`ed one after the other, the rate that bounds a commit that syncs alone (what
//! group commit is measured against). The scan benchmark measures sequential bandwidth
//! itself, before and after its runs.

use crate::harness::{self, Environment, Record};
use crate::report;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use tracing::info;

/// What fio measured, as saved to the results file.
pub type DeviceRecord = Record<DeviceRun>;

/// What fio measured.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceRun {
    pub random_read_iops_1_job: f64,
    pub random_read_iops_2_jobs: f64,
    pub sequential_read_mib_s: f64,
    /// 4 KiB writes, each followed by `fdatasync`, per second (one job).
    pub synced_writes_per_s: f64,
    pub block_size_random: u32,
    pub file_bytes: u64,
}

const FILE_BYTES: u64 = 2 << 30;

/// Runs one fio job on `file` and returns what it measured for reads.
fn fio(file: &Path, rw: &str, block: &str, jobs: u32, seconds: u64) -> Result<serde_json::Value> {
    Ok(fio_job(file, rw, block, jobs, seconds, &["--direct=1"])?["read"].clone())
}

/// Runs one fio job on `file` with `extra` arguments; returns fio's report of the job.
fn fio_job(
    file: &Path,
    rw: &str,
    block: &str,
    jobs: u32,
    seconds: u64,
    extra: &[&str],
) -> Result<serde_json::Value> {
    info!("fio: {rw} {block} x{jobs} jobs {extra:?}, {seconds} s");
    let output = Command::new("fio")
        .args([
            "--name=leankv-device",
            &format!("--filename={}", file.display()),
            &format!("--size={FILE_BYTES}"),
            &format!("--rw={rw}"),
            &format!("--bs={block}"),
            &format!("--numjobs={jobs}"),
            "--iodepth=1",
            "--ioengine=psync",
            "--time_based",
            &format!("--runtime={seconds}"),
            "--group_reporting",
            "--output-format=json",
        ])
        // Later arguments override earlier ones (`--size` for the synced writes).
        .args(extra)
        .output()
        .context("running fio (install it: apt-get install fio)")?;
    if !output.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    Ok(json["jobs"][0].clone())
}

/// Sequential 1 MiB O_DIRECT reads on a scratch file in `dir`, in MiB/s.
pub fn sequential_read_mib_s(dir: &Path, seconds: u64) -> Result<f64> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("fio-scratch");
    let measured = fio(&file, "read", "1m", 1, seconds);
    std::fs::remove_file(&file).ok();
    Ok(measured?["bw"].as_f64().unwrap_or(0.0) / 1024.0)
}

/// Writes `bytes` to a new scratch file in `dir` with sequential 1 MiB O_DIRECT writes ending
/// with an `fsync`, then reads them back the same way (each job stopped after `seconds` at
/// most): the write and read rates in MiB/s, of as many bytes as an engine is about to move,
/// just before it does.
pub fn sequential_write_read_mib_s(dir: &Path, bytes: u64, seconds: u64) -> Result<(f64, f64)> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("fio-scratch");
    std::fs::remove_file(&file).ok();
    let size = format!("--size={bytes}");
    let once = ["--direct=1", "--time_based=0", size.as_str()];
    let write_args = [&once[..], &["--end_fsync=1"]].concat();
    let measured = fio_job(&file, "write", "1m", 1, seconds, &write_args).and_then(|write| {
        let read = fio_job(&file, "read", "1m", 1, seconds, &once)?;
        Ok((write, read))
    });
    std::fs::remove_file(&file).ok();
    let (write, read) = measured?;
    let rate = |job: &serde_json::Value, rw: &str| job[rw]["bw"].as_f64().unwrap_or(0.0) / 1024.0;
    Ok((rate(&write, "write"), rate(&read, "read")))
}

/// Runs the three fio jobs on a scratch file in `dir`; appends the record to `results`.
pub fn measure(dir: &Path, results: &Path, seconds: u64) -> Result<DeviceRecord> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("fio-scratch");
    let iops = |jobs| -> Result<f64> {
        Ok(fio(&file, "randread", "16k", jobs, seconds)?["iops"]
            .as_f64()
            .unwrap_or(0.0))
    };
    let random_1 = iops(1)?;
    let random_2 = iops(2)?;
    let sequential_kib = fio(&file, "read", "1m", 1, seconds)?["bw"]
        .as_f64()
        .unwrap_or(0.0);
    std::fs::remove_file(&file).ok();
    // Like a log: appends to a small file, each synced before the next.
    let synced = fio_job(
        &file,
        "write",
        "4k",
        1,
        seconds,
        &["--fdatasync=1", "--size=64m"],
    )?["write"]["iops"]
        .as_f64()
        .unwrap_or(0.0);
    std::fs::remove_file(&file).ok();
    let run = DeviceRun {
        random_read_iops_1_job: random_1,
        random_read_iops_2_jobs: random_2,
        sequential_read_mib_s: sequential_kib / 1024.0,
        synced_writes_per_s: synced,
        block_size_random: 16 << 10,
        file_bytes: FILE_BYTES,
    };
    let options = serde_json::json!({"dir": dir, "seconds": seconds});
    let label = format!("device-{}", harness::unix_time());
    let record = Record {
        header: Environment::probe(dir).header("device", &label, &options),
        run,
    };
    println!(
        "device: {:.0} random 16 KiB reads/s (1 job), {:.0} (2 jobs), {:.0} MiB/s sequential, \
         {:.0} synced 4 KiB writes/s",
        record.random_read_iops_1_job,
        record.random_read_iops_2_jobs,
        record.sequential_read_mib_s,
        record.synced_writes_per_s
    );
    report::append(results, &record)?;
    Ok(record)
}
