//! The crashed databases the cases edit, built once per process: a deterministic workload on a
//! crash simulator, crashed mid-way and recovered with a seed, then described (what the files
//! claim, the ids and LSNs worth pointing edits at) and checked to recover unedited.

use super::check::log_pairs;
use super::format::{
    decode, frame_bytes, index_frames, KIND_GROUP, KIND_PACKED_GROUP, SB_CHECKPOINT_FILE,
    SB_CHECKPOINT_LSN, SB_CHECKPOINT_OFFSET,
};
use super::storage::Bounded;
use super::{options, FASTRAND_SEED, FILES, PAGE_SIZE};
use crate::fuzzing::input::Rng;
use crate::fuzzing::nodes::{self, get_u64};
use crate::fuzzing::{fnv, lock_dir, verbose, Pairs};
use leankv::testing::{CrashSimulator, Recovered, Storage};
use leankv::{Db, Durability, WriteBatch};
use std::sync::{Arc, OnceLock};

/// One crashed database: a page file and two log files as recovered after power loss.
pub struct LogImage {
    pub name: &'static str,
    pub pages: Vec<u8>,
    pub logs: [Vec<u8>; 2],
    /// Every pair the workload wrote, the tree names, and every pair the files claim.
    pub all: Arc<Pairs>,
    /// The workload's keys (for lookups).
    pub keys: Vec<Vec<u8>>,
    /// Page ids worth pointing at: those the log names, the catalog root, the page count.
    pub page_ids: Vec<u64>,
    pub page_count: u64,
    /// Batch ids the log names.
    pub batches: Vec<u64>,
    /// LSNs and generations of the valid frames.
    pub lsns: Vec<u64>,
    pub generations: Vec<u32>,
    /// Frames that are groups (a batch's staged records).
    pub groups: usize,
}

/// A phase of the workload: `steps` commits from `seed`, crashed after `crash_at` of the
/// mutating I/O operations the phase makes uncrashed, devices recovered with `recover_seed`.
struct Phase {
    seed: u64,
    steps: usize,
    crash_at: f64,
    recover_seed: u64,
}

fn key_t(n: u64) -> Vec<u8> {
    format!("t{n:04}").into_bytes()
}

fn key_u(n: u64) -> Vec<u8> {
    format!("u{n:03}").into_bytes()
}

/// A value naming its write: phase, step and change, then filler.
fn workload_value(rng: &mut Rng, phase: u64, step: usize, change: usize) -> Vec<u8> {
    let len = if rng.below(8) == 0 {
        500 + rng.below(400)
    } else {
        rng.below(260)
    } as usize;
    let mut value = format!("v{phase}.{step}.{change}:").into_bytes();
    let fill = b'a' + ((step * 7 + change) % 26) as u8;
    value.resize(value.len().max(len), fill);
    value
}

/// Runs the phase's commits until the first error (the crash). Every pair it tries to write
/// is recorded.
fn run_phase(db: &Db, phase: &Phase, written: &mut Pairs) {
    let mut rng = Rng(phase.seed);
    let Ok(t) = db.open_tree("t") else { return };
    let mut u = if phase.seed.is_multiple_of(2) {
        db.open_tree("u").ok()
    } else {
        None
    };
    for step in 0..phase.steps {
        if step == phase.steps / 4 && u.is_none() {
            // A tree created on the way: its root image and its catalog entry are logged.
            match db.open_tree("u") {
                Ok(tree) => u = Some(tree),
                Err(_) => return,
            }
        }
        if step % 70 == 69 && db.flush().is_err() {
            return;
        }
        let durability = match rng.below(4) {
            0 | 1 => Durability::Immediate,
            2 => Durability::Eventual,
            _ => Durability::None,
        };
        let result = match rng.below(10) {
            0..=2 => {
                let key = key_t(rng.below(400));
                let value = workload_value(&mut rng, phase.seed, step, 0);
                written.add(&key, &value);
                let mut batch = WriteBatch::new();
                batch.insert(&t, &key, &value);
                db.write_with(batch, durability)
            }
            3 => {
                let key = key_t(rng.below(400));
                let value = workload_value(&mut rng, phase.seed, step, 0);
                written.add(&key, &value);
                t.insert(&key, &value)
            }
            4 => {
                let mut batch = WriteBatch::new();
                batch.remove(&t, key_t(rng.below(400)));
                db.write_with(batch, durability)
            }
            5 => t.remove(key_t(rng.below(400))).map(|_| ()),
            _ => {
                let mut batch = WriteBatch::new();
                for change in 0..2 + rng.below(5) as usize {
                    let (tree, key) = match &u {
                        Some(u) if rng.below(3) == 0 => (u, key_u(rng.below(120))),
                        _ => (&t, key_t(rng.below(400))),
                    };
                    if rng.below(5) == 0 {
                        batch.remove(tree, &key);
                    } else {
                        let value = workload_value(&mut rng, phase.seed, step, change);
                        written.add(&key, &value);
                        batch.insert(tree, &key, &value);
                    }
                }
                db.write_with(batch, durability)
            }
        };
        if result.is_err() {
            return;
        }
    }
}

