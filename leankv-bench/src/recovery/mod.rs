//! `recovery`: what a crash in the middle of TPC-C costs leankv. A child process (this binary's
//! hidden `recovery-child` command) runs TPC-C on a copy of the kept load; the parent samples
//! the log files' sizes every 100 ms and kills the child with SIGKILL at the deadline (no
//! close, no flush), then opens the database, which recovers, and checks its integrity and,
//! with `--check`, TPC-C's consistency conditions. The record holds the open's wall time, what
//! recovery replayed (`leankv::RecoveryStats`) and the log's peak disk use.

use crate::engine::{counter, DurabilityLevel, EngineKind, PoolSize, Setup};
use crate::engines;
use crate::harness::{self, tempdir_in, Record};
use crate::report::{self, Table};
use crate::tpcc::{self, check, schema};
use crate::CommonArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::{error, info};

/// leankv's two log files, used in turn.
const LOG_FILES: [&str; 2] = ["leankv.wal-0", "leankv.wal-1"];
/// How often the child reports its progress and the parent samples the log files.
const INTERVAL: Duration = Duration::from_millis(100);
/// How long a child nobody kills (its parent died) runs past the deadline before it closes.
const CHILD_GRACE: Duration = Duration::from_secs(60);

#[derive(Args)]
pub struct RecoveryArgs {
    /// Seconds of TPC-C before the kill.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 5)]
    warehouses: u32,
    /// Workers, each owning its share of the warehouses (at most one per warehouse).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// When a commit is durable (as for `tpcc`); `off` has no log to recover from.
    #[arg(long, value_enum, default_value_t = DurabilityLevel::default())]
    durability: DurabilityLevel,
    /// Memory budget of the run and of the recovery: bytes (512M, 2G) or a multiple of the
    /// loaded data (2x).
    #[arg(long, default_value = "8G")]
    pool: PoolSize,
    /// Log bytes between checkpoints (256M, 1G) [default: leankv's, the pool size, at least
    /// 64 MiB].
    #[arg(long, value_parser = crate::engine::parse_checkpoint_interval)]
    checkpoint_every: Option<u64>,
    /// After recovery, check TPC-C's consistency conditions 1-4. Each transaction is one
    /// atomic commit and every worker owns its warehouses, so they hold after any crash: a
    /// violation fails the command.
    #[arg(long)]
    check: bool,
    /// Label stored with the record (defaults to a time stamp).
    #[arg(long)]
    label: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl RecoveryArgs {
    fn validate(&self) -> Result<()> {
        if self.durability == DurabilityLevel::Off {
            bail!(
                "--durability off runs leankv without its write-ahead log: a crash leaves \
                 nothing to recover from (use none, eventual or immediate)"
            );
        }
        if self.seconds == 0 || self.warehouses == 0 || self.threads == 0 {
            bail!("--seconds, --warehouses and --threads must be positive");
        }
        if self.threads > self.warehouses as usize {
            bail!(
                "every worker needs a warehouse of its own: {} threads, {} warehouses",
                self.threads,
                self.warehouses
            );
        }
        Ok(())
    }
}

/// The hidden command the parent runs TPC-C with: everything the engine's [`Setup`] needs.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct ChildArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long)]
    warehouses: u32,
    #[arg(long)]
    threads: usize,
    #[arg(long, value_enum)]
    durability: DurabilityLevel,
    #[arg(long)]
    pool_bytes: usize,
    #[arg(long)]
    checkpoint_every: Option<u64>,
    #[arg(long, action = clap::ArgAction::Set)]
    direct_io: bool,
    /// When the child stops by itself if nobody kills it.
    #[arg(long)]
    seconds: u64,
}

impl ChildArgs {
    /// The engine's set-up, the same in the child's run and in the parent's recovery.
    fn setup(&self) -> Setup {
        Setup {
            pool_bytes: self.pool_bytes,
            cooling_fraction: 0.1,
            direct_io: self.direct_io,
            data_bytes: 0,
            tables: schema::TABLES,
            scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
            durability: self.durability,
            checkpoint_every: self.checkpoint_every,
            page_size: leankv::DEFAULT_PAGE_SIZE,
        }
    }

    /// The command line after `recovery-child` that parses back to `self`.
    fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--dir".into(), self.dir.clone().into()];
        let mut flag = |name: &str, value: String| args.extend([name.into(), value.into()]);
        flag("--warehouses", self.warehouses.to_string());
        flag("--threads", self.threads.to_string());
        flag("--durability", self.durability.name().into());
        flag("--pool-bytes", self.pool_bytes.to_string());
        flag("--direct-io", self.direct_io.to_string());
        flag("--seconds", self.seconds.to_string());
        if let Some(bytes) = self.checkpoint_every {
            flag("--checkpoint-every", bytes.to_string());
        }
        args
    }
}

