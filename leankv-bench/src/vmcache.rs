//! `vmcache`: leankv side by side with vmcache (Leis, Alhomssi, Ziegler, Loeck, Dietrich:
//! "Virtual-Memory Assisted Buffer Management", SIGMOD 2023), the buffer manager leankv is
//! measured against, on the workloads vmcache's own driver runs: uniform lookups of 8-byte keys
//! with 120-byte values, and TPC-C with a random home warehouse per transaction and no logging.
//!
//! vmcache is not part of this repository and is never built by it: build it from
//! github.com/viktorleis/vmcache (`make`, which needs libaio's headers) and name the binary with
//! `--vmcache`. It runs as a child process configured through its environment variables; its
//! per-second column, after the warm-up seconds, gives its rate. leankv runs in this process
//! through the `ycsb` and `tpcc` drivers with the same shape (`--affinity false`, the write-ahead
//! log as `--durability` says, off by default as vmcache has none).
//!
//! Every round runs each workload and thread count on both engines back to back, the first
//! engine alternating from round to round, so that the drift of a shared machine (this VM's
//! speed swings by a tenth within minutes) reaches both alike; ratios are taken within a
//! round, and the summary gives their median and range, and the geometric mean of the ratios
//! with its 95% confidence interval.

use crate::diskstats::{self, Disk, DiskReads, DiskSampler};
use crate::engine::{DurabilityLevel, EngineKind, PoolSize, ReadPath};
use crate::harness::{Record, Sitting};
use crate::report::{self, Table};
use crate::stats::{group_by, Paired, Spread};
use crate::suite::{self, Suite};
use crate::tpcc;
use crate::workload::{Distribution, LoadOrder, Mix};
use crate::CommonArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use leankv::ablations::PAGE_FILE;
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tracing::info;

#[derive(Args)]
pub struct VmcacheArgs {
    /// The vmcache binary (built from github.com/viktorleis/vmcache with `make`).
    #[arg(long)]
    vmcache: PathBuf,
    /// Workloads, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lookups,tpcc"
    )]
    workloads: Vec<Workload>,
    /// Data in memory (10 M records, 5 warehouses; pools of 4 and 8 GiB) or beyond it (30 M
    /// records, 20 warehouses; 1 GiB pools). --records, --warehouses and --pool override.
    #[arg(long, value_enum, default_value_t = Scenario::InMemory)]
    scenario: Scenario,
    /// Records of the lookup workload.
    #[arg(long)]
    records: Option<u64>,
    /// Warehouses of TPC-C.
    #[arg(long)]
    warehouses: Option<u32>,
    /// Buffer pool of both engines in GiB (vmcache's PHYSGB).
    #[arg(long)]
    pool_gib: Option<u64>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Unmeasured seconds before each measured run [default: 2 in memory, 30 beyond].
    #[arg(long)]
    warmup: Option<u64>,
    /// Rounds; each runs everything on both engines.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// leankv's page size for new databases (vmcache's is 4 KiB; loads are kept per page
    /// size).
    #[arg(long, default_value = "16K", value_parser = crate::engine::parse_page_size)]
    page_size: usize,
    /// leankv's write-ahead log (vmcache logs nothing).
    #[arg(long, value_enum, default_value_t = DurabilityLevel::Off)]
    durability: DurabilityLevel,
    /// Keys per leankv lookup call: above 1, leankv's lookups go through `Tree::get_many_with`
    /// that many at a time, its reads beyond memory overlapping (vmcache's driver looks up one
    /// key at a time, synchronously).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    read_batch: u16,
    /// Label stored with the records (defaults to a time stamp).
    #[arg(long)]
    pub label: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Uniform lookups of 8-byte keys with 120-byte values (vmcache's RNDREAD=1).
    Lookups,
    /// TPC-C, a random home warehouse per transaction (vmcache's RNDREAD=0).
    Tpcc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    InMemory,
    Beyond,
}

/// The shape of one workload's runs, the same for both engines.
#[derive(Debug, Clone, Copy, Serialize)]
struct Shape {
    workload: Workload,
    /// Records (lookups) or warehouses (TPC-C): vmcache's DATASIZE.
    size: u64,
    pool_gib: u64,
}

impl Shape {
    fn of(args: &VmcacheArgs, workload: Workload) -> Shape {
        let beyond = args.scenario == Scenario::Beyond;
        let (size, pool_gib) = match workload {
            Workload::Lookups => (
                args.records
                    .unwrap_or(if beyond { 30_000_000 } else { 10_000_000 }),
                if beyond { 1 } else { 4 },
            ),
            Workload::Tpcc => (
                args.warehouses
                    .map_or(if beyond { 20 } else { 5 }, u64::from),
                if beyond { 1 } else { 8 },
            ),
        };
        Shape {
            workload,
            size,
            pool_gib: args.pool_gib.unwrap_or(pool_gib),
        }
    }

