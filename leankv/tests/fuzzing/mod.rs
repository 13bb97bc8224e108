//! Fuzz targets for leankv, shared by cargo-fuzz (`fuzz/fuzz_targets/*.rs` include this module
//! with `#[path]`) and the stable fallback (`leankv/tests/fuzz_fallback.rs`).
//!
//! Each target is a function from arbitrary bytes to `Result<Summary, Finding>`:
//!
//! * [`open_file::run`]: the bytes become a page file (raw, paged with checksums fixed, or a
//!   valid database image with structure-aware edits of its superblock, catalog, free list,
//!   nodes and length); open it and read everything.
//! * [`page::run`]: a valid database with one page replaced by an edited copy (checksum
//!   recomputed); get, scan, insert, remove, update, flush and reopen through it.
//! * [`ops::run`]: operation sequences at the key and value size limits against a `BTreeMap`,
//!   with every page size and the smallest pool; file growth is bounded.
//! * [`log::run`]: a database crashed mid-workload (page file and two write-ahead log files
//!   after power loss) whose log files get raw or checksum-fixed structure-aware edits (and
//!   sometimes its superblock's checkpoint reference); open (recovery), read everything,
//!   sometimes write, reopen or crash again and recover, read again.
//!
//! The rules (issue 14): never hang, never panic, never invent a value. A returned pair must
//! have been written through the API or be an entry of a well-formed node of the file (see
//! [`nodes::parse_node`]); scans return strictly ascending keys inside their range; in `ops`
//! everything equals the model. [`run_guarded`] runs a case on a worker thread under a
//! watchdog, so a hang is reported (and the input kept) instead of stalling the fuzzer.
#![allow(dead_code)]

pub mod image;
pub mod input;
pub mod log;
pub mod nodes;
pub mod open_file;
pub mod ops;
pub mod page;
pub mod read_back;

use nodes::show;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Bound;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

/// The fuzz targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    OpenFile,
    Page,
    Ops,
    Log,
}

impl Target {
    pub const ALL: [Target; 4] = [Target::OpenFile, Target::Page, Target::Ops, Target::Log];

    pub fn name(self) -> &'static str {
        match self {
            Target::OpenFile => "open_file",
            Target::Page => "page",
            Target::Ops => "ops",
            Target::Log => "log",
        }
    }

    pub fn run(self, data: &[u8]) -> CaseResult {
        match self {
            Target::OpenFile => open_file::run(data),
            Target::Page => page::run(data),
            Target::Ops => ops::run(data),
            Target::Log => log::run(data),
        }
    }
}

/// What kind of rule a case broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A pair (or tree name) that was never written and is in no well-formed node of the file.
    Invented,
    /// A pair written to another tree (page target: the tree's own writes are known).
    Foreign,
    /// A scan returned keys out of order, twice, or outside its range.
    Order,
    /// A scan went on past every pair that exists (it would not end).
    EndlessScan,
    /// `ops`: a result differs from the model.
    Mismatch,
    /// `ops`: an error on a healthy database.
    UnexpectedError,
    /// `ops`: the page file grew beyond 3x the live data (+ a few pages).
    Growth,
    /// `ops`: `check_integrity` found problems in a database only the API wrote.
    Integrity,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Invented => "invented",
            Kind::Foreign => "foreign",
            Kind::Order => "order",
            Kind::EndlessScan => "endless-scan",
            Kind::Mismatch => "mismatch",
            Kind::UnexpectedError => "unexpected-error",
            Kind::Growth => "growth",
            Kind::Integrity => "integrity",
        }
    }
}

/// A broken rule, with what the case did.
#[derive(Debug, Clone)]
pub struct Finding {
    pub kind: Kind,
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind.name(), self.detail)
    }
}

pub fn finding(kind: Kind, detail: impl Into<String>) -> Finding {
    Finding {
        kind,
        detail: detail.into(),
    }
}

/// What a case that broke no rule did (for statistics).
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// The database opened.
    pub opened: bool,
    /// API calls made.
    pub calls: u64,
    /// Pairs returned and checked.
    pub pairs: u64,
    /// Errors returned, by variant.
    pub errors: HashMap<String, u64>,
    /// Flags the targets set (e.g. "superblock edited", "page valid").
    pub tags: Vec<&'static str>,
}

impl Summary {
    pub fn error(&mut self, error: &leankv::Error) {
        let debug = format!("{error:?}");
        let variant = debug
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("?")
            .to_string();
        *self.errors.entry(variant).or_default() += 1;
    }

    pub fn tag(&mut self, tag: &'static str) {
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
    }
}

pub type CaseResult = Result<Summary, Finding>;

/// Pairs as a scan returns them.
pub type PairList = Vec<(Vec<u8>, Vec<u8>)>;

/// How a guarded case ended.
#[derive(Debug)]
pub enum Outcome {
    Done(CaseResult),
    /// The case panicked (message and location when the recorder is installed).
    Panicked(String),
    /// The case did not finish within the limit; its thread is abandoned.
    Hung(Duration),
}

