//! The run loop every benchmark shares (YCSB, TPC-C, scans): worker threads until a deadline,
//! a monitor that samples once a second, the engine's counters and I/O over the timed phase,
//! and the header every result record carries (benchmark, label, time, git commit, machine and
//! the invocation's options). Warm-up is the caller's (what "steady" means differs), but
//! [`read_all`] is the usual one.

use crate::diskstats::DiskReads;
use crate::engine::{counters_since, Engine, IoCounters, Table};
use crate::report::{self, Machine};
use anyhow::Result;
use serde::{Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the machine and the source were when a set of runs happened: probed once per
/// invocation, copied into every record's [`Header`].
#[derive(Debug, Clone)]
pub struct Environment {
    machine: Machine,
    git_commit: String,
}

impl Environment {
    /// Probes the machine (and the file system of `data_dir`, which must exist) and the git
    /// commit the benchmark was built from.
    pub fn probe(data_dir: &Path) -> Environment {
        Environment {
            machine: Machine::probe(data_dir),
            git_commit: git_commit(),
        }
    }

    /// The header of a record of `benchmark` under `label`, run with `options`.
    pub fn header(&self, benchmark: &'static str, label: &str, options: &impl Serialize) -> Header {
        Header {
            benchmark,
            label: label.to_string(),
            unix_time: unix_time(),
            git_commit: self.git_commit.clone(),
            options: serde_json::to_value(options).unwrap_or_default(),
            machine: self.machine.clone(),
        }
    }
}

/// The commit of the checkout this binary was built from, `-dirty` if it had uncommitted
/// changes to tracked files, or `unknown` without git.
fn git_commit() -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"));
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(source)
            .args(args)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{commit}-dirty"),
            _ => commit,
        },
        None => "unknown".into(),
    }
}

/// What every record starts with (flattened into the record's JSON object).
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub benchmark: &'static str,
    pub label: String,
    pub unix_time: u64,
    pub git_commit: String,
    /// The options of the invocation (the benchmark's configuration).
    pub options: serde_json::Value,
    pub machine: Machine,
}

/// One result record: the header and what the benchmark measured, as one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct Record<R> {
    #[serde(flatten)]
    pub header: Header,
    #[serde(flatten)]
    pub run: R,
}

impl<R> std::ops::Deref for Record<R> {
    type Target = R;

    fn deref(&self) -> &R {
        &self.run
    }
}

impl<R> std::ops::DerefMut for Record<R> {
    fn deref_mut(&mut self) -> &mut R {
        &mut self.run
    }
}

/// What workers consult to know whether to go on.
pub struct Clock<'a> {
    deadline: Instant,
    stop: &'a AtomicBool,
    /// Drawn afresh for each run: a measured run must not replay its warm-up's accesses, or
    /// the pages the warm-up left in the pool would be the ones the run asks for first.
    run_seed: u64,
}

impl Clock<'_> {
    /// Before the deadline and no worker has failed.
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    /// The seed of worker `worker`'s random choices in this run: distinct per worker and per
    /// run.
    pub fn seed(&self, worker: usize) -> u64 {
        self.run_seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// When the monitor samples: seconds since the start, and since the previous sample.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    pub second: f64,
    pub interval: f64,
}

impl Tick {
    /// `count` over the interval, per second.
    pub fn rate(&self, count: u64) -> f64 {
        count as f64 / self.interval
    }

    /// `bytes` over the interval, in MiB per second.
    pub fn mib_rate(&self, bytes: u64) -> f64 {
        self.rate(bytes) / (1 << 20) as f64
    }
}

