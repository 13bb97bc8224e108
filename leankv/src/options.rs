//! How to open a database: [`Options`], their defaults and limits, and the check that they
//! can work before anything is allocated.
//!
//! Invariant: options that pass the check can work on this machine (page size, pool frames,
//! prefaulted memory); everything else is `Error::InvalidOptions` naming the option.

use crate::batch::Durability;
use crate::btree::node::max_key_size;
use crate::buffer::{BufferConfig, FRAME_HEADER_AREA};
use crate::error::{Error, Result};
use std::time::Duration;

/// Default page size: 16 KiB, as in the LeanStore paper. Large enough for keys of 1 KiB and
/// values of 4 KiB in the leaf with room for several per leaf, small enough that a random
/// read of one page costs little more than the device's minimum I/O.
pub const DEFAULT_PAGE_SIZE: usize = 16 * 1024;
/// Longest key with the default page size (page size / 16).
pub const MAX_KEY_SIZE: usize = max_key_size(DEFAULT_PAGE_SIZE);
/// Longest value, with any page size: 4 GiB - 1, as in LMDB. Values longer than a quarter of
/// a page ([`Db::max_inline_value_size`](crate::Db::max_inline_value_size)) live in pages of
/// their own outside the leaf.
pub const MAX_VALUE_SIZE: usize = u32::MAX as usize;
/// Leaves a scan reads ahead at most, by default (512 KiB with 16 KiB pages).
pub const DEFAULT_SCAN_PREFETCH: usize = 32;
/// Smallest pool, in frames, that can hold a root-to-leaf path for a few threads, the tree
/// roots and a cooling stage.
pub const MIN_POOL_FRAMES: usize = 24;
/// The longest default checkpoint interval (the default is the pool size): beyond it, recovery
/// time and the log's disk use (about twice the interval) would grow with the pool.
const MAX_DEFAULT_CHECKPOINT: u64 = 8 << 30;
/// Bounds of the default log buffer (a quarter of the pool between them).
const DEFAULT_LOG_BUFFER: std::ops::RangeInclusive<usize> = (64 << 20)..=(256 << 20);
/// Bounds of a chosen log buffer: a few chunks at least; at most what the log's chunk ring
/// can address (`wal::MAX_LOG_BUFFER`).
const LOG_BUFFER: std::ops::RangeInclusive<usize> = (4 << 20)..=crate::wal::MAX_LOG_BUFFER;

/// How to open a database. Build with [`Options::default`] and the setters.
///
/// Each pool frame takes one page plus a 512-byte header.
///
/// ```
/// let options = leankv::Options::default()
///     .pool_size(64 << 20)
///     .cooling_fraction(0.1);
/// assert_eq!(options.frames(), (64 << 20) / (16384 + 512));
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    pool_size: usize,
    pub(crate) page_size: usize,
    cooling_fraction: f64,
    pub(crate) direct_io: bool,
    prefault: bool,
    background_writer: bool,
    scan_prefetch: usize,
    pub(crate) open_after_crash: bool,
    pub(crate) write_ahead_log: bool,
    pub(crate) durability: Durability,
    pub(crate) eventual_delay: Duration,
    checkpoint_bytes: Option<u64>,
    log_buffer: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool_size: 1 << 30,
            page_size: DEFAULT_PAGE_SIZE,
            cooling_fraction: 0.1,
            direct_io: true,
            prefault: false,
            background_writer: true,
            scan_prefetch: DEFAULT_SCAN_PREFETCH,
            open_after_crash: false,
            write_ahead_log: true,
            durability: Durability::Eventual,
            eventual_delay: Duration::from_millis(10),
            checkpoint_bytes: None,
            log_buffer: None,
        }
    }
}

impl Options {
    /// Memory for the buffer pool in bytes (default 1 GiB). This is the engine's memory budget:
    /// pages beyond it live on disk. Memory is only used as pages are loaded, unless
    /// [`prefault`](Self::prefault) is set.
    pub fn pool_size(mut self, bytes: usize) -> Self {
        self.pool_size = bytes;
        self
    }