    /// What each engine's rate counts.
    fn unit(&self) -> &'static str {
        match self.workload {
            Workload::Lookups => "lookups/s",
            Workload::Tpcc => "transactions/s",
        }
    }
}

/// One round of one workload and thread count, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct VersusRun {
    pub workload: Workload,
    pub scenario: Scenario,
    /// Records (lookups) or warehouses (TPC-C).
    pub size: u64,
    pub pool_bytes: u64,
    pub threads: usize,
    pub round: usize,
    pub durability: DurabilityLevel,
    pub duration_s: u64,
    pub warmup_s: u64,
    pub vmcache_per_s: f64,
    pub leankv_per_s: f64,
    /// leankv / vmcache.
    pub ratio: f64,
    /// Page reads per second (vmcache's reads are 4 KiB pages, leankv's its page size).
    pub vmcache_read_mib_s: f64,
    pub leankv_page_reads_per_s: f64,
    pub leankv_peak_rss_bytes: u64,
    /// What the device under the data did during each engine's measured seconds (reads of
    /// anything on it; `None` where the kernel keeps no counters for it).
    pub vmcache_device: Option<DiskReads>,
    pub leankv_device: Option<DiskReads>,
    /// Beyond memory, lookups: the device's random reads per second of leankv's page size
    /// from as many threads as leankv's mean queue depth (interpolated), measured on leankv's
    /// page file after the round's two runs; and leankv's page reads over that.
    pub device_reads_per_s_at_leankv_depth: Option<f64>,
    pub leankv_reads_to_device: Option<f64>,
}

pub fn run(args: &VmcacheArgs, sitting: &Sitting) -> Result<Vec<Record<VersusRun>>> {
    if !args.vmcache.is_file() {
        bail!(
            "no vmcache binary at {} (build it from github.com/viktorleis/vmcache with `make`)",
            args.vmcache.display()
        );
    }
    if args.threads.contains(&0) || args.rounds == 0 || args.duration == 0 {
        bail!("threads, rounds and duration must be positive");
    }
    let warmup = args.warmup.unwrap_or(if args.scenario == Scenario::Beyond {
        30
    } else {
        2
    });
    let options = serde_json::json!({
        "vmcache": args.vmcache,
        "scenario": args.scenario,
        "threads": args.threads,
        "duration_s": args.duration,
        "warmup_s": warmup,
        "rounds": args.rounds,
        "durability": args.durability,
        "page_size": args.page_size,
    });
    let mut records = Vec::new();
    for round in 1..=args.rounds {
        for &workload in &args.workloads {
            let shape = Shape::of(args, workload);
            for &threads in &args.threads {
                let vmcache = || run_vmcache(args, sitting, shape, threads, warmup);
                let leankv = || run_leankv(args, sitting, shape, threads, warmup, round);
                // Alternate which engine goes first.
                let (vm, lean) = if round % 2 == 1 {
                    let vm = vmcache()?;
                    (vm, leankv()?)
                } else {
                    let lean = leankv()?;
                    (vmcache()?, lean)
                };
                info!(
                    "round {round}, {workload:?}, {threads} threads: vmcache {:.0}, leankv \
                     {:.0} {} ({:.2}x)",
                    vm.per_s,
                    lean.per_s,
                    shape.unit(),
                    lean.per_s / vm.per_s
                );
                let device_at_depth = device_reference(args, sitting, shape, &lean)?;
                let record = Record {
                    header: sitting
                        .environment
                        .header("vmcache", &sitting.label, &options),
                    run: VersusRun {
                        workload,
                        scenario: args.scenario,
                        size: shape.size,
                        pool_bytes: shape.pool_gib << 30,
                        threads,
                        round,
                        durability: args.durability,
                        duration_s: args.duration,
                        warmup_s: warmup,
                        vmcache_per_s: vm.per_s,
                        leankv_per_s: lean.per_s,
                        ratio: lean.per_s / vm.per_s,
                        vmcache_read_mib_s: vm.read_mib_s,
                        leankv_page_reads_per_s: lean.page_reads_per_s,
                        leankv_peak_rss_bytes: lean.peak_rss_bytes,
                        vmcache_device: vm.device,
                        leankv_device: lean.device,
                        device_reads_per_s_at_leankv_depth: device_at_depth,
                        leankv_reads_to_device: device_at_depth
                            .map(|device| lean.page_reads_per_s / device),
                    },
                };
                report::append(&args.common.results(), &record)?;
                records.push(record);
            }
        }
    }
    println!("{}", table(&records).render());
    println!("{}", summary(&records).render());
    println!(
        "results appended to {} (label {})",
        args.common.results().display(),
        sitting.label
    );
    Ok(records)
}