/// What a timed phase measured.
#[derive(Debug)]
pub struct Timed<W, S> {
    /// What each worker returned, in worker order.
    pub workers: Vec<W>,
    /// The monitor's samples, about one a second.
    pub series: Vec<S>,
    pub elapsed: Duration,
    /// How much the engine's page I/O and its counters grew.
    pub io: IoCounters,
    pub counters: Vec<(&'static str, u64)>,
    /// Bytes this process read from and wrote to storage (`/proc/self/io`).
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub peak_rss_bytes: u64,
    /// What the engine's device did meanwhile (all of its users' reads, not only the engine's).
    pub device: Option<DiskReads>,
}

/// Runs `threads` copies of `worker` (given its number and the clock) for `duration`, while a
/// monitor calls `sample` about once a second, and once more for the last partial second
/// unless it is too short to give a rate. If a worker fails or panics the others stop too, and
/// the first error is returned.
pub fn run_timed<W: Send, S: Send>(
    engine: &dyn Engine,
    threads: usize,
    duration: Duration,
    worker: impl Fn(usize, &Clock<'_>) -> Result<W> + Sync,
    mut sample: impl FnMut(Tick) -> Option<S> + Send,
) -> Result<Timed<W, S>> {
    let stop = AtomicBool::new(false);
    let io_before = engine.io();
    let counters_before = engine.counters();
    let (read_before, written_before) = report::process_io_bytes();
    report::reset_peak_rss();
    let disk = engine.disk();
    let disk_before = disk.and_then(|disk| disk.snapshot());
    let started = Instant::now();
    let clock = Clock {
        deadline: started + duration,
        stop: &stop,
        run_seed: fastrand::u64(..),
    };
    let (results, series) = std::thread::scope(|scope| {
        let monitor = scope.spawn(|| monitor(&stop, started, &mut sample));
        let workers: Vec<_> = (0..threads)
            .map(|index| {
                let (worker, clock) = (&worker, &clock);
                scope.spawn(move || stop_all_on_failure(clock.stop, || worker(index, clock)))
            })
            .collect();
        let results: Vec<Result<W>> = workers
            .into_iter()
            .map(|w| w.join().expect("benchmark worker panicked"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        (results, monitor.join().expect("monitor panicked"))
    });
    let elapsed = started.elapsed();
    let workers = results.into_iter().collect::<Result<Vec<_>>>()?;
    let io_after = engine.io();
    let (read_after, written_after) = report::process_io_bytes();
    let device = disk
        .and_then(|disk| disk.snapshot())
        .zip(disk_before)
        .map(|(after, before)| after.reads_since(&before));
    Ok(Timed {
        workers,
        series,
        elapsed,
        io: IoCounters {
            page_reads: io_after.page_reads.saturating_sub(io_before.page_reads),
            page_writes: io_after.page_writes.saturating_sub(io_before.page_writes),
        },
        counters: counters_since(engine, &counters_before),
        bytes_read: read_after.saturating_sub(read_before),
        bytes_written: written_after.saturating_sub(written_before),
        peak_rss_bytes: report::peak_rss(),
        device,
    })
}

/// Calls `sample` once a second until `stop`, then once more for the last partial second
/// (unless shorter than a quarter second), so that even a one-second phase has a sample
/// however the wake-ups fall.
fn monitor<S>(
    stop: &AtomicBool,
    started: Instant,
    sample: &mut impl FnMut(Tick) -> Option<S>,
) -> Vec<S> {
    let mut series = Vec::new();
    let mut last = started;
    let mut next = started + Duration::from_secs(1);
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let now = Instant::now();
        if stopping && now - last < Duration::from_millis(250) {
            break;
        }
        if !stopping && now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        next += Duration::from_secs(1);
        let tick = Tick {
            second: (now - started).as_secs_f64(),
            interval: (now - last).as_secs_f64(),
        };
        series.extend(sample(tick));
        last = now;
        if stopping {
            break;
        }
    }
    series
}

/// Runs one worker's `body`; if it fails or panics, raises `stop` so that the other workers
/// and the monitor end too (a panicked worker would otherwise leave them running, and a
/// monitor that runs until `stop` would keep the scope open forever).
fn stop_all_on_failure<T>(stop: &AtomicBool, body: impl FnOnce() -> Result<T>) -> Result<T> {
    struct RaiseOnDrop<'a>(&'a AtomicBool, bool);
    impl Drop for RaiseOnDrop<'_> {
        fn drop(&mut self) {
            if self.1 {
                self.0.store(true, Ordering::Relaxed);
            }
        }
    }
    let mut raise = RaiseOnDrop(stop, true);
    let result = body();
    raise.1 = result.is_err();
    result
}

/// The usual warm-up when the pool holds the data: reads every pair of `tables` once, so that
/// the timed phase starts with everything in memory. Returns how many pairs there were.
pub fn read_all(engine: &dyn Engine, tables: impl IntoIterator<Item = Table>) -> Result<u64> {
    let mut seen = 0;
    for table in tables {
        engine.scan(table, &[], None, &mut |_, _| {
            seen += 1;
            true
        })?;
    }
    Ok(seen)
}

pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A fresh directory under `parent` for data that lives only during one run. Scratch
/// directories left by runs that were killed before they could clean up (their process is
/// gone) are removed first.
/// Runs `measure` in a fresh scratch directory under `parent`, removed afterwards (also when
/// `measure` fails).
pub fn in_scratch_dir<T>(parent: &Path, measure: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let dir = tempdir_in(parent)?;
    let measured = measure(&dir);
    std::fs::remove_dir_all(&dir)?;
    measured
}

/// What a benchmark run starts from (see `CommonArgs::sitting`).
pub struct Sitting {
    pub label: String,
    pub data_dir: PathBuf,
    pub environment: Environment,
}

pub fn tempdir_in(parent: &Path) -> Result<PathBuf> {
    remove_orphaned_scratch(parent);
    let path = parent.join(format!(
        "scratch-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&path)?;
    Ok(path)
}

/// Removes the `scratch-<pid>-*` directories in `parent` whose process no longer runs.
fn remove_orphaned_scratch(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|name| name.strip_prefix("scratch-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            if let Err(error) = std::fs::remove_dir_all(entry.path()) {
                tracing::warn!("removing {}: {error}", entry.path().display());
            }
        }
    }
}

/// Serializes a duration as seconds (for options).
pub fn seconds<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DurabilityLevel, EngineKind, Setup};
    use std::sync::atomic::AtomicU64;

    fn engine(dir: &Path) -> std::sync::Arc<dyn Engine> {
        let setup = Setup::for_tests(DurabilityLevel::default());
        crate::engines::open(EngineKind::Leankv, dir, &setup).unwrap()
    }

    #[test]
    fn scratch_of_killed_runs_is_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        // No process has this id (pid_max is at most 2^22).
        let orphan = parent.path().join(format!("scratch-{}-1", u32::MAX));
        let own = parent
            .path()
            .join(format!("scratch-{}-2", std::process::id()));
        let other = parent.path().join("data-kept");
        for dir in [&orphan, &own, &other] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let fresh = tempdir_in(parent.path()).unwrap();
        assert!(fresh.exists() && own.exists() && other.exists());
        assert!(!orphan.exists(), "the killed run's scratch stayed");
    }

    #[test]
    fn workers_run_until_the_deadline_and_the_monitor_samples() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let done = AtomicU64::new(0);
        let timed = run_timed(
            engine.as_ref(),
            2,
            Duration::from_millis(1300),
            |index, clock| {
                let mut n = 0u64;
                while clock.running() {
                    engine.put(0, &n.to_be_bytes(), &[index as u8])?;
                    done.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                Ok(n)
            },
            |tick| Some((tick.second, done.load(Ordering::Relaxed))),
        )
        .unwrap();
        assert_eq!(timed.workers.len(), 2);
        assert!(timed.workers.iter().all(|&n| n > 0));
        assert!(timed.elapsed >= Duration::from_millis(1300));
        // One sample after a second, one for the last 0.3 s.
        assert_eq!(timed.series.len(), 2, "{:?}", timed.series.len());
        assert!(timed.series[0].0 >= 1.0 && timed.series[1].1 > 0);
    }

    #[test]
    fn no_run_draws_the_seeds_of_another_or_workers_of_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let seeds = || {
            run_timed(
                engine.as_ref(),
                2,
                Duration::ZERO,
                |index, clock| Ok(clock.seed(index)),
                |_| None::<()>,
            )
            .unwrap()
            .workers
        };
        let (warm_up, measured) = (seeds(), seeds());
        assert_ne!(warm_up[0], warm_up[1]);
        assert_ne!(
            warm_up[0], measured[0],
            "a measured run replays its warm-up"
        );
        assert_ne!(
            warm_up[1], measured[1],
            "a measured run replays its warm-up"
        );
    }

    #[test]
    fn a_failing_worker_stops_the_others_and_fails_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let started = Instant::now();
        let result = run_timed(
            engine.as_ref(),
            2,
            Duration::from_secs(60),
            |index, clock| {
                if index == 0 {
                    anyhow::bail!("worker 0 fails");
                }
                while clock.running() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            },
            |_| None::<()>,
        );
        assert!(result.unwrap_err().to_string().contains("worker 0 fails"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn records_flatten_their_header() {
        let environment = Environment {
            machine: Machine::probe(Path::new(".")),
            git_commit: "abc".into(),
        };
        let record = Record {
            header: environment.header("test", "label", &serde_json::json!({"records": 5})),
            run: serde_json::json!({"ops": 7}),
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["benchmark"], "test");
        assert_eq!(json["ops"], 7);
        assert_eq!(json["options"]["records"], 5);
        assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    }
}
