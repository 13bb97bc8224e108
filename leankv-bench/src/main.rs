//! `leankv-bench`: the benchmark driver. Without arguments it runs the headline comparison
//! (README's main job); subcommands run YCSB-style suites and TPC-C, measure the device with fio,
//! render plots from result files and simulate replacement policies on page-access traces.
//!
//! Everything a run writes goes under one directory ignored by git, `bench-output/`
//! (`--output-dir`): `results.jsonl`, one SVG per label and the loaded databases in `data/`.
//! The tracked reference results in `bench/results/` change only with `--publish`.

mod cgroup;
mod compare;
mod device;
mod diskstats;
mod engine;
mod engines;
mod harness;
mod large_values;
mod plot;
mod plot_cmd;
mod range_removal;
mod recovery;
mod report;
mod scan;
mod sim;
mod stats;
mod suite;
mod tpcc;
mod vmcache;
mod workload;
mod ycsb;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use engine::{DurabilityLevel, EngineKind, PoolSize, ReadPath};
use std::path::PathBuf;
use std::time::Duration;
use suite::Suite;
use tracing::info;
use workload::{Distribution, LoadOrder, Mix};

/// Where runs write results, plots and data unless told otherwise (ignored by git).
const OUTPUT_DIR: &str = "bench-output";
/// The published reference results (tracked by git), written only with `--publish`.
const PUBLISHED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results");

#[derive(Parser)]
#[command(
    version,
    about = "Benchmarks for leankv: the engine vs. its ablations, baselines and peers",
    after_help = "Results, plots and loaded data go under bench-output/ (ignored by git; \
                  --output-dir). The reference results in bench/results/ change only with \
                  --publish. `device` (and `scan` unless --fio-seconds 0) need fio on PATH. \
                  Progress goes to stderr (LEANKV_BENCH_LOG=warn quiets it), results to stdout."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// The headline (also the default): uniform lookups with data in memory on leankv, the
    /// in-memory tree and the traditional buffer manager, then leankv with data 5x the pool;
    /// every configuration three times (--rounds), with median and range.
    ///
    /// Loaded data is removed at the end unless --keep-data is given.
    Headline {
        /// Records to load.
        #[arg(long, default_value_t = 2_000_000)]
        records: u64,
        /// Seconds per measured run.
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// Rounds over all configurations, interleaved; the table and plot give the median
        /// and range.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Keep the loaded databases (under --dir) for the next invocation.
        #[arg(long)]
        keep_data: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// YCSB-style suite: every engine x cooling x threads x distribution.
    Ycsb(YcsbArgs),
    /// The same `ycsb` or `tpcc` run by two or more builds of leankv-bench, alternating round
    /// by round, with their rates paired by round: a change's worth with its 95% confidence
    /// interval, from one sitting.
    Compare(compare::CompareArgs),
    /// TPC-C: the five transactions in the standard mix on W warehouses, per engine, pool
    /// and thread count, with a per-second time series and optional consistency checks.
    Tpcc(TpccArgs),
    /// Scans of a large and a small tree by two threads at once, per pool size (Fig. 12), with
    /// the device's sequential read bandwidth measured before and after (needs `fio` on PATH
    /// unless --fio-seconds 0).
    Scan(ScanArgs),
    /// Random-read IOPS, sequential read bandwidth and synced 4 KiB writes per second of the
    /// data directory's device (needs fio).
    ///
    /// Needs the `fio` tool on PATH (Debian/Ubuntu: apt-get install fio).
    Device {
        #[command(flatten)]
        common: CommonArgs,
        /// Seconds per fio job.
        #[arg(long, default_value_t = 15)]
        seconds: u64,
    },
    /// Crash recovery: TPC-C on leankv in a child process killed with SIGKILL after --seconds,
    /// then the open that recovers: its wall time, the log it replayed, the log's peak disk
    /// use while running, and an integrity check of the result.
    Recovery(recovery::RecoveryArgs),
    /// `Tree::remove_range` over most of a large tree next to removing the same keys one by
    /// one, each on a fresh load: time, pages in use before and after, log written.
    RemoveRange(range_removal::RangeRemovalArgs),
    /// Values of 1 MiB, 16 MiB and 256 MiB written and read next to the device's sequential
    /// bandwidth (fio, same sitting), and the peak memory of a 1 GiB value with a 64 MiB pool.
    LargeValues(large_values::LargeValueArgs),
    /// leankv side by side with vmcache (a binary built from github.com/viktorleis/vmcache,
    /// given by --vmcache): uniform lookups and TPC-C with a random home warehouse, in memory
    /// or beyond it, the engines alternating round by round; each round's ratio and their
    /// median.
    Vmcache(vmcache::VmcacheArgs),
    /// The TPC-C process `recovery` runs and kills.
    #[command(hide = true)]
    RecoveryChild(recovery::ChildArgs),
    /// Render a plot from a results file.
    Plot(plot_cmd::PlotArgs),
    /// Replay a page-access trace through replacement policies and print their hit rates.
    Sim(sim::SimArgs),
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Directory for everything a run writes (results.jsonl, plots, data/); ignored by git.
    #[arg(long, default_value = OUTPUT_DIR)]
    output_dir: PathBuf,
    /// Where databases are kept between runs, loads being reused [default: <output-dir>/data].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// JSON-lines file every run is appended to [default: <output-dir>/results.jsonl].
    #[arg(long)]
    results: Option<PathBuf>,
    /// Also append the records to the published reference results (bench/results/results.jsonl,
    /// tracked by git) and copy the plot there.
    #[arg(long)]
    publish: bool,
    /// Use O_DIRECT for leankv's page file (and direct reads for RocksDB).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    direct_io: bool,
}

