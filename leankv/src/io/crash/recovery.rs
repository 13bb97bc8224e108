//! Recovery after a simulated crash: what a device could hold for each file once the power
//! came back (the parent module states the model), as fresh in-memory storages to reopen.
//!
//! Invariant: a recovered image holds, at every offset, the durable byte, a byte an unsynced
//! write put there, or (beyond the durable length) zero; every choice comes from the seed.

use super::*;

/// How to choose what survives a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Every unsynced operation is lost: each file is its durable image.
    LoseUnsynced,
    /// Every unsynced operation is kept, in order and untorn: each file is its latest state.
    KeepUnsynced,
    /// A subset, an order, torn writes and the length, all drawn from this seed.
    Seeded(u64),
}

/// What one recovery did to one file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Unsynced writes applied (torn ones included).
    pub writes_kept: u64,
    /// Unsynced writes dropped.
    pub writes_dropped: u64,
    /// Bytes of the dropped writes.
    pub bytes_dropped: u64,
    /// Writes applied torn.
    pub torn_writes: u64,
    /// Bytes of torn writes left old.
    pub bytes_torn: u64,
    /// The file's length before the crash (latest state).
    pub latest_len: u64,
    /// The file's durable length.
    pub durable_len: u64,
    /// The recovered length.
    pub recovered_len: u64,
}

impl RecoveryReport {
    fn add(&mut self, other: &RecoveryReport) {
        self.writes_kept += other.writes_kept;
        self.writes_dropped += other.writes_dropped;
        self.bytes_dropped += other.bytes_dropped;
        self.torn_writes += other.torn_writes;
        self.bytes_torn += other.bytes_torn;
        self.latest_len += other.latest_len;
        self.durable_len += other.durable_len;
        self.recovered_len += other.recovered_len;
    }
}

pub(super) fn recover_file(
    file: &File,
    how: Recovery,
    rng: Option<&mut fastrand::Rng>,
    max_torn: usize,
) -> RecoveredFile {
    let ops: Vec<&Unsynced> = file.unsynced.iter().chain(&file.in_flight).collect();
    let durable_len = file.durable.len();
    let mut report = RecoveryReport {
        durable_len: durable_len as u64,
        latest_len: file.latest.len() as u64,
        ..RecoveryReport::default()
    };
    let mut image = file.durable.clone();
    // Which operations land (in the order they land), which of them tear, and the length.
    let (kept, torn, len): (Vec<&Unsynced>, Vec<usize>, Option<usize>) = match (how, rng) {
        (Recovery::Seeded(_), Some(rng)) => {
            let mut kept: Vec<&Unsynced> = ops.iter().copied().filter(|_| rng.bool()).collect();
            rng.shuffle(&mut kept);
            let writes = (0..kept.len()).filter(|&i| matches!(kept[i], Unsynced::Write { .. }));
            let count = rng.usize(0..=max_torn.min(writes.clone().count()));
            let torn = rng.choose_multiple(writes, count);
            // The durable length, or the end of a landed operation beyond it.
            let mut lengths: Vec<usize> = kept.iter().map(|op| op.end()).collect();
            lengths.retain(|&end| end > durable_len);
            lengths.push(durable_len);
            let len = lengths[rng.usize(0..lengths.len())];
            let mut image_rng = rng.fork();
            for (i, op) in kept.iter().enumerate() {
                if torn.contains(&i) {
                    report.bytes_torn += op.apply(&mut image, Some(&mut || image_rng.bool()));
                } else {
                    op.apply(&mut image, None);
                }
            }
            (kept, torn, Some(len))
        }
        (Recovery::KeepUnsynced, _) => {
            for op in &ops {
                op.apply(&mut image, None);
            }
            (ops.clone(), Vec::new(), None)
        }
        _ => (Vec::new(), Vec::new(), None),
    };
    if let Some(len) = len {
        image.truncate(len);
    }
    report.torn_writes = torn.len() as u64;
    for op in &ops {
        if let Unsynced::Write { bytes, .. } = op {
            if kept.iter().any(|k| std::ptr::eq(*k, *op)) {
                report.writes_kept += 1;
            } else {
                report.writes_dropped += 1;
                report.bytes_dropped += bytes.len() as u64;
            }
        }
    }
    report.recovered_len = image.len() as u64;
    RecoveredFile {
        name: file.name.clone(),
        image,
        report,
    }
}

/// One file as recovered.
#[derive(Debug, Clone)]
pub struct RecoveredFile {
    /// The file's name in its domain.
    pub name: String,
    /// Its bytes after power loss.
    pub image: Vec<u8>,
    /// What recovery did to it.
    pub report: RecoveryReport,
}

/// What the devices of a domain hold after power loss: one image per file, in the order the
/// files were created.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// The files.
    pub files: Vec<RecoveredFile>,
    pub(super) crashes: u64,
    pub(super) max_torn: usize,
}

impl Recovered {
    fn file(&self, name: &str) -> &RecoveredFile {
        self.files
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no file {name:?} in the crash domain"))
    }

    /// The recovered bytes of file `name`. Panics if the domain has no such file.
    pub fn image(&self, name: &str) -> &[u8] {
        &self.file(name).image
    }

    /// A fresh [`MemoryStorage`] holding the recovered bytes of file `name`.
    pub fn storage(&self, name: &str) -> Arc<MemoryStorage> {
        memory_storage(&self.file(name).image)
    }

    /// Fresh [`MemoryStorage`]s for every file, in creation order.
    pub fn storages(&self) -> Vec<Arc<MemoryStorage>> {
        self.files
            .iter()
            .map(|f| memory_storage(&f.image))
            .collect()
    }

    /// The reports of every file, summed.
    pub fn report(&self) -> RecoveryReport {
        let mut total = RecoveryReport::default();
        for file in &self.files {
            total.add(&file.report);
        }
        total
    }

    /// A new crash domain whose files start with these images, durable: for crashes during
    /// recovery. The crash count carries on; the other counters start at zero.
    pub fn restart(&self) -> CrashSimulator {
        let files = self
            .files
            .iter()
            .map(|f| File {
                name: f.name.clone(),
                durable: f.image.clone(),
                latest: f.image.clone(),
                ..File::default()
            })
            .collect();
        CrashSimulator {
            domain: Arc::new(Mutex::new(Domain {
                files,
                max_torn: self.max_torn,
                stats: CrashStats {
                    crashes: self.crashes,
                    ..CrashStats::default()
                },
                ..Domain::default()
            })),
        }
    }
}

fn memory_storage(image: &[u8]) -> Arc<MemoryStorage> {
    let storage = MemoryStorage::new();
    if !image.is_empty() {
        storage
            .write_at(image, 0)
            .expect("memory storage takes any write");
    }
    Arc::new(storage)
}
