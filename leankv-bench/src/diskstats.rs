//! The block device under a directory as the kernel counts it (`/proc/diskstats`), and the rate
//! at which it serves random reads at a given queue depth: issue 20's beyond-memory row compares
//! leankv's page reads with what the device does at the queue depth leankv kept it at, both
//! read in the same run instead of from a fio run in another sitting.
//!
//! The read queue depth over an interval is the time the reads spent in the device (the
//! kernel's time spent reading, summed over the reads) over the interval's length (Little's
//! law): the mean number of reads in flight.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A block device, by its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    major: u32,
    minor: u32,
}

/// A device's read counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct DiskSnapshot {
    at: Instant,
    reads: u64,
    reading_ms: u64,
}

/// What a device did between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiskReads {
    pub reads_per_s: f64,
    /// Mean reads in flight.
    pub queue_depth: f64,
}

impl Disk {
    /// The device holding `path`; `None` where the kernel keeps no statistics for it (an
    /// overlay or network file system).
    pub fn under(path: &Path) -> Option<Disk> {
        let dev = std::fs::metadata(path).ok()?.dev();
        // Linux's encoding of a device number (glibc's `major` and `minor`).
        let disk = Disk {
            major: (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)) as u32,
            minor: (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32,
        };
        disk.snapshot().map(|_| disk)
    }

    /// The device's counters now.
    pub fn snapshot(&self) -> Option<DiskSnapshot> {
        let at = Instant::now();
        let stat = procfs::diskstats().ok()?.into_iter().find(|stat| {
            u32::try_from(stat.major) == Ok(self.major)
                && u32::try_from(stat.minor) == Ok(self.minor)
        })?;
        Some(DiskSnapshot {
            at,
            reads: stat.reads,
            reading_ms: stat.time_reading,
        })
    }
}

impl DiskSnapshot {
    /// What the device did since `earlier`.
    pub fn reads_since(&self, earlier: &DiskSnapshot) -> DiskReads {
        let seconds = self.at.duration_since(earlier.at).as_secs_f64().max(1e-3);
        DiskReads {
            reads_per_s: self.reads.saturating_sub(earlier.reads) as f64 / seconds,
            queue_depth: self.reading_ms.saturating_sub(earlier.reading_ms) as f64
                / (seconds * 1000.0),
        }
    }
}

/// Snapshots a device about once a second on a thread of its own, for a child process whose
/// measured part is its last seconds.
pub struct DiskSampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<DiskSnapshot>>,
}

impl DiskSampler {
    pub fn start(disk: Disk) -> DiskSampler {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut snapshots = Vec::new();
            snapshots.extend(disk.snapshot());
            while stopped.recv_timeout(Duration::from_secs(1)) == Err(RecvTimeoutError::Timeout) {
                snapshots.extend(disk.snapshot());
            }
            snapshots.extend(disk.snapshot());
            snapshots
        });
        DiskSampler { stop, thread }
    }

    /// Stops; what the device did over about the last `seconds` (from the snapshot nearest to
    /// that many seconds before the last one).
    pub fn last_seconds(self, seconds: u64) -> Option<DiskReads> {
        drop(self.stop);
        let snapshots = self.thread.join().ok()?;
        let last = snapshots.last()?;
        let start = last.at.checked_sub(Duration::from_secs(seconds))?;
        let first = snapshots
            .iter()
            .min_by_key(|snapshot| snapshot.at.max(start) - snapshot.at.min(start))
            .filter(|first| first.at < last.at)?;
        Some(last.reads_since(first))
    }
}

/// Random reads of `block` bytes (aligned to it) from `depth` threads at once, each waiting for
/// its read (fio's `psync` with `depth` jobs), bypassing the page cache, for `duration`:
/// reads per second.
pub fn random_read_rate(
    file: &Path,
    block: usize,
    depth: usize,
    duration: Duration,
) -> Result<f64> {
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(file)
        .with_context(|| format!("opening {} for direct reads", file.display()))?;
    let blocks = handle.metadata()?.len() / block as u64;
    if blocks == 0 {
        bail!("{} holds no {block}-byte block to read", file.display());
    }
    if depth == 0 {
        bail!("no reader threads asked for");
    }
    let reads = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let threads: Vec<_> = (0..depth)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    // Direct reads need a buffer aligned to the block size.
                    let mut buffer = vec![0u8; 2 * block];
                    let lead = buffer.as_ptr().align_offset(block);
                    let buffer = &mut buffer[lead..lead + block];
                    let mut done = 0;
                    while started.elapsed() < duration {
                        let at = fastrand::u64(..blocks) * block as u64;
                        handle.read_exact_at(buffer, at).context("a direct read")?;
                        done += 1;
                    }
                    reads.fetch_add(done, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|thread| thread.join().expect("reader panicked"))
    })?;
    Ok(reads.into_inner() as f64 / started.elapsed().as_secs_f64())
}

/// The device's random-read rate at queue depth `depth` (a mean, not whole): measured at the
/// whole depths around it, interpolated between them.
pub fn random_read_rate_at(
    file: &Path,
    block: usize,
    depth: f64,
    duration: Duration,
) -> Result<f64> {
    let low = (depth.floor() as usize).max(1);
    let high = (depth.ceil() as usize).max(1);
    let at_low = random_read_rate(file, block, low, duration)?;
    if high == low {
        return Ok(at_low);
    }
    let at_high = random_read_rate(file, block, high, duration)?;
    Ok(at_low + (at_high - at_low) * (depth - low as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_reads_show_in_the_devices_counters() {
        // In the working directory: a temporary directory may be on tmpfs, which has no
        // device counters.
        let dir = tempfile::tempdir_in(".").unwrap();
        let file = dir.path().join("blocks");
        std::fs::write(&file, vec![7u8; 4 << 20]).unwrap();
        let Some(disk) = Disk::under(&file) else {
            return; // an overlay or network file system: the kernel counts no reads for it
        };
        let before = disk.snapshot().expect("a snapshot");
        let started = Instant::now();
        let rate = random_read_rate(&file, 4096, 2, Duration::from_millis(200)).unwrap();
        let ours = rate * started.elapsed().as_secs_f64();
        let after = disk.snapshot().expect("a snapshot");
        let device = after.reads_since(&before);
        let counted = (after.reads - before.reads) as f64;
        assert!(ours > 10.0, "{ours} reads");
        // Other processes' reads only add to the device's count.
        assert!(
            counted >= 0.8 * ours,
            "device counted {counted:.0}, we read {ours:.0}"
        );
        assert!(
            device.queue_depth > 0.0 && device.queue_depth < 64.0,
            "{device:?}"
        );
    }
}