/// A `tpcc` configuration for `warehouses` with affinity: what the loader and the workers read.
fn tpcc_config(warehouses: u32, threads: usize, direct_io: bool, data_dir: &Path) -> tpcc::Config {
    tpcc::Config {
        label: String::new(),
        engines: vec![EngineKind::Leankv],
        warehouses,
        threads: vec![threads],
        duration: Duration::ZERO,
        warmup: Duration::ZERO,
        affinity: true,
        pools: Vec::new(),
        repeat: 1,
        cooling_fraction: 0.1,
        check: false,
        direct_io,
        memory_cap: false,
        durabilities: vec![DurabilityLevel::default()],
        checkpoint_every: None,
        data_dir: data_dir.to_path_buf(),
        results: PathBuf::new(),
        page_size: leankv::DEFAULT_PAGE_SIZE,
    }
}

/// The child: opens the copy, warms the pool when it holds the data (as `tpcc` does), says
/// `ready <settings>`, then runs TPC-C and prints `progress <transactions> <log bytes>` every
/// [`INTERVAL`] until killed.
pub fn child(args: &ChildArgs) -> Result<()> {
    let engine = engines::open(EngineKind::Leankv, &args.dir, &args.setup())?;
    if engine
        .data_bytes()
        .is_some_and(|bytes| args.pool_bytes as u64 >= bytes)
    {
        harness::read_all(engine.as_ref(), 0..schema::TABLES.len())?;
    }
    let config = tpcc_config(args.warehouses, args.threads, args.direct_io, &args.dir);
    let (done, stop) = (AtomicU64::new(0), AtomicBool::new(false));
    println!("ready {}", engine.settings());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut out = std::io::stdout().lock();
            while !stop.load(Ordering::Relaxed) {
                let log = counter(&engine.counters(), "log_bytes_written").unwrap_or(0);
                let transactions = done.load(Ordering::Relaxed);
                if writeln!(out, "progress {transactions} {log}").is_err() {
                    // The parent is gone: end as abruptly as the kill would have.
                    std::process::exit(1);
                }
                std::thread::sleep(INTERVAL);
            }
        });
        let duration = Duration::from_secs(args.seconds) + CHILD_GRACE;
        let result = tpcc::run_workers(&config, engine.as_ref(), args.threads, duration, &done);
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// What the child said so far.
#[derive(Debug, Default)]
struct Reported {
    /// When the child said `ready` (its workers start), and its engine's settings.
    ready: Option<(Instant, String)>,
    transactions: Option<u64>,
    log_bytes_written: Option<u64>,
}

impl Reported {
    fn read(&mut self, line: &str) {
        if let Some(settings) = line.strip_prefix("ready ") {
            self.ready = Some((Instant::now(), settings.to_string()));
        } else if let Some(numbers) = line.strip_prefix("progress ") {
            let mut numbers = numbers.split(' ').map(|n| n.parse().ok());
            self.transactions = numbers.next().flatten();
            self.log_bytes_written = numbers.next().flatten();
        }
    }
}

/// The log files' total size: their length, and the blocks the file system allocated.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct LogSize {
    pub bytes: u64,
    pub allocated_bytes: u64,
}

impl LogSize {
    fn of(dir: &Path) -> LogSize {
        LOG_FILES
            .iter()
            .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
            .fold(LogSize::default(), |sum, file| LogSize {
                bytes: sum.bytes + file.len(),
                allocated_bytes: sum.allocated_bytes + file.blocks() * 512,
            })
    }

    fn max(self, other: LogSize) -> LogSize {
        LogSize {
            bytes: self.bytes.max(other.bytes),
            allocated_bytes: self.allocated_bytes.max(other.allocated_bytes),
        }
    }
}

/// What the parent saw of the child's run up to the kill.
struct Crashed {
    settings: String,
    seconds_run: f64,
    transactions: Option<u64>,
    log_bytes_written: Option<u64>,
    log_peak: LogSize,
    log_at_crash: LogSize,
}

/// Runs the child on `args.dir` and kills it `seconds` after it said `ready`, sampling the
/// log files every [`INTERVAL`] meanwhile.
fn run_and_kill(args: &ChildArgs, seconds: Duration) -> Result<Crashed> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("recovery-child")
        .args(args.to_args())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the TPC-C child")?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let reported = Mutex::new(Reported::default());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                reported.lock().expect("not poisoned").read(&line);
            }
        });
        let mut peak = LogSize::default();
        let killed_at = loop {
            peak = peak.max(LogSize::of(&args.dir));
            if let Some(status) = child.try_wait()? {
                bail!("the TPC-C child ended before it was killed ({status})");
            }
            let started = reported
                .lock()
                .expect("not poisoned")
                .ready
                .as_ref()
                .map(|r| r.0);
            let left = started.map_or(INTERVAL, |at| seconds.saturating_sub(at.elapsed()));
            if left.is_zero() {
                child.kill().context("killing the TPC-C child")?; // SIGKILL
                break Instant::now();
            }
            std::thread::sleep(left.min(INTERVAL));
        };
        child.wait()?;
        let log_at_crash = LogSize::of(&args.dir);
        let reported = reported.lock().expect("not poisoned");
        let (ready, settings) = reported.ready.clone().expect("killed after ready");
        Ok(Crashed {
            settings,
            seconds_run: (killed_at - ready).as_secs_f64(),
            transactions: reported.transactions,
            log_bytes_written: reported.log_bytes_written,
            log_peak: peak.max(log_at_crash),
            log_at_crash,
        })
    })
}

