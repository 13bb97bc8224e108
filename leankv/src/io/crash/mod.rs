//! A deterministic crash simulator for the storage seam: power loss, tested rather than argued.
//!
//! A [`CrashSimulator`] is one crash domain (one machine). It hands out any number of
//! [`SimulatedStorage`]s, one per file (the page file, the log), and they all crash together at
//! one instant.
//!
//! # The model
//!
//! Each file keeps its *durable image* (its bytes and length as of its last completed
//! [`Storage::sync`]) and the *unsynced operations* completed since then (writes and
//! `extend_to` growths, in completion order). Reads see the latest state, as a real page cache
//! would. `sync` makes that file's completed operations durable (per file, like `fdatasync`);
//! it does nothing for the other files of the domain.
//!
//! `shrink_to` cuts a file durably at once (the engine drops only bytes it will not read again).
//!
//! The *crash point* comes after a number of mutating operations (writes, extends, syncs and
//! shrinks across all files of the domain, [`CrashSimulator::crash_after`]) or explicitly
//! ([`CrashSimulator::crash`]). The operation that reaches the crash point fails, and so does
//! every later operation on any storage of the domain, reads and `len` included: the process is
//! dead and the engine sees errors, never a silent success. A write or extend that reaches the
//! crash point was already issued to the device: it counts as *in flight*, and recovery may
//! apply it (wholly or torn) or not, like any unsynced write. A sync that reaches the crash
//! point makes nothing durable. The operations completed before the crash point are frozen.
//!
//! Recovery ([`CrashSimulator::recover`]) builds, for each file, what a device could hold after
//! the power came back: the durable image plus an arbitrary subset of the unsynced operations
//! applied in an arbitrary order (overlapping writes make the order matter), with at most
//! [`CrashSimulator::max_torn_writes`] of the applied writes (default 1 per file) torn at
//! 512-byte sector granularity: each absolute sector `[k * 512, (k + 1) * 512)` the write
//! covers gets either all of the new bytes or keeps all of the bytes below. Growth of the
//! length beyond the durable length is kept or lost: the recovered length is the durable
//! length or the end of one of the applied operations that went beyond it; bytes beyond the
//! durable length that no applied write covers read as zeros (a hole). Every choice comes from
//! the seed ([`fastrand::Rng::with_seed`]), so a failing seed reproduces. The two extremes are
//! [`Recovery::LoseUnsynced`] (the durable images) and [`Recovery::KeepUnsynced`] (the latest
//! state, in flight operations included).
//!
//! # Invariant
//!
//! Recovery never produces a byte that was not durable or written before the crash: at every
//! offset below the durable length the recovered byte is the durable byte or the byte of an
//! unsynced write covering that offset; above it, zero or such a byte. Every byte covered by a
//! completed sync survives unless an unsynced write was issued over it, and the recovered file
//! is never shorter than its durable length.

use super::{IoMode, MemoryStorage, Storage, IO_ALIGNMENT};
use parking_lot::Mutex;
use std::io::{Error, ErrorKind, Result};
use std::sync::Arc;

mod recovery;

use recovery::recover_file;
pub use recovery::{Recovered, RecoveredFile, Recovery, RecoveryReport};

/// The sector size at which writes tear: a sector is written wholly or not at all.
pub const SECTOR_SIZE: usize = IO_ALIGNMENT;

/// Counters over the life of one crash domain (every file together).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CrashStats {
    /// Writes completed (before the crash point).
    pub writes: u64,
    /// Bytes those writes carried.
    pub bytes_written: u64,
    /// `extend_to` calls completed.
    pub extends: u64,
    /// Syncs completed.
    pub syncs: u64,
    /// `shrink_to` calls completed.
    pub shrinks: u64,
    /// Crashes (0 or 1 for one domain; a domain restarted from a recovery carries the count
    /// on).
    pub crashes: u64,
    /// Operations refused because the domain had crashed (the one that reached the crash
    /// point included).
    pub refused: u64,
    /// Recoveries built from this domain.
    pub recoveries: u64,
    /// Bytes of unsynced writes that recoveries dropped, summed over recoveries.
    pub bytes_dropped: u64,
    /// Bytes of torn writes that recoveries left old, summed over recoveries.
    pub bytes_torn: u64,
}

/// An operation completed (or in flight) since the file's last sync.
#[derive(Debug, Clone)]
enum Unsynced {
    Write { offset: usize, bytes: Vec<u8> },
    Extend { len: usize },
}

impl Unsynced {
    fn end(&self) -> usize {
        match self {
            Unsynced::Write { offset, bytes } => offset + bytes.len(),
            Unsynced::Extend { len } => *len,
        }
    }