/// `LEANKV_FUZZ_VERBOSE` is set: targets print what each case does.
pub fn verbose() -> bool {
    static VERBOSE: OnceLock<bool> = OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("LEANKV_FUZZ_VERBOSE").is_some())
}

/// Watchdog limit per case: `LEANKV_FUZZ_TIMEOUT_S` seconds, default 20.
pub fn case_limit() -> Duration {
    let seconds = std::env::var("LEANKV_FUZZ_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(20.0);
    Duration::from_secs_f64(seconds)
}

fn panic_messages() -> &'static Mutex<HashMap<std::thread::ThreadId, String>> {
    static MESSAGES: OnceLock<Mutex<HashMap<std::thread::ThreadId, String>>> = OnceLock::new();
    MESSAGES.get_or_init(Default::default)
}

/// Panics of the engine's own threads (`leankv-*`: prefetchers, background writer), recorded
/// by the recorder; such a panic kills the thread, which may make the case hang.
fn engine_panics() -> &'static Mutex<Vec<String>> {
    static MESSAGES: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    MESSAGES.get_or_init(Default::default)
}

/// Takes the engine-thread panics recorded so far. (The fallback's targets run in parallel,
/// so one may come from another target's case; replay the input to be sure.)
pub fn take_engine_panics() -> Vec<String> {
    engine_panics()
        .lock()
        .map(|mut list| std::mem::take(&mut *list))
        .unwrap_or_default()
}

/// Replaces the panic hook with one that records each thread's panic (message and location)
/// for [`run_guarded`] instead of printing it (`LEANKV_FUZZ_VERBOSE=1` prints too).
pub fn install_panic_recorder() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        let verbose = std::env::var_os("LEANKV_FUZZ_VERBOSE").is_some();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.to_string().replace('\n', " ");
            let thread = std::thread::current();
            if thread
                .name()
                .is_some_and(|name| name.starts_with("leankv-"))
            {
                if let Ok(mut list) = engine_panics().lock() {
                    list.push(format!("thread {:?} {text}", thread.name().unwrap()));
                }
            } else if let Ok(mut messages) = panic_messages().lock() {
                messages.insert(thread.id(), text);
            }
            if verbose {
                previous(info);
            }
        }));
    });
}

/// Runs `target` on `data` on a worker thread and waits at most `limit`.
pub fn run_guarded(target: Target, data: &[u8], limit: Duration) -> Outcome {
    let data = data.to_vec();
    let (sender, receiver) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name()))
        .spawn(move || {
            let result = target.run(&data);
            let _ = sender.send(result);
        })
        .expect("spawn a fuzz worker");
    match receiver.recv_timeout(limit) {
        Ok(result) => {
            let _ = worker.join();
            Outcome::Done(result)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let id = worker.thread().id();
            let payload = worker.join().err();
            let recorded = panic_messages().lock().ok().and_then(|mut m| m.remove(&id));
            let message = recorded.unwrap_or_else(|| match payload {
                Some(payload) => payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "(non-string panic payload)".into()),
                None => "(worker ended without a result)".into(),
            });
            Outcome::Panicked(message)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Outcome::Hung(limit),
    }
}

/// Whether to let `finding` pass (count it, but neither fail nor stop), so a long run can get
/// past known bugs: `LEANKV_FUZZ_IGNORE` names kinds (comma separated, e.g.
/// `order,endless-scan`), `LEANKV_FUZZ_IGNORE_TEXT` gives texts (separated by `|`) of which
/// any in the finding's message suffices, e.g. `outside the heap|superblock records`.
pub fn ignored(finding: &Finding) -> bool {
    let kinds = std::env::var("LEANKV_FUZZ_IGNORE")
        .map(|list| {
            list.split(',')
                .any(|name| name.trim() == finding.kind.name())
        })
        .unwrap_or(false);
    let texts = std::env::var("LEANKV_FUZZ_IGNORE_TEXT")
        .map(|list| {
            list.split('|')
                .any(|text| !text.is_empty() && finding.detail.contains(text))
        })
        .unwrap_or(false);
    kinds || texts
}

/// The libFuzzer entry point: a finding panics (libFuzzer saves the input as a crash), a hang
/// aborts after the watchdog limit with the same effect.
pub fn fuzz_one(target: Target, data: &[u8]) {
    match run_guarded(target, data, case_limit()) {
        Outcome::Done(Ok(_)) => {}
        Outcome::Done(Err(finding)) => {
            if !ignored(&finding) {
                panic!("leankv {} finding {finding}", target.name());
            }
        }
        Outcome::Panicked(message) => panic!("leankv {} panicked: {message}", target.name()),
        Outcome::Hung(limit) => {
            eprintln!(
                "leankv {} HANG: the case did not finish within {limit:?}",
                target.name()
            );
            std::process::abort();
        }
    }
}

/// Pairs that may legitimately be returned: key -> values.
#[derive(Default, Clone)]
pub struct Pairs {
    map: HashMap<Vec<u8>, HashSet<Vec<u8>>>,
    count: usize,
}