fn open_domain(dir: &std::path::Path, sim: &CrashSimulator) -> leankv::Result<Db> {
    let [pages, wal0, wal1] = FILES.map(|name| sim.storage(name) as Arc<dyn Storage>);
    Db::open_with_files(dir, options(), pages, [wal0, wal1])
}

fn mutating_ops(sim: &CrashSimulator) -> u64 {
    let stats = sim.stats();
    stats.writes + stats.extends + stats.syncs
}

fn build(name: &'static str, phases: &[Phase]) -> LogImage {
    let dir = lock_dir();
    let mut written = Pairs::default();
    let mut recovered: Option<Recovered> = None;
    for phase in phases {
        let start = || match &recovered {
            None => CrashSimulator::new(),
            Some(recovered) => recovered.restart(),
        };
        // A dry run counts the phase's mutating operations.
        let total = {
            let sim = start();
            fastrand::seed(FASTRAND_SEED);
            let db = open_domain(dir.path(), &sim)
                .unwrap_or_else(|e| panic!("log image {name}: open for the dry run: {e}"));
            let before = mutating_ops(&sim);
            run_phase(&db, phase, &mut Pairs::default());
            let total = mutating_ops(&sim) - before;
            sim.crash();
            drop(db);
            total
        };
        let sim = start();
        fastrand::seed(FASTRAND_SEED);
        let db = open_domain(dir.path(), &sim)
            .unwrap_or_else(|e| panic!("log image {name}: open for the workload: {e}"));
        sim.crash_after((total as f64 * phase.crash_at) as u64);
        run_phase(&db, phase, &mut written);
        sim.crash();
        drop(db);
        recovered = Some(sim.recover(phase.recover_seed));
    }
    let recovered = recovered.expect("at least one phase");
    let pages = recovered.image(FILES[0]).to_vec();
    let logs = [
        recovered.image(FILES[1]).to_vec(),
        recovered.image(FILES[2]).to_vec(),
    ];
    describe(name, pages, logs, written)
}