    /// Applies the operation to `image`; `sectors` chooses, per absolute sector, whether a
    /// write's new bytes land (None: all of them). Returns the bytes left old.
    fn apply(&self, image: &mut Vec<u8>, mut sectors: Option<&mut dyn FnMut() -> bool>) -> u64 {
        if image.len() < self.end() {
            image.resize(self.end(), 0);
        }
        let Unsynced::Write { offset, bytes } = self else {
            return 0;
        };
        let (mut at, end, mut left_old) = (*offset, offset + bytes.len(), 0u64);
        while at < end {
            let next = ((at / SECTOR_SIZE + 1) * SECTOR_SIZE).min(end);
            let lands = sectors.as_mut().is_none_or(|choose| choose());
            if lands {
                image[at..next].copy_from_slice(&bytes[at - offset..next - offset]);
            } else {
                left_old += (next - at) as u64;
            }
            at = next;
        }
        left_old
    }
}

/// One simulated file.
#[derive(Debug, Default)]
struct File {
    name: String,
    durable: Vec<u8>,
    unsynced: Vec<Unsynced>,
    /// The latest state: `durable` with `unsynced` applied in order (in-flight ones excluded).
    latest: Vec<u8>,
    /// The operation that reached the crash point, if it was a write or an extend of this file.
    in_flight: Option<Unsynced>,
}

#[derive(Debug, Default)]
struct Domain {
    files: Vec<File>,
    /// Mutating operations still allowed before the crash point (None: not armed).
    remaining: Option<u64>,
    crashed: bool,
    max_torn: usize,
    stats: CrashStats,
}

fn crashed_error() -> Error {
    Error::other("crash simulator: the process crashed (simulated power loss)")
}

fn offset_of(offset: u64, len: usize) -> Result<usize> {
    usize::try_from(offset)
        .ok()
        .and_then(|at| at.checked_add(len).map(|_| at))
        .ok_or_else(|| Error::from(ErrorKind::InvalidInput))
}

impl Domain {
    /// Lets a mutating operation through, or crashes the domain (the operation fails).
    fn admit(&mut self) -> Result<()> {
        if self.crashed {
            self.stats.refused += 1;
            return Err(crashed_error());
        }
        if let Some(remaining) = &mut self.remaining {
            if *remaining == 0 {
                self.crash();
                self.stats.refused += 1;
                return Err(crashed_error());
            }
            *remaining -= 1;
        }
        Ok(())
    }

    fn crash(&mut self) {
        if !self.crashed {
            self.crashed = true;
            self.remaining = None;
            self.stats.crashes += 1;
        }
    }

    fn alive(&mut self) -> Result<()> {
        if self.crashed {
            self.stats.refused += 1;
            return Err(crashed_error());
        }
        Ok(())
    }

    /// A write or extend: applied, or (at the crash point) recorded as in flight and failed.
    fn mutate(&mut self, file: usize, op: Unsynced) -> Result<()> {
        let was_crashed = self.crashed;
        if let Err(error) = self.admit() {
            if !was_crashed {
                self.files[file].in_flight = Some(op);
            }
            return Err(error);
        }
        match &op {
            Unsynced::Write { bytes, .. } => {
                self.stats.writes += 1;
                self.stats.bytes_written += bytes.len() as u64;
            }
            Unsynced::Extend { .. } => self.stats.extends += 1,
        }
        let state = &mut self.files[file];
        op.apply(&mut state.latest, None);
        state.unsynced.push(op);
        Ok(())
    }
}

/// One crash domain: storages that crash together at one instant, and the recovery of what a
/// device could hold afterwards: the durable image of each file (as of its last sync) plus a
/// seeded subset of its unsynced writes, in any order, at most [`CrashSimulator::max_torn_writes`]
/// of them torn at [`SECTOR_SIZE`], its unsynced growth kept or lost. The model is spelled out
/// in the documentation of `src/io/crash.rs`. Invariant: no recovered byte was never durable or
/// written, and every synced byte survives unless an unsynced write was issued over it.
///
/// ```
/// use leankv::testing::{CrashSimulator, Recovery, Storage};
/// let sim = CrashSimulator::new();
/// let pages = sim.storage("pages");
/// let log = sim.storage("log");
/// pages.write_at(&[1; 512], 0).unwrap();
/// pages.sync().unwrap();
/// log.write_at(&[2; 512], 0).unwrap(); // never synced
/// sim.crash_after(0);
/// assert!(pages.write_at(&[3; 512], 512).is_err()); // the crash point: both files are dead
/// assert!(log.read_at(&mut [0; 512], 0).is_err());
///
/// for seed in 0..10 {
///     let recovered = sim.recover(seed);
///     assert_eq!(&recovered.image("pages")[..512], &[1; 512][..]); // synced: always there
///     // Unsynced, so maybe lost: empty, or 512 bytes of 2, or (the write lost but the
///     // growth kept) a hole of zeros.
///     let log = recovered.image("log");
///     assert!(log.len() <= 512 && (log.iter().all(|&b| b == 2) || log.iter().all(|&b| b == 0)));
/// }
/// let all = sim.recover_with(Recovery::KeepUnsynced);
/// assert_eq!(all.image("log"), &[2; 512][..]);
/// let page_file = all.storage("pages"); // a MemoryStorage to reopen the database on
/// assert!(page_file.len().unwrap() >= 512);
/// ```
#[derive(Clone)]
pub struct CrashSimulator {
    domain: Arc<Mutex<Domain>>,
}

