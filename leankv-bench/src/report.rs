//! Results: the machine a run happened on, the JSON record every run appends to a results
//! file (one JSON object per line), and the table printed at the end.

use procfs::Current;
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
    /// Reads `/proc` (through `procfs`) and the mount table for `data_dir` (which must exist).
    pub fn probe(data_dir: &Path) -> Machine {
        let cpu_model = procfs::CpuInfo::current()
            .ok()
            .and_then(|info| info.model_name(0).map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        // procfs parses the release into numbers only (dropping e.g. `-generic`); the record
        // keeps the whole string.
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or("unknown".into(), |release| release.trim().to_string());
        Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes: procfs::Meminfo::current().map_or(0, |info| info.mem_total),
            kernel,
            file_system: file_system_of(data_dir),
        }
    }
}

/// The file system type of `path`: the type of the longest mount point above it.
fn file_system_of(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    procfs::mounts()
        .unwrap_or_default()
        .into_iter()
        .filter(|mount| path.starts_with(&mount.fs_file))
        .max_by_key(|mount| mount.fs_file.len())
        .map_or("unknown".into(), |mount| mount.fs_vfstype)
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
    parse_records(&std::fs::read_to_string(path)?)
}

/// The records of `text`, one JSON value per non-blank line.
pub fn parse_records(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}

/// Bytes the files under `path` occupy on disk (sparse files count what is allocated).
pub fn disk_usage(path: &Path) -> u64 {
    disk_usage_of(path, &|_| true)
}

/// How leankv's write-ahead log files are named (`leankv.wal-0`, `leankv.wal-1`).
const LEANKV_LOG_PREFIX: &str = "leankv.wal-";

/// [`disk_usage`] without leankv's write-ahead log files: runs with the log leave them in kept
/// loads, and pools sized as a multiple of the data must not grow with them.
pub fn data_disk_usage(path: &Path) -> u64 {
    disk_usage_of(path, &|name| {
        !name.to_string_lossy().starts_with(LEANKV_LOG_PREFIX)
    })
}

/// Bytes the files under `path` whose names `counts` accepts occupy on disk.
fn disk_usage_of(path: &Path, counts: &dyn Fn(&std::ffi::OsStr) -> bool) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage_of(&entry.path(), counts),
            Ok(meta) if counts(&entry.file_name()) => meta.blocks() * 512,
            _ => 0,
        })
        .sum()
}

/// Resets the process's peak resident set size (Linux `clear_refs`), so that the next
/// [`peak_rss`] covers only what follows.
pub fn reset_peak_rss() {
    if let Ok(me) = procfs::process::Process::myself() {
        let _ = me.clear_refs(procfs::process::ClearRefs::PeakRSS);
    }
}

/// Peak resident set size in bytes since start or the last [`reset_peak_rss`].
pub fn peak_rss() -> u64 {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .ok()
        .and_then(|status| status.vmhwm)
        .map_or(0, |kib| kib * 1024)
}

/// Bytes this process has read from and written to storage so far (`/proc/self/io`; direct
/// I/O included, page-cache writes when they are accounted).
pub fn process_io_bytes() -> (u64, u64) {
    procfs::process::Process::myself()
        .and_then(|me| me.io())
        .map_or((0, 0), |io| (io.read_bytes, io.write_bytes))
}

/// A table cell for an optional rate: `decimals` after the point, `-` when unknown.
pub fn rate_or_dash(rate: Option<f64>, decimals: usize) -> String {
    rate.map_or("-".into(), |rate| format!("{rate:.decimals$}"))
}

/// A plain text table (comfy-table): the first column left-aligned, the others right-aligned,
/// two spaces between columns and a dashed line under the header.
pub struct Table(comfy_table::Table);

impl Table {
    pub fn new(header: &[&str]) -> Table {
        use comfy_table::{CellAlignment, LineStyle, TableStyle};
        const STYLE: TableStyle =
            TableStyle::new().header_separator(LineStyle::none().fill('-').junction('-'));
        let mut table = comfy_table::Table::new();
        table.load_style(STYLE).set_header(header.to_vec());
        let last = header.len().saturating_sub(1);
        for (index, column) in table.column_iter_mut().enumerate() {
            // Two spaces between columns (padding and the blank column separator), none at
            // the edges.
            column.set_padding((0, u16::from(index != last)));
            if index > 0 {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        Table(table)
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.0.add_row(cells);
    }

    pub fn render(&self) -> String {
        self.0.trim_fmt()
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
    fn data_usage_leaves_out_leankv_logs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("leankv.pages"), vec![1; 8192]).unwrap();
        std::fs::write(dir.path().join("leankv.wal-0"), vec![1; 65536]).unwrap();
        let data = data_disk_usage(dir.path());
        assert!(data > 0 && disk_usage(dir.path()) > data, "{data}");
    }

    #[test]
    fn machine_probe_reads_this_machine() {
        let machine = Machine::probe(Path::new("."));
        assert!(machine.cores >= 1 && machine.ram_bytes > 0);
        assert_ne!(machine.file_system, "unknown");
    }
}