/// `leankv::RecoveryStats`, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    pub log_bytes: u64,
    pub records: u64,
    pub pages: u64,
    /// Pages recovery wrote before the end of its replay to stay within the pool.
    pub pages_written_early: u64,
    pub batches_rolled_back: u64,
    pub duration_s: f64,
}

/// What reopening the crashed database found.
struct Recovered {
    open_s: f64,
    recovery: Recovery,
    integrity_problems: Vec<String>,
    consistency_violations: Option<Vec<String>>,
}

/// Opens the crashed database in `args.dir` with the run's options, timing the open, then
/// checks its integrity and (with `check`) TPC-C's consistency conditions.
fn recover(args: &ChildArgs, check: bool) -> Result<Recovered> {
    let setup = args.setup();
    let started = Instant::now();
    let db = leankv::Db::open(&args.dir, engines::leankv_options(&setup))
        .context("opening the crashed database")?;
    let open_s = started.elapsed().as_secs_f64();
    let stats = db.stats().recovery;
    let integrity = db.check_integrity()?;
    db.close()?;
    let consistency_violations = if check {
        let engine = engines::open(EngineKind::Leankv, &args.dir, &setup)?;
        Some(check::violations(engine.as_ref(), args.warehouses)?)
    } else {
        None
    };
    Ok(Recovered {
        open_s,
        recovery: Recovery {
            log_bytes: stats.log_bytes,
            records: stats.records,
            pages: stats.pages,
            pages_written_early: stats.pages_written_early,
            batches_rolled_back: stats.batches_rolled_back,
            duration_s: stats.duration.as_secs_f64(),
        },
        integrity_problems: integrity.problems,
        consistency_violations,
    })
}

/// One crash and recovery, as saved to the results file.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryRun {
    pub engine: &'static str,
    pub engine_settings: String,
    pub warehouses: u32,
    pub threads: usize,
    pub durability: DurabilityLevel,
    /// What one commit covers (see `tpcc::txn`).
    pub commit_unit: &'static str,
    pub pool_bytes: usize,
    /// Log bytes between checkpoints as asked (`None`: leankv's default, the pool size, at
    /// least 64 MiB).
    pub checkpoint_every: Option<u64>,
    /// From the child's first transaction to the kill.
    pub seconds_run: f64,
    /// Transactions the child finished (rollbacks included) and log bytes it had written, as
    /// of its last report (at most 100 ms before the kill); `None` if it reported none.
    pub transactions: Option<u64>,
    pub log_bytes_written: Option<u64>,
    /// The largest total size of the log files, sampled every 100 ms, and their size after
    /// the kill.
    pub log_peak: LogSize,
    pub log_at_crash: LogSize,
    /// Wall time of `Db::open` on the crashed database (recovery included).
    pub open_s: f64,
    pub recovery: Recovery,
    pub integrity_ok: bool,
    pub integrity_problems: Vec<String>,
    /// TPC-C's consistency conditions 1-4 after recovery (`None`: not checked).
    pub consistency_violations: Option<Vec<String>>,
    pub direct_io: bool,
}