    /// Page size for a *new* database: a power of two from 4 KiB to 64 KiB (default 16 KiB).
    /// An existing database keeps the page size it was created with. Key and value limits
    /// scale with it (page size / 16 and / 4).
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// Fraction of the pool kept in the cooling stage once it is full (default 0.1; the paper
    /// finds 5–20% all good). Must lie in (0, 0.5].
    pub fn cooling_fraction(mut self, fraction: f64) -> Self {
        self.cooling_fraction = fraction;
        self
    }

    /// Bypass the OS page cache with `O_DIRECT` where the file system supports it (default
    /// on); `Stats::io_mode` tells what is in use.
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }

    /// Touch the whole pool at open, so no page fault of the OS happens later (default off).
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }

    /// Run a background thread that writes dirty pages ahead of eviction (default on).
    pub fn background_writer(mut self, on: bool) -> Self {
        self.background_writer = on;
        self
    }

    /// Most leaves a range scan reads ahead once it runs through pages that are not in memory
    /// (default 32; 0 turns read-ahead off). A scan starts with 2 and doubles the distance
    /// with every leaf it crosses, so short scans do not read pages they never use. Also the
    /// most pages [`Tree::get_many`](crate::Tree::get_many) reads ahead at a time. Both are
    /// capped at half the cooling stage (pages read ahead wait there). The reads are
    /// submitted in batches through io_uring where the kernel allows it (the threads that
    /// wait for the pages take the completions), else performed by as many I/O threads as the
    /// capped depth, at most 16; with 0, `get_many` reads one page at a time as `get` does.
    pub fn scan_prefetch(mut self, leaves: usize) -> Self {
        self.scan_prefetch = leaves;
        self
    }

    /// Open a database that was not closed cleanly (default off: that is
    /// [`Error::NotClosedCleanly`]). Without a write-ahead log such a file may have lost the
    /// changes since its last flush and may mix page versions; leankv still never returns a
    /// value that was not written (damaged pages are `Error::Corruption`), and
    /// `Db::check_integrity` lists what is damaged. Closing it cleanly afterwards clears the
    /// mark.
    pub fn open_after_crash(mut self, on: bool) -> Self {
        self.open_after_crash = on;
        self
    }

    /// Keep a write-ahead log (default on). With it every committed change survives a crash
    /// as [`durability`](Self::durability) promises, and a crash is recovered at the next
    /// open. Off, nothing is logged: the engine is the paper's logging-free one (for
    /// benchmarks), a crash may lose every change since the last [`Db::flush`](crate::Db::flush),
    /// and the next open refuses the file with [`Error::NotClosedCleanly`].
    pub fn write_ahead_log(mut self, on: bool) -> Self {
        self.write_ahead_log = on;
        self
    }

    /// When a commit ([`Tree::insert`](crate::Tree::insert), [`Db::write`](crate::Db::write)
    /// and the like) is durable, unless [`Db::write_with`](crate::Db::write_with) says
    /// otherwise (default [`Durability::Eventual`]). See [`Durability`].
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// How long an [`Eventual`](Durability::Eventual) commit may wait for its sync (default
    /// 10 ms): a crash loses at most about this much of the latest commits. At most 10 s.
    pub fn eventual_sync_delay(mut self, delay: Duration) -> Self {
        self.eventual_delay = delay;
        self
    }

    /// Log bytes between checkpoints (default: the pool size, between 64 MiB and 8 GiB). A
    /// checkpoint writes the pages changed since the last one, in the background (but not those
    /// that change again while it runs: the log holds their images then); recovery replays
    /// at most about this much log, and the log files take about twice this much disk (writers wait
    /// when checkpoints fall far behind). Shorter intervals cost throughput: each checkpoint writes
    /// every dirty page, and a page's first change after it logs the whole page, so with an
    /// interval much shorter than the pool, updates spread over many pages log mostly page images
    /// (YCSB A over 10 M records with a 3.8 GiB pool ran at about half the speed it reached with
    /// an interval of the pool size). Longer intervals cost recovery time: recovery reads the log
    /// since the last checkpoint twice and replays it (its memory stays within the pool size).
    /// At least 1 MiB.
    pub fn checkpoint_every(mut self, log_bytes: u64) -> Self {
        self.checkpoint_bytes = Some(log_bytes);
        self
    }

    /// The checkpoint interval in log bytes (see [`Self::checkpoint_every`]).
    pub(crate) fn checkpoint_bytes(&self) -> u64 {
        self.checkpoint_bytes
            .unwrap_or_else(|| (self.pool_size as u64).clamp(64 << 20, MAX_DEFAULT_CHECKPOINT))
    }

    /// Memory for log records not yet written to the log file (default: a quarter of the pool
    /// size, between 64 MiB and 256 MiB; 4 MiB to 512 MiB). Writes wait, before they latch
    /// anything, while this much waits for the log's writer, so the log's memory stays within
    /// it (plus the 1 MiB being filled). It is used only while the log runs ahead of the
    /// device: after each checkpoint begins, the first change of every page logs the whole page
    /// (a burst of up to the pool's changed pages), which a larger buffer takes without stalling
    /// writers (YCSB A, 2 threads, 810 MB pool: about 1.17x the throughput with 256 MiB
    /// instead of 64 MiB); a smaller one bounds memory tighter and makes writers wait for the
    /// device sooner.
    pub fn log_buffer_size(mut self, bytes: usize) -> Self {
        self.log_buffer = Some(bytes);
        self
    }

    /// The log buffer in bytes (see [`Self::log_buffer_size`]).
    pub(crate) fn log_buffer_bytes(&self) -> usize {
        self.log_buffer.unwrap_or_else(|| {
            (self.pool_size / 4).clamp(*DEFAULT_LOG_BUFFER.start(), *DEFAULT_LOG_BUFFER.end())
        })
    }

    /// Frames the pool will have with the configured page size.
    pub fn frames(&self) -> usize {
        self.pool_size / (FRAME_HEADER_AREA + self.page_size)
    }

    /// Checks that these options can work for pages of `page_size` bytes (the new database's,
    /// or the one an existing database was created with) and derives the pool's set-up.
    pub(crate) fn validate(&self, page_size: usize) -> Result<BufferConfig> {
        if self.eventual_delay > Duration::from_secs(10) {
            return Err(Error::InvalidOptions(format!(
                "eventual sync delay {:?} is above 10 s",
                self.eventual_delay
            )));
        }
        if self.checkpoint_bytes() < 1 << 20 {
            return Err(Error::InvalidOptions(format!(
                "checkpoint interval of {} log bytes is below 1 MiB",
                self.checkpoint_bytes()
            )));
        }
        if !LOG_BUFFER.contains(&self.log_buffer_bytes()) {
            return Err(Error::InvalidOptions(format!(
                "log buffer of {} bytes is not between {} MiB and {} MiB",
                self.log_buffer_bytes(),
                LOG_BUFFER.start() >> 20,
                LOG_BUFFER.end() >> 20
            )));
        }
        if !crate::io::page::valid_page_size(self.page_size) {
            return Err(Error::InvalidOptions(format!(
                "page size {} is not a power of two between 4096 and 65536",
                self.page_size
            )));
        }
        if !(self.cooling_fraction > 0.0 && self.cooling_fraction <= 0.5) {
            return Err(Error::InvalidOptions(format!(
                "cooling fraction {} is not in (0, 0.5]",
                self.cooling_fraction
            )));
        }
        let frames = self.pool_size / (FRAME_HEADER_AREA + page_size);
        if frames < MIN_POOL_FRAMES {
            return Err(Error::InvalidOptions(format!(
                "pool of {} bytes holds {frames} frames of {page_size}-byte pages; at least \
                 {MIN_POOL_FRAMES} are needed for root-to-leaf paths and the cooling stage",
                self.pool_size
            )));
        }
        let frames = u32::try_from(frames).map_err(|_| {
            Error::InvalidOptions(format!("pool of {} bytes is too large", self.pool_size))
        })?;
        if self.prefault {
            // Touching more memory than there is would end in the OOM killer, not an error.
            if let Some(available) = available_memory() {
                let pool_bytes = frames as u64 * (FRAME_HEADER_AREA + page_size) as u64;
                if pool_bytes > available {
                    return Err(Error::InvalidOptions(format!(
                        "prefault of a {pool_bytes}-byte pool, but only {available} bytes of \
                         memory are available"
                    )));
                }
            }
        }
        Ok(BufferConfig {
            page_size,
            frames,
            cooling_fraction: self.cooling_fraction,
            prefault: self.prefault,
            background_writer: self.background_writer,
            pool_file: None,
            prefetch_depth: self.scan_prefetch,
            generation: 0,
        })
    }
}