impl CommonArgs {
    fn data_dir(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| self.output_dir.join("data"))
    }

    fn results(&self) -> PathBuf {
        self.results
            .clone()
            .unwrap_or_else(|| self.output_dir.join("results.jsonl"))
    }

    /// The start of a run of benchmark `kind`: its label (`label`, else a time stamp), the
    /// data directory (created) and the machine.
    fn sitting(&self, kind: &str, label: Option<&str>) -> Result<harness::Sitting> {
        let data_dir = self.data_dir();
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        Ok(harness::Sitting {
            label: label.map_or_else(|| default_label(kind), str::to_string),
            environment: harness::Environment::probe(&data_dir),
            data_dir,
        })
    }
}

/// What the YCSB and TPC-C suites share: engines, thread counts, label, memory cap.
#[derive(Args)]
struct RunArgs {
    /// Engines, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "leankv")]
    engines: Vec<EngineKind>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    threads: Vec<usize>,
    /// Label stored with every record (defaults to a time stamp).
    #[arg(long)]
    label: Option<String>,
    /// Run each engine in a memory cgroup of pool size + 10% (root only; drops the page
    /// cache first): the fair budget for engines that cache through the OS.
    #[arg(long)]
    memory_cap: bool,
    /// When a commit is durable, comma-separated: each runs in turn within a round, and within
    /// each engine the others are compared with the first round by round (off,eventual: what
    /// the log costs); engines that never log run at the first only.
    /// The default, eventual, is leankv's default (log synced within 10 ms); immediate syncs
    /// before each commit returns (group commit); none logs without syncing on the commit's
    /// account; off runs leankv without its write-ahead log (the paper's engine). Peers get
    /// their closest setting and the in-memory baselines never log: each engine's settings in
    /// the results say what it ran with. Loads always run off.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "eventual")]
    durability: Vec<DurabilityLevel>,
    /// Log bytes between leankv's checkpoints (256M, 1G) [default: leankv's, the pool size,
    /// between 64 MiB and 8 GiB]. Each checkpoint writes the pages changed since the last one,
    /// and every page's first change after it logs the page whole: shorter intervals bound
    /// recovery tighter and cost more. Needs the log (not with --durability off).
    #[arg(long, value_parser = engine::parse_checkpoint_interval)]
    checkpoint_every: Option<u64>,
    /// leankv's page size for new databases: a power of two from 4K to 64K (loads are kept
    /// per page size).
    #[arg(long, default_value = "16K", value_parser = engine::parse_page_size)]
    page_size: usize,
}

impl RunArgs {
    fn validate(&self) -> Result<()> {
        let levels = &self.durability;
        if levels.is_empty() || (1..levels.len()).any(|i| levels[..i].contains(&levels[i])) {
            bail!("--durability takes each level at most once, and at least one");
        }
        let logged = self.durability.iter().any(|&d| d != DurabilityLevel::Off);
        if self.checkpoint_every.is_some() && !logged {
            bail!(
                "--checkpoint-every sets the interval of leankv's write-ahead log, which \
                 --durability off turns off"
            );
        }
        Ok(())
    }
}

