//! Results: the machine a run happened on, the JSON record every run appends to a results
//! file (one JSON object per line), and the table printed at the end.

use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Facts about the machine and file system, recorded with every run.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub ram_bytes: u64,
    pub kernel: String,
    pub file_system: String,
}

impl Machine {
    /// Reads `/proc` and `statfs` of `data_dir` (which must exist).
    pub fn probe(data_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map_or("unknown".into(), |(_, model)| model.trim().to_string());
        let ram_bytes = proc_kib_field("/proc/meminfo", "MemTotal:");
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or("unknown".into(), |release| release.trim().to_string());
        Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes,
            kernel,
            file_system: file_system_of(data_dir),
        }
    }
}

/// The file system type of `path`: the type of the longest mount point above it.
fn file_system_of(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, mount_point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(mount_point)
                .then(|| (mount_point.len(), kind.to_string()))
        })
        .max()
        .map_or("unknown".into(), |(_, kind)| kind)
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// A histogram of latencies in nanoseconds, from 1 ns to a minute, 3 significant digits.
pub fn new_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

impl Latency {
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Latency {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        Latency {
            p50_us: us(histogram.value_at_quantile(0.5)),
            p99_us: us(histogram.value_at_quantile(0.99)),
            p999_us: us(histogram.value_at_quantile(0.999)),
            max_us: us(histogram.max()),
        }
    }
}

/// Appends `record` as one JSON line to `path` (creating its directory).
pub fn append<T: Serialize>(path: &Path, record: &T) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut line = serde_json::to_vec(record)?;
    line.push(b'\n');
    file.write_all(&line)?;
    Ok(())
}

/// Reads every JSON line of `path`.
pub fn read_records(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}

/// Bytes the files under `path` occupy on disk (sparse files count what is allocated).
pub fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Resets the process's peak resident set size (Linux `clear_refs`), so that the next
/// [`peak_rss`] covers only what follows.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size in bytes since start or the last [`reset_peak_rss`].
pub fn peak_rss() -> u64 {
    proc_kib_field("/proc/self/status", "VmHWM:")
}

/// Bytes this process has read from and written to storage so far (`/proc/self/io`; direct
/// I/O included, page-cache writes when they are accounted).
pub fn process_io_bytes() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("read_bytes:"), field("write_bytes:"))
}

/// The `<field> <n> kB` line of a `/proc` file, in bytes (0 if absent).
fn proc_kib_field(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// A plain text table with right-aligned columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.header.len();
        let width = |i: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .map(|row| row.get(i).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let line = |row: &Vec<String>| {
            row.iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        let mut out = line(&self.header);
        out.push('\n');
        out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (columns - 1)));
        for row in &self.rows {
            out.push('\n');
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut table = Table::new(&["engine", "ops/s"]);
        table.row(vec!["leankv".into(), "1000".into()]);
        table.row(vec!["inmem".into(), "25".into()]);
        assert_eq!(
            table.render(),
            "engine  ops/s\n-------------\nleankv   1000\ninmem      25"
        );
    }

    #[test]
    fn records_round_trip_through_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/results.jsonl");
        append(
            &path,
            &serde_json::json!({"engine": "leankv", "ops_per_s": 1.5}),
        )
        .unwrap();
        append(
            &path,
            &serde_json::json!({"engine": "inmem", "ops_per_s": 2.5}),
        )
        .unwrap();
        let records = read_records(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1]["engine"], "inmem");
    }

    #[test]
    fn machine_probe_reads_this_machine() {
        let machine = Machine::probe(Path::new("."));
        assert!(machine.cores >= 1 && machine.ram_bytes > 0);
        assert_ne!(machine.file_system, "unknown");
    }
}