impl Pairs {
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        if self
            .map
            .entry(key.to_vec())
            .or_default()
            .insert(value.to_vec())
        {
            self.count += 1;
        }
    }

    pub fn contains(&self, key: &[u8], value: &[u8]) -> bool {
        self.map
            .get(key)
            .is_some_and(|values| values.contains(value))
    }

    pub fn has_key(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// The values `key` may have.
    pub fn values(&self, key: &[u8]) -> Vec<Vec<u8>> {
        self.map
            .get(key)
            .map_or_else(Vec::new, |values| values.iter().cloned().collect())
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.map.keys()
    }

    /// Adds the pairs of every page of `file` that [`nodes::parse_node`] accepts as a leaf.
    /// Returns how many leaves that was.
    pub fn add_wellformed_leaves(&mut self, file: &[u8], page_size: usize) -> usize {
        let mut leaves = 0;
        for (id, page) in file.chunks_exact(page_size).enumerate().skip(1) {
            if page[nodes::TYPE] != nodes::TYPE_LEAF {
                continue;
            }
            if let Ok(node) = nodes::parse_node(page, id as u64) {
                leaves += 1;
                for (key, value) in &node.entries {
                    self.add(key, value);
                }
            }
        }
        leaves
    }
}

/// A base set shared between cases plus what this case adds.
#[derive(Clone)]
pub struct Allowed {
    pub base: Arc<Pairs>,
    pub extra: Pairs,
}

impl Allowed {
    pub fn new(base: Arc<Pairs>) -> Self {
        Allowed {
            base,
            extra: Pairs::default(),
        }
    }

    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        if !self.base.contains(key, value) {
            self.extra.add(key, value);
        }
    }

    pub fn contains(&self, key: &[u8], value: &[u8]) -> bool {
        self.base.contains(key, value) || self.extra.contains(key, value)
    }

    pub fn has_key(&self, key: &[u8]) -> bool {
        self.base.has_key(key) || self.extra.has_key(key)
    }

    pub fn len(&self) -> usize {
        self.base.len() + self.extra.len()
    }
}

/// The oracle for returned pairs: what any tree may return, what this tree may return, and
/// what the case did (for reports).
pub struct Oracle {
    pub global: Allowed,
    /// When known: pairs of the tree being read (a pair in `global` but not here is foreign).
    pub tree: Option<Allowed>,
    pub context: String,
}

impl Oracle {
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        self.global.add(key, value);
        if let Some(tree) = &mut self.tree {
            tree.add(key, value);
        }
    }

    pub fn check_pair(&self, what: &str, key: &[u8], value: &[u8]) -> Result<(), Finding> {
        let in_tree = self.tree.as_ref().is_none_or(|t| t.contains(key, value));
        if in_tree && self.global.contains(key, value) {
            return Ok(());
        }
        let kind = if self.global.contains(key, value) {
            Kind::Foreign
        } else {
            Kind::Invented
        };
        let known_key = if self.global.has_key(key) {
            "key known, value never written"
        } else {
            "key never written"
        };
        Err(finding(
            kind,
            format!(
                "{what} returned ({}, {}) [{known_key}]; {}",
                show(key, 48),
                show(value, 48),
                self.context
            ),
        ))
    }

    /// Most pairs a full scan can legitimately return.
    pub fn scan_limit(&self) -> usize {
        self.tree.as_ref().unwrap_or(&self.global).len() + self.global.len() + 64
    }

    /// Reads a scan to its end (or first error) and checks each pair: allowed, strictly
    /// ascending, inside `[start, end]`, and no more pairs than exist. Returns the pairs.
    pub fn check_scan<I>(
        &self,
        what: &str,
        items: I,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        summary: &mut Summary,
    ) -> Result<PairList, Finding>
    where
        I: Iterator<Item = leankv::Result<(Vec<u8>, Vec<u8>)>>,
    {
        let limit = self.scan_limit();
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for item in items {
            let (key, value) = match item {
                Ok(pair) => pair,
                Err(error) => {
                    summary.error(&error);
                    break;
                }
            };
            summary.pairs += 1;
            self.check_pair(what, &key, &value)?;
            if let Some((previous, _)) = pairs.last() {
                if previous >= &key {
                    return Err(finding(
                        Kind::Order,
                        format!(
                            "{what}: key {} after {} (pair {}); {}",
                            show(&key, 48),
                            show(previous, 48),
                            pairs.len(),
                            self.context
                        ),
                    ));
                }
            }
            if !in_bounds(&key, start, end) {
                return Err(finding(
                    Kind::Order,
                    format!(
                        "{what}: key {} outside the range; {}",
                        show(&key, 48),
                        self.context
                    ),
                ));
            }
            pairs.push((key, value));
            if pairs.len() > limit {
                return Err(finding(
                    Kind::EndlessScan,
                    format!(
                        "{what}: more than {limit} pairs, only {} exist; {}",
                        self.global.len(),
                        self.context
                    ),
                ));
            }
        }
        Ok(pairs)
    }
}

pub fn in_bounds(key: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let above = match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    };
    let below = match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    };
    above && below
}

/// FNV-1a: a stable hash for seeding input streams and naming images in reports.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A fresh directory for the lock file.
pub fn lock_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("leankv-fuzz")
        .tempdir()
        .expect("temporary directory")
}