#[derive(Args)]
struct YcsbArgs {
    #[command(flatten)]
    run: RunArgs,
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    #[arg(long, default_value_t = 120)]
    value_size: usize,
    /// Key distributions, comma-separated: uniform, zipf:<θ> or θ (e.g. 0.5,0.75,1,1.25).
    #[arg(long, value_delimiter = ',', default_value = "uniform")]
    distribution: Vec<Distribution>,
    /// Operation mix: a YCSB preset a-f, or e.g. read=0.9,update=0.1.
    #[arg(long, default_value = "c")]
    mix: Mix,
    /// The call reads go through: `copy` (each engine's fastest: the value copied into a
    /// reused buffer) or `natural` (the call users make: leankv's `Tree::get` returns an owned
    /// value, LMDB, RocksDB and redb lend a slice).
    #[arg(long, value_enum, default_value_t = ReadPath::Copy)]
    reads: ReadPath,
    /// Keys per read call: above 1, each read of the mix looks up this many keys with one
    /// multi-key call (leankv: `Tree::get_many_with`, whose reads beyond memory overlap;
    /// peers: one read after another). Counted as that many reads; latency is per call.
    /// Needs `--reads copy`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    read_batch: u16,
    /// Operations per second over all threads, as YCSB's `-target`: each thread paces its
    /// share evenly (default: as fast as they go). For what an engine does at a given load,
    /// e.g. the log's bytes where many threads each write rarely.
    #[arg(long)]
    target: Option<f64>,
    /// The order the load inserts records in: `index` (keys at random places, as YCSB's hashed
    /// keys; leaves about two-thirds full) or `key` (ascending, as a bulk load and vmcache's
    /// loader; full leaves). Loads are kept per order.
    #[arg(long, value_enum, default_value_t = LoadOrder::Index)]
    load_order: LoadOrder,
    /// Seconds per measured run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds of unmeasured warm-up when the data exceeds the pool.
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Memory budget: bytes (512M, 2G) or a multiple of the data size (0.2x).
    #[arg(long, default_value = "2x")]
    pool: PoolSize,
    /// Rounds over all runs, interleaved; medians over them follow the table, and with several
    /// engines or durabilities, their ratios paired by round with a 95% confidence interval.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    repeat: u16,
    /// Cooling fractions for leankv-based engines, comma-separated (Fig. 11 sweep).
    #[arg(long, value_delimiter = ',', default_value = "0.1")]
    cooling: Vec<f64>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct TpccArgs {
    #[command(flatten)]
    run: RunArgs,
    #[arg(long, default_value_t = 1)]
    warehouses: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds of unmeasured transactions before each run whose pool does not hold the data
    /// (0: measure from the first transaction, as Fig. 9's growth beyond the pool does).
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// Each worker owns a share of the warehouses and starts transactions only there.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    affinity: bool,
    /// Memory budgets, comma-separated: bytes (512M, 2G) or multiples of the loaded data (2x).
    #[arg(long, value_delimiter = ',', default_value = "8G")]
    pool: Vec<PoolSize>,
    /// Rounds over all runs, interleaved; medians over them follow the table, and with several
    /// engines or durabilities, their ratios paired by round with a 95% confidence interval.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    repeat: u16,
    /// Cooling fraction of leankv-based engines.
    #[arg(long, default_value_t = 0.1)]
    cooling: f64,
    /// After each run, verify consistency conditions 1-4 (clause 3.3.2); fail if one breaks.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct ScanArgs {
    #[arg(long, value_delimiter = ',', default_value = "leankv")]
    engines: Vec<EngineKind>,
    #[arg(long, default_value_t = 1_000_000)]
    small_records: u64,
    #[arg(long, default_value_t = 12_000_000)]
    large_records: u64,
    #[arg(long, default_value_t = 120)]
    value_size: usize,
    /// Pool sizes, comma-separated: bytes (512M) or multiples of both trees' data (0.5x).
    #[arg(long, value_delimiter = ',', default_value = "0.05x,0.25x,1.2x")]
    pool: Vec<PoolSize>,
    /// Read-ahead depths in leaves, comma-separated (0: none).
    #[arg(long, value_delimiter = ',', default_value = "32")]
    prefetch: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Seconds of fio sequential reads before and after the runs (0: skip).
    #[arg(long, default_value_t = 10)]
    fio_seconds: u64,
    #[arg(long)]
    label: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_tracing();
    // No subcommand means `headline` with its defaults, exactly as clap would parse it.
    let command = cli.command.unwrap_or_else(|| {
        Cli::parse_from(["leankv-bench", "headline"])
            .command
            .expect("`headline` parses to a command")
    });
    match command {
        Command::Headline {
            records,
            duration,
            rounds,
            keep_data,
            common,
        } => headline(records, duration, rounds, keep_data, &common),
        Command::Ycsb(args) => ycsb_suite(args),
        Command::Compare(args) => compare::run(&args),
        Command::Tpcc(args) => tpcc_runs(args),
        Command::Scan(args) => scan_runs(args),
        Command::Device { common, seconds } => {
            let record = device::measure(&common.data_dir(), &common.results(), seconds)?;
            publish(&common, std::slice::from_ref(&record), None)
        }
        Command::Recovery(args) => {
            let record = recovery::run(&args)?;
            publish(&args.common, std::slice::from_ref(&record), None)
        }
        Command::RecoveryChild(args) => recovery::child(&args),
        Command::RemoveRange(args) => {
            let records = range_removal::run(&args)?;
            publish(&args.common, &records, None)
        }
        Command::LargeValues(args) => {
            let records = large_values::run(&args)?;
            publish(&args.common, &records, None)
        }
        Command::Vmcache(args) => {
            let sitting = args.common.sitting("vmcache", args.label.as_deref())?;
            let records = vmcache::run(&args, &sitting)?;
            publish(&args.common, &records, None)
        }
        Command::Plot(args) => plot_cmd::run(&args),
        Command::Sim(args) => sim::run(&args),
    }
}

/// Progress and diagnostics go to stderr through `tracing` (level from `LEANKV_BENCH_LOG`,
/// default `info`); tables and results go to stdout.
fn init_tracing() {
    let level = std::env::var("LEANKV_BENCH_LOG")
        .ok()
        .and_then(|level| level.parse().ok())
        .unwrap_or(tracing::Level::INFO);
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .without_time()
        .with_writer(std::io::stderr)
        .init();
}

fn default_label(kind: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{kind}-{secs}")
}

fn ycsb_suite(args: YcsbArgs) -> Result<()> {
    args.run.validate()?;
    let durabilities = args.run.durability.clone();
    if args.run.threads.contains(&0) || args.cooling.iter().any(|c| !(0.0..1.0).contains(c)) {
        bail!("threads must be positive and cooling fractions in [0, 1)");
    }
    if args.read_batch > 1 && args.reads != ReadPath::Copy {
        bail!("--read-batch goes with --reads copy: batched reads copy their values");
    }
    if args
        .target
        .is_some_and(|target| !(target.is_finite() && target > 0.0))
    {
        bail!("--target must be a positive number of operations per second");
    }
    let suite = Suite {
        label: args.run.label.unwrap_or_else(|| default_label("ycsb")),
        engines: args.run.engines,
        records: args.records,
        value_size: args.value_size,
        threads: args.run.threads,
        distributions: args.distribution,
        mix: args.mix,
        reads: args.reads,
        read_batch: usize::from(args.read_batch),
        target: args.target,
        duration: Duration::from_secs(args.duration),
        warmup: Duration::from_secs(args.warmup),
        pool: args.pool,
        cooling: args.cooling,
        direct_io: args.common.direct_io,
        memory_cap: args.run.memory_cap,
        durability: durabilities[0],
        checkpoint_every: args.run.checkpoint_every,
        data_dir: args.common.data_dir(),
        results: args.common.results(),
        round: 1,
        page_size: args.run.page_size,
        load_order: args.load_order,
    };
    let records = suite::run_rounds(&suite, &durabilities, usize::from(args.repeat))?;
    println!(
        "results appended to {} (label {})",
        suite.results.display(),
        suite.label
    );
    publish(&args.common, &records, None)
}

/// With `--publish`, appends `records` to the published results file and copies `plot`
/// (if any) next to it.
fn publish<T: serde::Serialize>(
    common: &CommonArgs,
    records: &[T],
    plot: Option<&std::path::Path>,
) -> Result<()> {
    if !common.publish {
        return Ok(());
    }
    let dir = std::path::Path::new(PUBLISHED_DIR);
    let results = dir.join("results.jsonl");
    for record in records {
        report::append(&results, record)?;
    }
    info!(
        "published {} records to {}",
        records.len(),
        results.display()
    );
    if let Some(plot) = plot {
        let target = dir.join(plot.file_name().unwrap_or_default());
        std::fs::copy(plot, &target)?;
        info!("published the plot to {}", target.display());
    }
    Ok(())
}

fn tpcc_runs(args: TpccArgs) -> Result<()> {
    args.run.validate()?;
    let config = tpcc::Config {
        label: args.run.label.unwrap_or_else(|| default_label("tpcc")),
        engines: args.run.engines,
        warehouses: args.warehouses,
        threads: args.run.threads,
        duration: Duration::from_secs(args.duration),
        warmup: Duration::from_secs(args.warmup),
        affinity: args.affinity,
        pools: args.pool,
        repeat: usize::from(args.repeat),
        cooling_fraction: args.cooling,
        check: args.check,
        direct_io: args.common.direct_io,
        memory_cap: args.run.memory_cap,
        durabilities: args.run.durability,
        checkpoint_every: args.run.checkpoint_every,
        data_dir: args.common.data_dir(),
        results: args.common.results(),
        page_size: args.run.page_size,
    };
    let records = tpcc::run(&config)?;
    let title = format!("TPC-C, {} warehouses", config.warehouses);
    let plot = plot_runs(&records, &config.results, &config.label, |values, path| {
        plot::tpcc_series(values, &title, path)
    })?;
    publish(&args.common, &records, Some(&plot))
}

/// Draws `records` (just appended to `results` under `label`) into `<label>.svg` next to the
/// results file with `draw`, says where both went and returns the plot's path.
fn plot_runs<T: serde::Serialize>(
    records: &[T],
    results: &std::path::Path,
    label: &str,
    draw: impl FnOnce(&[serde_json::Value], &std::path::Path) -> Result<()>,
) -> Result<PathBuf> {
    let plot_path = results.with_file_name(format!("{label}.svg"));
    let values: Vec<serde_json::Value> = records
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    draw(&values, &plot_path)?;
    println!(
        "results appended to {} (label {label}), plot in {}",
        results.display(),
        plot_path.display()
    );
    Ok(plot_path)
}

fn scan_runs(args: ScanArgs) -> Result<()> {
    let config = scan::Config {
        label: args.label.unwrap_or_else(|| default_label("scan")),
        engines: args.engines,
        small_records: args.small_records,
        large_records: args.large_records,
        value_size: args.value_size,
        pools: args.pool,
        prefetch: args.prefetch,
        duration: Duration::from_secs(args.duration),
        fio_seconds: args.fio_seconds,
        direct_io: args.common.direct_io,
        data_dir: args.common.data_dir(),
        results: args.common.results(),
    };
    let records = scan::run(&config)?;
    let plot = plot_runs(&records, &config.results, &config.label, |values, path| {
        plot::scan_series(values, "concurrent scans of a large and a small tree", path)
    })?;
    publish(&args.common, &records, Some(&plot))
}

/// README's main job: in memory, leankv vs. the in-memory tree vs. a traditional buffer
/// manager; beyond memory, leankv with a pool a fifth of the data. Each configuration runs
/// `rounds` times, interleaved (round after round over all of them), so that drift of a shared
/// machine hits all alike; the table gives the median and range of each, the plot too.
fn headline(
    records: u64,
    duration: u64,
    rounds: usize,
    keep_data: bool,
    common: &CommonArgs,
) -> Result<()> {
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let label = default_label("headline");
    let in_memory = Suite {
        label: label.clone(),
        engines: vec![
            EngineKind::Leankv,
            EngineKind::Inmem,
            EngineKind::Traditional,
        ],
        records,
        value_size: 120,
        threads: vec![1, 2],
        distributions: vec![Distribution::Uniform],
        mix: Mix::preset('c').expect("preset c exists"),
        reads: ReadPath::Copy,
        read_batch: 1,
        target: None,
        duration: Duration::from_secs(duration),
        warmup: Duration::from_secs(duration),
        pool: PoolSize::OfData(2.0),
        cooling: vec![0.1],
        direct_io: common.direct_io,
        memory_cap: false,
        durability: DurabilityLevel::default(),
        checkpoint_every: None,
        data_dir: common.data_dir(),
        results: common.results(),
        round: 1,
        page_size: leankv::DEFAULT_PAGE_SIZE,
        load_order: LoadOrder::Index,
    };
    let beyond_memory = Suite {
        engines: vec![EngineKind::Leankv],
        pool: PoolSize::OfData(0.2),
        ..in_memory.clone()
    };
    // Removes the loaded data on the way out (errors included) unless asked to keep it.
    let _cleanup = (!keep_data).then(|| suite::RemoveOnDrop(suite::data_paths(&in_memory)));
    let mut all = Vec::new();
    for round in 1..=rounds {
        info!("round {round}/{rounds}, in memory: {records} records, uniform lookups");
        all.extend(suite::run(&Suite {
            round,
            ..in_memory.clone()
        })?);
        info!("round {round}/{rounds}, beyond memory: pool = data / 5");
        all.extend(suite::run(&Suite {
            round,
            ..beyond_memory.clone()
        })?);
    }
    println!(
        "\n== headline: median and range over {rounds} rounds ==\n{}",
        suite::summary(&all).render()
    );
    let title =
        format!("uniform lookups, {records} records, median of {rounds} runs (whiskers: min-max)");
    let plot = plot_runs(&all, &in_memory.results, &label, |values, path| {
        plot::engines(values, &title, plot_cmd::bar_label, path)
    })?;
    publish(common, &all, Some(&plot))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--durability` list of `ycsb` or `tpcc` parsed from `args`.
    fn durability(args: &[&str]) -> Result<Vec<DurabilityLevel>, clap::Error> {
        let cli = Cli::try_parse_from(["leankv-bench"].iter().chain(args))?;
        Ok(match cli.command {
            Some(Command::Ycsb(ycsb)) => ycsb.run.durability,
            Some(Command::Tpcc(tpcc)) => tpcc.run.durability,
            _ => unreachable!("only ycsb and tpcc are parsed here"),
        })
    }

    #[test]
    fn checkpoint_interval_parses_and_needs_the_log() {
        for command in ["ycsb", "tpcc"] {
            let run = |args: &[&str]| {
                let cli = Cli::try_parse_from(["leankv-bench", command].iter().chain(args))?;
                Ok::<_, clap::Error>(match cli.command {
                    Some(Command::Ycsb(ycsb)) => ycsb.run,
                    Some(Command::Tpcc(tpcc)) => tpcc.run,
                    _ => unreachable!("only ycsb and tpcc are parsed here"),
                })
            };
            assert_eq!(run(&[]).unwrap().checkpoint_every, None);
            let chosen = run(&["--checkpoint-every", "256M"]).unwrap();
            assert_eq!(chosen.checkpoint_every, Some(256 << 20));
            chosen.validate().unwrap();
            let error = run(&["--checkpoint-every", "512K"]).err().expect("refused");
            assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
            let off = run(&["--checkpoint-every", "1G", "--durability", "off"]).unwrap();
            let error = off.validate().unwrap_err().to_string();
            assert!(error.contains("--durability off"), "{error}");
            let twice = run(&["--durability", "off,eventual,off"]).unwrap();
            assert!(twice.validate().is_err());
            // With a logged level beside off, the interval is for that one.
            run(&["--checkpoint-every", "1G", "--durability", "off,eventual"])
                .unwrap()
                .validate()
                .unwrap();
        }
    }

    #[test]
    fn durability_flag_parses_with_eventual_as_default() {
        for command in ["ycsb", "tpcc"] {
            assert_eq!(durability(&[command]).unwrap(), [DurabilityLevel::Eventual]);
            for (text, level) in [
                ("off", DurabilityLevel::Off),
                ("none", DurabilityLevel::None),
                ("eventual", DurabilityLevel::Eventual),
                ("immediate", DurabilityLevel::Immediate),
            ] {
                assert_eq!(
                    durability(&[command, "--durability", text]).unwrap(),
                    [level]
                );
            }
            assert_eq!(
                durability(&[command, "--durability", "off,eventual"]).unwrap(),
                [DurabilityLevel::Off, DurabilityLevel::Eventual]
            );
            let error = durability(&[command, "--durability", "fsync"]).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
            assert!(error.to_string().contains("immediate"), "{error}");
        }
    }
}