fn describe(name: &'static str, pages: Vec<u8>, logs: [Vec<u8>; 2], written: Pairs) -> LogImage {
    let mut all = written;
    for tree in ["t", "u"] {
        all.add(tree.as_bytes(), b"(tree)");
    }
    let keys: Vec<Vec<u8>> = {
        let mut keys: Vec<Vec<u8>> = all.keys().cloned().collect();
        keys.sort();
        keys
    };
    all.add_wellformed_leaves(&pages, PAGE_SIZE);
    let residue = get_u64(&pages, SB_CHECKPOINT_OFFSET) as usize;
    let known = all.clone();
    log_pairs(
        &logs,
        residue,
        |key| known.values(key),
        |key, value| all.add(key, value),
    );
    let page_count = get_u64(&pages, nodes::SB_PAGE_COUNT);
    let mut page_ids = vec![
        get_u64(&pages, nodes::SB_CATALOG_ROOT),
        page_count.saturating_sub(1),
        page_count,
    ];
    let (mut batches, mut lsns, mut generations) = (Vec::new(), Vec::new(), Vec::new());
    let (mut frames, mut groups) = (0, 0);
    for file in &logs {
        for frame in index_frames(file, 0) {
            frames += 1;
            groups += usize::from(matches!(frame.kind, KIND_GROUP | KIND_PACKED_GROUP));
            let decoded = decode(frame.kind, frame_bytes(file, &frame));
            page_ids.extend(decoded.page_ids.iter().filter(|&&id| id < 1 << 20));
            batches.extend(decoded.batch);
            lsns.push(frame.lsn);
            generations.push(frame.generation);
        }
    }
    for list in [&mut page_ids, &mut batches, &mut lsns] {
        list.sort_unstable();
        list.dedup();
    }
    generations.sort_unstable();
    generations.dedup();
    // The unedited image must recover, and the oracle must pass it.
    let storages = [&pages, &logs[0], &logs[1]].map(|bytes| Bounded::memory(bytes));
    let dir = lock_dir();
    fastrand::seed(FASTRAND_SEED);
    let [p, l0, l1] = storages.map(|s| s as Arc<dyn Storage>);
    let db = Db::open_with_files(dir.path(), options(), p, [l0, l1])
        .unwrap_or_else(|e| panic!("log image {name}: the unedited image does not recover: {e}"));
    let recovery = db.stats().recovery;
    // Structured edits need the frames: a harness whose frame format fell behind the engine's
    // finds none and quietly edits raw bytes only.
    assert!(
        frames >= recovery.records,
        "log image {name}: recovery read {} records, the harness finds {frames} frames: its \
         frame format (format.rs) is not the engine's",
        recovery.records
    );
    let mut trees = Vec::new();
    for tree_name in db.tree_names().expect("tree names") {
        let tree = db.open_tree(&tree_name).expect("open tree");
        let mut count = 0;
        for item in tree.iter() {
            let (key, value) = item.expect("scan of the unedited image");
            assert!(
                all.contains(&key, &value),
                "log image {name}: unedited recovery returned ({}, {})",
                nodes::show(&key, 40),
                nodes::show(&value, 40)
            );
            count += 1;
        }
        trees.push(format!("{tree_name}: {count}"));
    }
    let report = db.check_integrity().expect("integrity check");
    assert!(report.is_ok(), "log image {name}: {report}");
    drop(db);
    if verbose() {
        eprintln!(
            "log image {name}: pages {} B, logs {} + {} B, {frames} frames ({groups} groups), \
             generations {generations:?}, superblock checkpoint file {} offset {} lsn {}; \
             recovery: {} records, {} pages, {} batches rolled back; trees {trees:?}; fnv \
             {:016x}",
            pages.len(),
            logs[0].len(),
            logs[1].len(),
            pages[SB_CHECKPOINT_FILE],
            get_u64(&pages, SB_CHECKPOINT_OFFSET),
            get_u64(&pages, SB_CHECKPOINT_LSN),
            recovery.records,
            recovery.pages,
            recovery.batches_rolled_back,
            fnv(&[&pages[..], &logs[0], &logs[1]].concat()),
        );
    }
    LogImage {
        name,
        pages,
        logs,
        all: Arc::new(all),
        keys,
        page_ids,
        page_count,
        batches,
        lsns,
        generations,
        groups,
    }
}

/// The crashed databases: crashed early, crashed late, and crashed, recovered, run on and
/// crashed again (frames of two generations).
pub fn log_images() -> &'static [LogImage] {
    static IMAGES: OnceLock<Vec<LogImage>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let images = vec![
            // Crash points and recovery seeds: chosen when a batch's records were frames of
            // their own, so that recoveries rolled back batches torn before their commit; a
            // batch's records now reach the log as one group that carries its commit, and the
            // edits that damage or drop a group drop its batch whole.
            build(
                "early",
                &[Phase {
                    seed: 3,
                    steps: 220,
                    crash_at: 13.0 / 40.0,
                    recover_seed: 116,
                }],
            ),
            build(
                "late",
                &[Phase {
                    seed: 2,
                    steps: 220,
                    crash_at: 32.0 / 40.0,
                    recover_seed: 134,
                }],
            ),
            build(
                "twice",
                &[
                    Phase {
                        seed: 4,
                        steps: 220,
                        crash_at: 30.0 / 40.0,
                        recover_seed: 134,
                    },
                    Phase {
                        seed: 6,
                        steps: 120,
                        crash_at: 0.7,
                        recover_seed: 106,
                    },
                ],
            ),
        ];
        assert!(
            images.iter().any(|image| image.groups > 0),
            "no log image holds a group: the edits would never meet one"
        );
        // The case's own eviction choices start from the same state whether or not it built.
        fastrand::seed(FASTRAND_SEED);
        images
    })
}