/// Memory this process may still use, in bytes: the smaller of the system's available memory
/// and what the cgroup's limit leaves; `None` where neither can be read.
fn available_memory() -> Option<u64> {
    let system = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemAvailable:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .map(|kib| kib.saturating_mul(1024))
        });
    let read = |name: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
    };
    // "max" (no limit) does not parse and leaves the system figure.
    let cgroup =
        read("memory.max").map(|limit| limit.saturating_sub(read("memory.current").unwrap_or(0)));
    match (system, cgroup) {
        (Some(system), Some(cgroup)) => Some(system.min(cgroup)),
        (system, cgroup) => system.or(cgroup),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_checkpoint_interval_is_the_pool_size_within_bounds() {
        let interval = |pool: u64| {
            let pool = usize::try_from(pool).expect("64-bit");
            Options::default().pool_size(pool).checkpoint_bytes()
        };
        assert_eq!(interval(16 << 20), 64 << 20);
        assert_eq!(interval(3 << 30), 3 << 30);
        assert_eq!(interval(64 << 30), MAX_DEFAULT_CHECKPOINT);
        let chosen = Options::default()
            .pool_size(3 << 30)
            .checkpoint_every(5 << 20);
        assert_eq!(chosen.checkpoint_bytes(), 5 << 20);
    }

    #[test]
    fn the_default_log_buffer_is_a_quarter_of_the_pool_within_bounds() {
        let buffer = |pool: usize| Options::default().pool_size(pool).log_buffer_bytes();
        assert_eq!(buffer(16 << 20), 64 << 20);
        assert_eq!(buffer(800 << 20), 200 << 20);
        assert_eq!(buffer(64 << 30), 256 << 20);
        let chosen = Options::default()
            .pool_size(64 << 30)
            .log_buffer_size(8 << 20);
        assert_eq!(chosen.log_buffer_bytes(), 8 << 20);
    }

    #[test]
    fn options_that_cannot_work_are_refused() {
        let refused = |options: Options, page_size: usize| match options.validate(page_size) {
            Err(Error::InvalidOptions(message)) => message,
            other => panic!("accepted: {other:?}"),
        };
        let small = Options::default().pool_size(64 << 20);
        assert!(refused(small.clone().page_size(5000), 5000).contains("power of two"));
        assert!(refused(small.clone().page_size(1 << 17), 1 << 17).contains("power of two"));
        assert!(
            refused(small.clone().cooling_fraction(0.0), DEFAULT_PAGE_SIZE).contains("cooling")
        );
        assert!(
            refused(small.clone().cooling_fraction(f64::NAN), DEFAULT_PAGE_SIZE)
                .contains("cooling")
        );
        assert!(
            refused(Options::default().pool_size(1 << 16), DEFAULT_PAGE_SIZE).contains("at least")
        );
        for buffer in [(4 << 20) - 1, crate::wal::MAX_LOG_BUFFER + 1] {
            let options = small.clone().log_buffer_size(buffer);
            assert!(refused(options, DEFAULT_PAGE_SIZE).contains("log buffer"));
        }
        for buffer in [4 << 20, crate::wal::MAX_LOG_BUFFER] {
            assert!(small
                .clone()
                .log_buffer_size(buffer)
                .validate(DEFAULT_PAGE_SIZE)
                .is_ok());
        }
        let memory = available_memory().expect("Linux reports available memory");
        let too_big = Options::default()
            .pool_size(usize::try_from(memory).unwrap().saturating_mul(2))
            .prefault(true);
        assert!(refused(too_big, DEFAULT_PAGE_SIZE).contains("available"));
        assert!(small.prefault(true).validate(DEFAULT_PAGE_SIZE).is_ok());
    }
}