impl Default for CrashSimulator {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CrashSimulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let domain = self.domain.lock();
        f.debug_struct("CrashSimulator")
            .field(
                "files",
                &domain.files.iter().map(|f| &f.name).collect::<Vec<_>>(),
            )
            .field("crashed", &domain.crashed)
            .field("stats", &domain.stats)
            .finish()
    }
}

impl CrashSimulator {
    /// A domain without files, not armed, at most one torn write per file on recovery.
    pub fn new() -> Self {
        CrashSimulator {
            domain: Arc::new(Mutex::new(Domain {
                max_torn: 1,
                ..Domain::default()
            })),
        }
    }

    /// Sets how many applied unsynced writes per file a seeded recovery may tear (0: none).
    pub fn max_torn_writes(self, writes: usize) -> Self {
        self.domain.lock().max_torn = writes;
        self
    }

    /// The storage of file `name`: created empty on first use, the same file afterwards.
    pub fn storage(&self, name: &str) -> Arc<SimulatedStorage> {
        let mut domain = self.domain.lock();
        let file = match domain.files.iter().position(|f| f.name == name) {
            Some(file) => file,
            None => {
                domain.files.push(File {
                    name: name.to_owned(),
                    ..File::default()
                });
                domain.files.len() - 1
            }
        };
        Arc::new(SimulatedStorage {
            domain: self.domain.clone(),
            file,
        })
    }

    /// Arms the crash point: the next `ops` mutating operations (writes, extends, syncs on any
    /// storage of the domain) succeed, the one after them crashes the domain. Replaces an
    /// earlier arming; does nothing once crashed.
    pub fn crash_after(&self, ops: u64) {
        let mut domain = self.domain.lock();
        if !domain.crashed {
            domain.remaining = Some(ops);
        }
    }

    /// Cancels an armed crash point (not a crash that happened).
    pub fn disarm(&self) {
        self.domain.lock().remaining = None;
    }

    /// Crashes the domain now: every later operation on its storages fails.
    pub fn crash(&self) {
        self.domain.lock().crash();
    }

    /// Whether the domain has crashed.
    pub fn is_crashed(&self) -> bool {
        self.domain.lock().crashed
    }

    /// The counters so far.
    pub fn stats(&self) -> CrashStats {
        self.domain.lock().stats
    }

    /// Names of the files, in the order they were created.
    pub fn file_names(&self) -> Vec<String> {
        self.domain
            .lock()
            .files
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    /// `recover_with(Recovery::Seeded(seed))`.
    pub fn recover(&self, seed: u64) -> Recovered {
        self.recover_with(Recovery::Seeded(seed))
    }

    /// What the devices hold after power loss, chosen as `how` says. Crashes the domain first
    /// if it has not crashed (recovering is a power loss). Can be called any number of times;
    /// the same `how` gives the same images.
    pub fn recover_with(&self, how: Recovery) -> Recovered {
        let mut domain = self.domain.lock();
        domain.crash();
        let mut rng = match how {
            Recovery::Seeded(seed) => Some(fastrand::Rng::with_seed(seed)),
            _ => None,
        };
        let max_torn = domain.max_torn;
        let files: Vec<RecoveredFile> = domain
            .files
            .iter()
            .map(|file| recover_file(file, how, rng.as_mut(), max_torn))
            .collect();
        domain.stats.recoveries += 1;
        for file in &files {
            domain.stats.bytes_dropped += file.report.bytes_dropped;
            domain.stats.bytes_torn += file.report.bytes_torn;
        }
        Recovered {
            files,
            crashes: domain.stats.crashes,
            max_torn,
        }
    }
}

/// One file of a [`CrashSimulator`]'s domain, behind the [`Storage`] seam.
pub struct SimulatedStorage {
    domain: Arc<Mutex<Domain>>,
    file: usize,
}

impl std::fmt::Debug for SimulatedStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedStorage")
            .field("name", &self.name())
            .finish()
    }
}

impl SimulatedStorage {
    /// The file's name in its domain.
    pub fn name(&self) -> String {
        self.domain.lock().files[self.file].name.clone()
    }

    /// Unsynced operations (writes and extends) completed since the last sync.
    pub fn unsynced_ops(&self) -> usize {
        self.domain.lock().files[self.file].unsynced.len()
    }

