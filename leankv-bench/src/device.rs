//! The device under the data directory, measured with fio in the same sitting as the engines
//! (DESIGN.md §5): random 16 KiB reads (leankv's page size) at queue depth 1 with one and two
//! jobs, and sequential 1 MiB reads, all with O_DIRECT.

use crate::report::{self, Machine};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::process::Command;

/// What fio measured.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceRecord {
    pub benchmark: &'static str,
    pub unix_time: u64,
    pub random_read_iops_1_job: f64,
    pub random_read_iops_2_jobs: f64,
    pub sequential_read_mib_s: f64,
    pub block_size_random: u32,
    pub file_bytes: u64,
    pub machine: Machine,
}

const FILE_BYTES: u64 = 2 << 30;

/// Runs the three fio jobs on a scratch file in `dir`; appends the record to `results`.
pub fn measure(dir: &Path, results: &Path, seconds: u64) -> Result<DeviceRecord> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("fio-scratch");
    let run = |rw: &str, block: &str, jobs: u32, depth: u32| -> Result<serde_json::Value> {
        println!("fio: {rw} {block} x{jobs} jobs, depth {depth}, {seconds} s");
        let output = Command::new("fio")
            .args([
                "--name=leankv-device",
                &format!("--filename={}", file.display()),
                &format!("--size={FILE_BYTES}"),
                &format!("--rw={rw}"),
                &format!("--bs={block}"),
                &format!("--numjobs={jobs}"),
                &format!("--iodepth={depth}"),
                "--ioengine=psync",
                "--direct=1",
                "--time_based",
                &format!("--runtime={seconds}"),
                "--group_reporting",
                "--output-format=json",
            ])
            .output()
            .context("running fio (install it: apt-get install fio)")?;
        if !output.status.success() {
            bail!("fio failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    };
    let read_of = |json: &serde_json::Value| json["jobs"][0]["read"].clone();
    let random_1 = read_of(&run("randread", "16k", 1, 1)?)["iops"]
        .as_f64()
        .unwrap_or(0.0);
    let random_2 = read_of(&run("randread", "16k", 2, 1)?)["iops"]
        .as_f64()
        .unwrap_or(0.0);
    let sequential_kib = read_of(&run("read", "1m", 1, 1)?)["bw"]
        .as_f64()
        .unwrap_or(0.0);
    std::fs::remove_file(&file).ok();
    let record = DeviceRecord {
        benchmark: "device",
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        random_read_iops_1_job: random_1,
        random_read_iops_2_jobs: random_2,
        sequential_read_mib_s: sequential_kib / 1024.0,
        block_size_random: 16 << 10,
        file_bytes: FILE_BYTES,
        machine: Machine::probe(dir),
    };
    println!(
        "device: {:.0} random 16 KiB reads/s (1 job), {:.0} (2 jobs), {:.0} MiB/s sequential",
        record.random_read_iops_1_job, record.random_read_iops_2_jobs, record.sequential_read_mib_s
    );
    report::append(results, &record)?;
    Ok(record)
}