/// What one engine's run measured.
struct Rate {
    per_s: f64,
    read_mib_s: f64,
    page_reads_per_s: f64,
    peak_rss_bytes: u64,
    device: Option<DiskReads>,
}

/// Runs vmcache over a fresh block file in the data directory (removed afterwards): it loads
/// the data, then prints one line per second, of which the first `warmup` are left out.
fn run_vmcache(
    args: &VmcacheArgs,
    sitting: &Sitting,
    shape: Shape,
    threads: usize,
    warmup: u64,
) -> Result<Rate> {
    let block = sitting.data_dir.join("vmcache.block");
    std::fs::File::create(&block).with_context(|| format!("creating {}", block.display()))?;
    let sampler = Disk::under(&block).map(DiskSampler::start);
    let rate = measure_vmcache(args, &block, shape, threads, warmup);
    // vmcache exits right after its measured seconds: they are the sampler's last ones.
    let device = sampler.and_then(|sampler| sampler.last_seconds(args.duration));
    std::fs::remove_file(&block).with_context(|| format!("removing {}", block.display()))?;
    Ok(Rate { device, ..rate? })
}

fn measure_vmcache(
    args: &VmcacheArgs,
    block: &std::path::Path,
    shape: Shape,
    threads: usize,
    warmup: u64,
) -> Result<Rate> {
    // Virtual memory for every page the data may take (TPC-C grows): vmcache's default of
    // 16 GiB, or twice the pool (it maps the whole range, which must not exceed what the
    // kernel lets a process map).
    let virtual_gib = (shape.pool_gib * 2).max(16);
    info!(
        "vmcache: {:?} of {} with {} GiB, {threads} threads (loading first)",
        shape.workload, shape.size, shape.pool_gib
    );
    let output = Command::new(&args.vmcache)
        .env("BLOCK", block)
        .env("VIRTGB", virtual_gib.to_string())
        .env("PHYSGB", shape.pool_gib.to_string())
        .env("THREADS", threads.to_string())
        .env("DATASIZE", shape.size.to_string())
        .env(
            "RNDREAD",
            u8::from(shape.workload == Workload::Lookups).to_string(),
        )
        .env("RUNFOR", (warmup + args.duration).to_string())
        .output()
        .with_context(|| format!("running {}", args.vmcache.display()))?;
    if !output.status.success() {
        bail!(
            "vmcache failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse_vmcache(&String::from_utf8_lossy(&output.stdout), warmup)
}

/// The mean per-second transactions and read MiB of vmcache's output (CSV lines `ts,tx,rmb,
/// wmb,...` after a header) from second `warmup` on.
fn parse_vmcache(stdout: &str, warmup: u64) -> Result<Rate> {
    let mut seconds = 0u32;
    let (mut transactions, mut read_mib) = (0.0, 0.0);
    for line in stdout.lines().filter(|line| !line.starts_with("ts,")) {
        let fields: Vec<&str> = line.split(',').collect();
        let number = |index: usize| -> Option<f64> { fields.get(index)?.trim().parse().ok() };
        let (Some(second), Some(tx), Some(rmb)) = (number(0), number(1), number(2)) else {
            continue;
        };
        if second >= warmup as f64 {
            seconds += 1;
            transactions += tx;
            read_mib += rmb;
        }
    }
    if seconds == 0 {
        bail!("vmcache printed no measured seconds:\n{stdout}");
    }
    Ok(Rate {
        per_s: transactions / f64::from(seconds),
        read_mib_s: read_mib / f64::from(seconds),
        page_reads_per_s: 0.0,
        peak_rss_bytes: 0,
        device: None,
    })
}

/// Runs leankv through the `ycsb` or `tpcc` driver with the shape vmcache ran (loads kept in
/// the data directory are reused).
fn run_leankv(
    args: &VmcacheArgs,
    sitting: &Sitting,
    shape: Shape,
    threads: usize,
    warmup: u64,
    round: usize,
) -> Result<Rate> {
    let pool = PoolSize::Bytes((shape.pool_gib << 30) as usize);
    let results = args.common.results();
    match shape.workload {
        Workload::Lookups => {
            let suite = lookups_suite(args, sitting, shape, threads, warmup, round);
            let run = suite::run(&suite)?;
            let run = run.first().context("the suite ran nothing")?;
            Ok(Rate {
                per_s: run.ops_per_s,
                read_mib_s: 0.0,
                page_reads_per_s: run.page_reads_per_s,
                peak_rss_bytes: run.peak_rss_bytes,
                device: run.device,
            })
        }
        Workload::Tpcc => {
            let config = tpcc::Config {
                label: sitting.label.clone(),
                engines: vec![EngineKind::Leankv],
                warehouses: u32::try_from(shape.size).context("warehouses")?,
                threads: vec![threads],
                duration: Duration::from_secs(args.duration),
                warmup: Duration::from_secs(warmup),
                affinity: false,
                pools: vec![pool],
                repeat: 1,
                cooling_fraction: 0.1,
                check: false,
                direct_io: args.common.direct_io,
                memory_cap: false,
                durabilities: vec![args.durability],
                checkpoint_every: None,
                data_dir: sitting.data_dir.clone(),
                results,
                page_size: args.page_size,
            };
            let run = tpcc::run(&config)?;
            let run = run.first().context("TPC-C ran nothing")?;
            Ok(Rate {
                per_s: run.tps,
                read_mib_s: 0.0,
                page_reads_per_s: run.page_reads_per_s,
                peak_rss_bytes: run.peak_rss_bytes,
                device: run.device,
            })
        }
    }
}

/// The `ycsb` suite that runs vmcache's lookups on leankv.
fn lookups_suite(
    args: &VmcacheArgs,
    sitting: &Sitting,
    shape: Shape,
    threads: usize,
    warmup: u64,
    round: usize,
) -> Suite {
    let pool = PoolSize::Bytes((shape.pool_gib << 30) as usize);
    Suite {
        label: sitting.label.clone(),
        engines: vec![EngineKind::Leankv],
        records: shape.size,
        value_size: 120,
        threads: vec![threads],
        distributions: vec![Distribution::Uniform],
        mix: Mix::preset('c').expect("YCSB C"),
        reads: ReadPath::Copy,
        read_batch: usize::from(args.read_batch),
        target: None,
        duration: Duration::from_secs(args.duration),
        warmup: Duration::from_secs(warmup),
        pool,
        cooling: vec![0.1],
        direct_io: args.common.direct_io,
        memory_cap: false,
        durability: args.durability,
        checkpoint_every: None,
        data_dir: sitting.data_dir.clone(),
        results: args.common.results(),
        round,
        page_size: args.page_size,
        // vmcache loads its keys (the record indexes) in ascending order: full leaves.
        load_order: LoadOrder::Key,
    }
}

/// Seconds the device is measured at each whole depth next to leankv's queue depth.
const DEVICE_PROBE: Duration = Duration::from_secs(5);

/// Beyond memory, for lookups: the device's random-read rate at the queue depth leankv's run
/// kept (see [`diskstats::random_read_rate_at`]), on the page file of leankv's load, in pages
/// of leankv's size.
fn device_reference(
    args: &VmcacheArgs,
    sitting: &Sitting,
    shape: Shape,
    lean: &Rate,
) -> Result<Option<f64>> {
    let depth = match lean.device {
        Some(device) if args.scenario == Scenario::Beyond && device.queue_depth > 0.0 => {
            device.queue_depth
        }
        _ => return Ok(None),
    };
    if shape.workload != Workload::Lookups {
        return Ok(None);
    }
    let suite = lookups_suite(args, sitting, shape, 1, 0, 1);
    let pages = suite::data_paths(&suite)[0].join(PAGE_FILE);
    info!("the device: random reads at a queue depth of {depth:.1}");
    diskstats::random_read_rate_at(&pages, args.page_size, depth, DEVICE_PROBE).map(Some)
}

/// Every round's rates and ratio.
fn table(records: &[Record<VersusRun>]) -> Table {
    let mut table = Table::new(&[
        "workload",
        "size",
        "pool GiB",
        "threads",
        "round",
        "vmcache",
        "leankv",
        "ratio",
        "vmcache reads/s (depth)",
        "leankv reads/s (depth)",
        "device at that depth",
        "leankv ÷ device",
    ]);
    let device = |device: Option<DiskReads>| {
        device.map_or("-".into(), |device| {
            format!("{:.0} ({:.1})", device.reads_per_s, device.queue_depth)
        })
    };
    let number = |value: Option<f64>, digits: usize| {
        value.map_or("-".into(), |value| format!("{value:.digits$}"))
    };
    for run in records {
        table.row(vec![
            format!("{:?}", run.workload).to_lowercase(),
            run.size.to_string(),
            (run.pool_bytes >> 30).to_string(),
            run.threads.to_string(),
            run.round.to_string(),
            format!("{:.0}", run.vmcache_per_s),
            format!("{:.0}", run.leankv_per_s),
            format!("{:.2}", run.ratio),
            device(run.vmcache_device),
            device(run.leankv_device),
            number(run.device_reads_per_s_at_leankv_depth, 0),
            number(run.leankv_reads_to_device, 2),
        ]);
    }
    table
}

/// Per workload and thread count: the median rates, the median and range of the ratios, and
/// the ratios' geometric mean with its 95% confidence interval (rounds paired, see `stats`).
fn summary(records: &[Record<VersusRun>]) -> Table {
    let mut table = Table::new(&[
        "workload",
        "threads",
        "rounds",
        "vmcache (median)",
        "leankv (median)",
        "ratio (median)",
        "ratio range",
        "geo. mean",
        "95% interval",
    ]);
    let groups = group_by(records.iter().map(|record| &record.run), |run| {
        (run.workload, run.threads)
    });
    for ((workload, threads), runs) in groups {
        let spread = |value: fn(&VersusRun) -> f64| {
            Spread::of(&runs.iter().map(|run| value(run)).collect::<Vec<_>>())
        };
        let ratio = spread(|run| run.ratio);
        let pairs: Vec<(f64, f64)> = runs
            .iter()
            .map(|run| (run.vmcache_per_s, run.leankv_per_s))
            .collect();
        let paired = Paired::of(&pairs);
        table.row(vec![
            format!("{workload:?}").to_lowercase(),
            threads.to_string(),
            ratio.runs.to_string(),
            format!("{:.0}", spread(|run| run.vmcache_per_s).median),
            format!("{:.0}", spread(|run| run.leankv_per_s).median),
            format!("{:.2}", ratio.median),
            format!("{:.2}-{:.2}", ratio.min, ratio.max),
            paired
                .as_ref()
                .map_or("-".into(), |paired| format!("{:.3}", paired.mean)),
            paired
                .and_then(|paired| paired.interval)
                .map_or("-".into(), |(low, high)| format!("{low:.3}-{high:.3}")),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_pairs_each_rounds_rates() {
        let environment = crate::harness::Environment::probe(std::path::Path::new("."));
        let record = |round, vmcache: f64, leankv: f64| Record {
            header: environment.header("vmcache", "test", &()),
            run: VersusRun {
                workload: Workload::Tpcc,
                scenario: Scenario::InMemory,
                size: 5,
                pool_bytes: 8 << 30,
                threads: 2,
                round,
                durability: DurabilityLevel::Off,
                duration_s: 15,
                warmup_s: 0,
                vmcache_per_s: vmcache,
                leankv_per_s: leankv,
                ratio: leankv / vmcache,
                vmcache_read_mib_s: 0.0,
                leankv_page_reads_per_s: 0.0,
                leankv_peak_rss_bytes: 0,
                vmcache_device: None,
                leankv_device: None,
                device_reads_per_s_at_leankv_depth: None,
                leankv_reads_to_device: None,
            },
        };
        // The machine halves its speed in round 2: the ratio stays 1.1.
        let last_cells = |table: Table| {
            let rendered = table.render();
            let row = rendered.lines().last().unwrap_or_default().to_string();
            let cells: Vec<String> = row.split_whitespace().map(String::from).collect();
            cells[cells.len() - 2..].to_vec()
        };
        let paired = summary(&[record(1, 100.0, 110.0), record(2, 50.0, 55.0)]);
        assert_eq!(last_cells(paired), ["1.100", "1.100-1.100"]);
        assert_eq!(
            last_cells(summary(&[record(1, 100.0, 90.0)])),
            ["0.900", "-"]
        );
    }

    #[test]
    fn vmcache_output_is_averaged_after_the_warmup() {
        let stdout = "ts,tx,rmb,wmb,system,threads,datasize,workload,batch\n\
                      0,100,0,0,vmcache,1,10,rndread,64\n\
                      1,200,5,0,vmcache,1,10,rndread,64\n\
                      2,400,15,0,vmcache,1,10,rndread,64\n";
        let rate = parse_vmcache(stdout, 1).unwrap();
        assert_eq!(rate.per_s, 300.0);
        assert_eq!(rate.read_mib_s, 10.0);
        assert!(parse_vmcache("ts,tx\n", 0).is_err());
        assert!(parse_vmcache(stdout, 3).is_err());
    }
}