    /// The durable image: the bytes as of the last completed sync.
    pub fn durable_image(&self) -> Vec<u8> {
        self.domain.lock().files[self.file].durable.clone()
    }
}

impl Storage for SimulatedStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut domain = self.domain.lock();
        domain.alive()?;
        let start = offset_of(offset, buf.len())?;
        let source = domain.files[self.file]
            .latest
            .get(start..start + buf.len())
            .ok_or_else(|| Error::new(ErrorKind::UnexpectedEof, "read past the end"))?;
        buf.copy_from_slice(source);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let offset = offset_of(offset, buf.len())?;
        let op = Unsynced::Write {
            offset,
            bytes: buf.to_vec(),
        };
        self.domain.lock().mutate(self.file, op)
    }

    fn extend_to(&self, len: u64) -> Result<()> {
        let len = offset_of(len, 0)?;
        let mut domain = self.domain.lock();
        if domain.files[self.file].latest.len() >= len {
            // Nothing grows; still a call the engine made, so it may reach the crash point.
            domain.admit()?;
            domain.stats.extends += 1;
            return Ok(());
        }
        domain.mutate(self.file, Unsynced::Extend { len })
    }

    fn sync(&self) -> Result<()> {
        let mut domain = self.domain.lock();
        domain.admit()?;
        domain.stats.syncs += 1;
        let file = &mut domain.files[self.file];
        for op in std::mem::take(&mut file.unsynced) {
            op.apply(&mut file.durable, None);
        }
        debug_assert_eq!(file.durable, file.latest);
        Ok(())
    }

    /// Modelled as durable at once (a real crash may also bring the old bytes back, which the
    /// callers' contract makes harmless, see [`Storage::shrink_to`]); pending operations lose
    /// what lay beyond `len`.
    fn shrink_to(&self, len: u64) -> Result<()> {
        let len = offset_of(len, 0)?;
        let mut domain = self.domain.lock();
        domain.admit()?;
        domain.stats.shrinks += 1;
        let file = &mut domain.files[self.file];
        file.durable.truncate(len);
        file.latest.truncate(len);
        file.unsynced.retain_mut(|op| match op {
            Unsynced::Write { offset, bytes } => {
                bytes.truncate(len.saturating_sub(*offset));
                !bytes.is_empty()
            }
            Unsynced::Extend { len: to } => {
                *to = (*to).min(len);
                true
            }
        });
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let mut domain = self.domain.lock();
        domain.alive()?;
        Ok(domain.files[self.file].latest.len() as u64)
    }

    fn mode(&self) -> IoMode {
        IoMode::Memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_the_latest_state_and_sync_is_per_file() {
        let sim = CrashSimulator::new();
        let (a, b) = (sim.storage("a"), sim.storage("b"));
        a.write_at(&[1; 512], 0).unwrap();
        b.write_at(&[2; 512], 0).unwrap();
        let mut buf = [0; 512];
        a.read_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [1; 512]);
        assert!(a.read_at(&mut buf, 512).is_err(), "past the end");
        a.sync().unwrap();
        assert_eq!(a.durable_image(), vec![1; 512]);
        assert!(b.durable_image().is_empty(), "a's sync made b durable");
        let lost = sim.recover_with(Recovery::LoseUnsynced);
        assert_eq!((lost.image("a").len(), lost.image("b").len()), (512, 0));
    }

    #[test]
    fn the_write_at_the_crash_point_is_in_flight() {
        let sim = CrashSimulator::new().max_torn_writes(0);
        let a = sim.storage("a");
        sim.crash_after(0);
        assert!(a.write_at(&[9; 1024], 0).is_err());
        let kept = sim.recover_with(Recovery::KeepUnsynced);
        assert_eq!(kept.image("a"), &[9; 1024][..]);
        let landed = (0..64).filter(|&s| sim.recover(s).image("a").len() == 1024);
        assert!(landed.count() > 0);
        assert_eq!(
            sim.stats().writes,
            0,
            "a failed write is not a completed one"
        );
    }

    #[test]
    fn extends_grow_with_zeros_and_their_growth_may_be_lost() {
        let sim = CrashSimulator::new();
        let a = sim.storage("a");
        a.write_at(&[1; 512], 0).unwrap();
        a.sync().unwrap();
        a.extend_to(4096).unwrap();
        assert_eq!(a.len().unwrap(), 4096);
        let lens: std::collections::BTreeSet<usize> =
            (0..64).map(|s| sim.recover(s).image("a").len()).collect();
        assert_eq!(lens, [512, 4096].into());
        let kept = sim.recover_with(Recovery::KeepUnsynced);
        assert!(kept.image("a")[512..].iter().all(|&b| b == 0));
    }
}