/// Loads (or reuses) the TPC-C load, crashes a run on a copy of it, recovers, appends the
/// record to the results file and prints it; fails if recovery or the integrity check fails,
/// keeping the crashed database.
pub fn run(args: &RecoveryArgs) -> Result<Record<RecoveryRun>> {
    args.validate()?;
    let harness::Sitting {
        label,
        data_dir,
        environment,
    } = args.common.sitting("recovery", args.label.as_deref())?;
    let label = &label;
    let tpcc_config = tpcc_config(
        args.warehouses,
        args.threads,
        args.common.direct_io,
        &data_dir,
    );
    let loaded = tpcc::ensure_loaded(&tpcc_config, EngineKind::Leankv)?;
    let pool_bytes = args
        .pool
        .bytes(report::data_disk_usage(&loaded))
        .max(64 << 20);
    let scratch = tempdir_in(&data_dir)?;
    tpcc::copy_dir(&loaded, &scratch)?;
    let child = ChildArgs {
        dir: scratch.clone(),
        warehouses: args.warehouses,
        threads: args.threads,
        durability: args.durability,
        pool_bytes,
        checkpoint_every: args.checkpoint_every,
        direct_io: args.common.direct_io,
        seconds: args.seconds,
    };
    info!(
        "recovery: TPC-C on {} warehouses, {} threads, durability {}, pool {} MiB, killed after \
         {} s",
        args.warehouses,
        args.threads,
        args.durability.name(),
        pool_bytes >> 20,
        args.seconds
    );
    let crashed = run_and_kill(&child, Duration::from_secs(args.seconds));
    let recovered = crashed.and_then(|crashed| Ok((crashed, recover(&child, args.check)?)));
    let integrity_ok = matches!(&recovered, Ok((_, r)) if r.integrity_problems.is_empty());
    // Each TPC-C transaction is one atomic commit and no two workers share a district, so the
    // conditions hold after any crash.
    let consistent = matches!(&recovered, Ok((_, r))
        if r.consistency_violations.as_ref().is_none_or(Vec::is_empty));
    let sound = integrity_ok && consistent;
    let kept = data_dir.join(format!("recovery-failed-{}", harness::unix_time()));
    if sound {
        std::fs::remove_dir_all(&scratch)?;
    } else {
        std::fs::rename(&scratch, &kept)?;
    }
    let (crashed, recovered) =
        recovered.with_context(|| format!("the crashed database is kept in {}", kept.display()))?;
    for problem in &recovered.integrity_problems {
        error!("INTEGRITY: {problem}");
    }
    for violation in recovered.consistency_violations.iter().flatten() {
        error!("CONSISTENCY: {violation}");
    }
    let options = serde_json::json!({
        "seconds": args.seconds,
        "warehouses": args.warehouses,
        "threads": args.threads,
        "durability": args.durability,
        "pool": args.pool,
        "checkpoint_every": args.checkpoint_every,
        "check": args.check,
        "direct_io": args.common.direct_io,
    });
    let record = Record {
        header: environment.header("recovery", label, &options),
        run: RecoveryRun {
            engine: EngineKind::Leankv.name(),
            engine_settings: crashed.settings,
            warehouses: args.warehouses,
            threads: args.threads,
            durability: args.durability,
            commit_unit: engines::LEANKV_TRANSACTION_UNIT,
            pool_bytes,
            checkpoint_every: args.checkpoint_every,
            seconds_run: crashed.seconds_run,
            transactions: crashed.transactions,
            log_bytes_written: crashed.log_bytes_written,
            log_peak: crashed.log_peak,
            log_at_crash: crashed.log_at_crash,
            open_s: recovered.open_s,
            recovery: recovered.recovery,
            integrity_ok,
            integrity_problems: recovered.integrity_problems,
            consistency_violations: recovered.consistency_violations,
            direct_io: args.common.direct_io,
        },
    };
    let results = args.common.results();
    report::append(&results, &record)?;
    println!("{}", table(std::slice::from_ref(&record)).render());
    println!("results appended to {} (label {label})", results.display());
    if !sound {
        bail!(
            "the recovered database failed its integrity or TPC-C consistency check (problems \
             above; kept in {})",
            kept.display()
        );
    }
    Ok(record)
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

/// The records as a table: the run, the log it left, and what recovery made of it.
pub fn table(records: &[Record<RecoveryRun>]) -> Table {
    let mut table = Table::new(&[
        "durability",
        "W",
        "threads",
        "s run",
        "txns",
        "ckpt MiB",
        "log MiB written",
        "log peak MiB (alloc)",
        "replayed MiB",
        "records",
        "pages",
        "rolled back",
        "open s",
        "integrity",
        "TPC-C check",
    ]);
    for record in records {
        let dash = || "-".to_string();
        table.row(vec![
            record.durability.name().into(),
            record.warehouses.to_string(),
            record.threads.to_string(),
            format!("{:.1}", record.seconds_run),
            record.transactions.map_or_else(dash, |t| t.to_string()),
            record.checkpoint_every.map_or("default".into(), mib),
            record.log_bytes_written.map_or_else(dash, mib),
            format!(
                "{} ({})",
                mib(record.log_peak.bytes),
                mib(record.log_peak.allocated_bytes)
            ),
            mib(record.recovery.log_bytes),
            record.recovery.records.to_string(),
            record.recovery.pages.to_string(),
            record.recovery.batches_rolled_back.to_string(),
            format!("{:.2}", record.open_s),
            if record.integrity_ok { "ok" } else { "FAILED" }.into(),
            match &record.consistency_violations {
                None => dash(),
                Some(found) if found.is_empty() => "passed".into(),
                Some(found) if found.len() == 1 => "1 violation".into(),
                Some(found) => format!("{} violations", found.len()),
            },
        ]);
    }
    table
}

#[cfg(test)]
mod tests;
