//! Crash recovery through the crash simulator: the page file and both log files of a database
//! crash together at a random operation; recovery drops unsynced writes, reorders them and
//! tears one per file at sector granularity; the database reopens (sometimes crashing again
//! during recovery, then recovering from that) and must hold exactly the state after some
//! prefix of the commit order:
//!
//! * no shorter than the last commit acknowledged under `Durability::Immediate`;
//! * so no batch, transaction, range removal or dropped tree is partly present (nor any part
//!   of a transaction that failed and was undone) and no value appears that was never
//!   written;
//! * and `check_integrity` finds nothing wrong (large values' pages included: none torn,
//!   none leaked).
//!
//! A third of the random workload's commits append runs of keys in order inside the tree, so
//! that leaves also split where such runs arrive.
//!
//! `LEANKV_CRASHES` sets the number of crash scenarios (default 120 in CI; the closing notes'
//! long run used 10,000).

use leankv::testing::{CrashSimulator, Storage};
use leankv::{Db, Durability, Options, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const FILES: [&str; 3] = ["pages", "wal-0", "wal-1"];

fn options() -> Options {
    Options::default()
        .page_size(4096)
        .pool_size(24 * (4096 + 512))
        .checkpoint_every(1 << 20)
}

/// One change of a commit: put (`Some`) or remove (`None`).
type Change = (Vec<u8>, Option<Vec<u8>>);

/// One commit: a batch of changes (or a transaction's), the removal of the keys from one key up to another, or
/// dropping the tree (which the next commit creates again, empty).
enum Commit {
    Batch(Vec<Change>),
    RemoveRange(Vec<u8>, Vec<u8>),
    DropTree,
}

fn open(dir: &Path, files: [Arc<dyn Storage>; 3]) -> leankv::Result<Db> {
    let [pages, wal0, wal1] = files;
    Db::open_with_files(dir, options(), pages, [wal0, wal1])
}

/// `LEANKV_CRASHES`, or `default` crash scenarios.
fn scenarios(default: u64) -> u64 {
    std::env::var("LEANKV_CRASHES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A new database on the storages of a new crash simulator.
fn open_simulated(dir: &Path) -> (CrashSimulator, Db) {
    let sim = CrashSimulator::new();
    let files = FILES.map(|name| sim.storage(name) as Arc<dyn Storage>);
    let db = open(dir, files).unwrap();
    (sim, db)
}

/// Opens the database as the crash of `sim` left it (recovering it).
fn recover_and_open(sim: &CrashSimulator, dir: &Path, seed: u64) -> Db {
    let recovered = sim.recover(seed);
    let files = FILES.map(|name| recovered.storage(name) as Arc<dyn Storage>);
    open(dir, files).unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"))
}

/// Crashes `sim` under the open database, recovers and reopens it; returns it, its tree "t"
/// and what that holds.
fn crash_and_read_back(
    sim: &CrashSimulator,
    db: Db,
    tree: leankv::Tree,
    dir: &Path,
    seed: u64,
) -> (Db, leankv::Tree, BTreeMap<String, Vec<u8>>) {
    sim.crash();
    drop(tree);
    drop(db);
    let db = recover_and_open(sim, dir, seed);
    let tree = db.open_tree("t").unwrap();
    let stored = crate::common::text_contents(&tree);
    (db, tree, stored)
}

fn key(rng: &mut fastrand::Rng) -> Vec<u8> {
    format!("key{:04}", rng.u32(0..2000)).into_bytes()
}

/// Points inside the tree where keys arrive in order (`appended_key`), so that leaves split
/// where they arrive (`btree/split.rs`), as at TPC-C's districts.
const APPEND_POINTS: usize = 4;

/// The `n`th key appended at point `point`: between `key0500` and `key0501` for point 1.
fn appended_key(point: usize, n: u32) -> Vec<u8> {
    format!("key{:04}+{n:06}", point * 500).into_bytes()
}

/// A value naming its commit. Half of them have a length and filler fixed by the key, so
/// that rewrites of a key in place (logged as patches of the bytes that changed) are common;
/// one in eight is a large value (longer than a leaf holds: up to five pages of its own).
fn value(rng: &mut fastrand::Rng, key: &[u8], commit: usize) -> Vec<u8> {
    let mut value = format!("v{commit}-").into_bytes();
    if rng.u8(0..8) == 0 {
        let len = rng.usize(1025..20_000);
        value.extend((0..len).map(|i| (commit.wrapping_mul(7) + i / 3) as u8));
    } else if rng.bool() {
        let seed = key.iter().fold(0usize, |h, &b| h * 31 + usize::from(b));
        value.resize(40 + seed % 300, b'a' + (seed % 26) as u8);
    } else {
        value.resize(value.len() + rng.usize(0..600), b'x' + (commit % 3) as u8);
    }
    value
}

/// Runs a random workload until the armed crash of `sim` (or its end); returns the commits
/// attempted in order and how many of them at least must survive (up to the last acknowledged
/// `Immediate` one).
fn workload(rng: &mut fastrand::Rng, db: &Db, sim: &CrashSimulator) -> (Vec<Commit>, usize) {
    let mut tree = db.open_tree("t").unwrap();
    let mut commits = Vec::new();
    let mut must_survive = 0;
    // What the tree holds once every commit so far is applied.
    let mut current = BTreeMap::new();
    let mut appended = [0u32; APPEND_POINTS];
    for commit in 0..rng.usize(50..800) {
        if rng.u16(0..150) == 0 {
            commits.push(Commit::DropTree);
            match db.drop_tree("t").and_then(|_| db.open_tree("t")) {
                Ok(new) => tree = new,
                Err(_) => break, // the crash
            }
            current.clear();
            continue;
        }
        if rng.u8(0..30) == 0 {
            // Up to a fifth of the keys, committed as the database's default (`Eventual`).
            let first = rng.u32(0..2000);
            let start = format!("key{first:04}").into_bytes();
            let end = format!("key{:04}", first + rng.u32(1..400)).into_bytes();
            commits.push(Commit::RemoveRange(start.clone(), end.clone()));
            if tree.remove_range(start.clone()..end.clone()).is_err() {
                break; // the crash
            }
            current.retain(|key, _| !(&start..&end).contains(&key));
            continue;
        }
        let size = if rng.u8(0..3) == 0 {
            rng.usize(2..6)
        } else {
            1
        };
        // A third of the commits append keys in order at one of the append points, a run
        // of them with short values (room for many in a leaf: the small pool lets a leaf go,
        // and its hint with it, between commits).
        let point = (rng.u8(0..3) == 0).then(|| rng.usize(0..APPEND_POINTS));
        let size = if point.is_some() {
            rng.usize(4..24)
        } else {
            size
        };
        let changes: Vec<Change> = (0..size)
            .map(|_| match point {
                Some(point) => {
                    appended[point] += 1;
                    let key = appended_key(point, appended[point]);
                    (key, Some(format!("v{commit}").into_bytes()))
                }
                None => {
                    let key = key(rng);
                    let value = (rng.u8(0..4) != 0).then(|| value(rng, &key, commit));
                    (key, value)
                }
            })
            .collect();
        let durability = match rng.u8(0..3) {
            0 => Durability::Immediate,
            1 => Durability::Eventual,
            _ => Durability::None,
        };
        let result = if rng.u8(0..3) == 0 {
            let changes_of_failed = changes.clone();
            match transaction(rng, db, &tree, &current, changes, commit, durability) {
                Some((changes, result)) => {
                    commits.push(Commit::Batch(changes));
                    result
                }
                None => {
                    // Failed on purpose: undone at once (unless the crash came first).
                    for (key, _) in &changes_of_failed {
                        let now = tree.get(key);
                        if sim.is_crashed() {
                            break;
                        }
                        let key_text = String::from_utf8_lossy(key);
                        let undone = now.ok().flatten().as_ref() == current.get(key);
                        assert!(undone, "{key_text} not undone by the failed transaction");
                    }
                    continue;
                }
            }
        } else {
            let mut batch = WriteBatch::new();
            for (key, value) in &changes {
                match value {
                    Some(value) => batch.insert(&tree, key, value),
                    None => batch.remove(&tree, key),
                }
            }
            commits.push(Commit::Batch(changes));
            db.write_with(batch, durability)
        };
        match result {
            Ok(()) if durability == Durability::Immediate => must_survive = commits.len(),
            Ok(()) => {}
            Err(_) => break, // the crash: this commit may or may not have reached the log
        }
        if let Some(Commit::Batch(changes)) = commits.last() {
            apply(&mut current, changes);
        }
    }
    (commits, must_survive)
}

/// Applies `changes` to `model`.
fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, changes: &[Change]) {
    for (key, value) in changes {
        match value {
            Some(value) => model.insert(key.clone(), value.clone()),
            None => model.remove(key),
        };
    }
}

/// Commits `changes` as a transaction, in which some of the puts of keys whose current inline
/// value is short enough become rewrites in place of the same length; one in five transactions
/// fails after its changes and is undone. Returns the changes as committed (the rewrites as
/// puts of their result) and the commit's outcome, or `None` for a transaction failed on
/// purpose (and undone).
fn transaction(
    rng: &mut fastrand::Rng,
    db: &Db,
    tree: &leankv::Tree,
    current: &BTreeMap<Vec<u8>, Vec<u8>>,
    changes: Vec<Change>,
    commit: usize,
    durability: Durability,
) -> Option<(Vec<Change>, leankv::Result<()>)> {
    enum Step {
        Put(Vec<u8>),
        Remove,
        Rewrite(Vec<u8>),
    }
    // The transaction's view of the keys it changed, for the lengths of rewrites.
    let mut view: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut committed = Vec::new();
    for (key, value) in changes {
        let now = match view.get(&key) {
            Some(now) => now.clone(),
            None => current.get(&key).cloned(),
        };
        let step = match (value, now) {
            (Some(_), Some(now)) if now.len() <= 1000 && rng.bool() => {
                let stamp = format!("r{commit}-");
                Step::Rewrite(stamp.bytes().cycle().take(now.len()).collect())
            }
            (Some(value), _) => Step::Put(value),
            (None, _) => Step::Remove,
        };
        let result = match &step {
            Step::Put(value) | Step::Rewrite(value) => Some(value.clone()),
            Step::Remove => None,
        };
        view.insert(key.clone(), result.clone());
        committed.push((key.clone(), result));
        steps.push((key, step));
    }
    let fail = rng.u8(0..5) == 0;
    let outcome = db.transaction_with(durability, |txn| {
        for (key, step) in &steps {
            match step {
                Step::Put(value) => txn.insert(tree, key, value)?,
                Step::Remove => _ = txn.remove(tree, key)?,
                Step::Rewrite(value) => {
                    let rewritten = txn.update_in_place(tree, key, |bytes| {
                        bytes.copy_from_slice(value);
                    })?;
                    assert!(rewritten.is_some(), "a rewritten key is present");
                }
            }
        }
        if fail {
            return Err(Failed::OnPurpose);
        }
        Ok(())
    });
    match outcome {
        Err(Failed::OnPurpose) => None,
        Err(Failed::Db(error)) => Some((committed, Err(error))),
        Ok(()) => Some((committed, Ok(()))),
    }
}

/// Why a transaction of the workload failed.
enum Failed {
    OnPurpose,
    Db(leankv::Error),
}

impl From<leankv::Error> for Failed {
    fn from(error: leankv::Error) -> Self {
        Failed::Db(error)
    }
}

/// The prefix of `commits` whose state the database holds, if any at least `must_survive`
/// long.
fn matching_prefix(db: &Db, commits: &[Commit], must_survive: usize) -> Option<usize> {
    let tree = db.open_tree("t").unwrap();
    let stored: BTreeMap<Vec<u8>, Vec<u8>> = tree.iter().map(Result::unwrap).collect();
    let mut model = BTreeMap::new();
    let mut matched = None;
    for prefix in 0..=commits.len() {
        match prefix.checked_sub(1).map(|last| &commits[last]) {
            Some(Commit::Batch(changes)) => apply(&mut model, changes),
            Some(Commit::RemoveRange(start, end)) => {
                model.retain(|key: &Vec<u8>, _| !(start..end).contains(&key));
            }
            Some(Commit::DropTree) => model.clear(),
            None => {}
        }
        if prefix >= must_survive && model == stored {
            matched = Some(prefix);
        }
    }
    matched
}

#[test]
fn every_crash_recovers_a_prefix_of_the_commits_with_every_immediate_one() {
    let scenarios = scenarios(120);
    let (mut crashes, mut torn, mut rolled_back, mut recovered_pages) = (0u64, 0u64, 0u64, 0u64);
    let mut pages_written_early = 0u64;
    let mut removals_finished = 0;
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let (sim, db) = open_simulated(dir.path());
        sim.crash_after(rng.u64(5..1500));
        let (commits, must_survive) = workload(&mut rng, &db, &sim);
        sim.crash();
        drop(db);
        crashes += 1;
        let mut recovered = sim.recover(seed);
        torn += recovered.report().torn_writes;
        // Sometimes the recovery itself crashes; then recover from that crash.
        if rng.u8(0..3) == 0 {
            let again = recovered.restart();
            again.crash_after(rng.u64(0..40));
            let files = FILES.map(|name| again.storage(name) as Arc<dyn Storage>);
            if let Ok(db) = open(dir.path(), files) {
                let tree = db.open_tree("t");
                drop(tree);
                again.crash();
                drop(db);
            }
            again.crash();
            crashes += 1;
            recovered = again.recover(seed + 1);
        }
        let files = FILES.map(|name| recovered.storage(name) as Arc<dyn Storage>);
        let db = open(dir.path(), files.clone())
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        let stats = db.stats().recovery;
        rolled_back += stats.batches_rolled_back;
        removals_finished += stats.range_removals_finished;
        recovered_pages += stats.pages;
        pages_written_early += stats.pages_written_early;
        let prefix = matching_prefix(&db, &commits, must_survive);
        assert!(
            prefix.is_some(),
            "seed {seed}: the recovered state is no prefix of the {} commits with the first {must_survive}",
            commits.len()
        );
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        check_key_count(&db, seed);
        db.close().unwrap();
        // Reopened after a clean close, without a log to replay: the count survives too.
        check_key_count(&open(dir.path(), files).unwrap(), seed);
    }
    eprintln!(
        "{scenarios} scenarios, {crashes} crashes, {torn} torn writes, {rolled_back} batches rolled back, {removals_finished} range removals finished, {recovered_pages} pages rebuilt from the log ({pages_written_early} written early to stay within the pool)"
    );
}

/// A large range removal crashed at a random I/O: after recovery the range is entirely there
/// (its start never became durable) or entirely gone (finished by recovery if need be), never
/// partly; the rest of the tree is intact and counted exactly.
#[test]
fn a_range_removal_crashed_midway_is_finished_or_absent() {
    let scenarios = scenarios(120) / 4;
    let name = |n: u32| format!("key{n:05}").into_bytes();
    let (mut finished, mut absent, mut removed) = (0, 0, 0);
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let (sim, db) = open_simulated(dir.path());
        let tree = db.open_tree("t").unwrap();
        for n in 0..6_000 {
            tree.insert(name(n), value(&mut rng, &name(n), 0)).unwrap();
        }
        db.flush().unwrap();
        // The removal itself does few writes (its log, and pages evicted); the flush many.
        sim.crash_after(rng.u64(0..30));
        let done = tree.remove_range(name(500)..name(5_500)).is_ok() && db.flush().is_ok();
        sim.crash();
        drop(tree);
        drop(db);
        let db = recover_and_open(&sim, dir.path(), seed);
        finished += db.stats().recovery.range_removals_finished;
        let tree = db.open_tree("t").unwrap();
        let keys: Vec<Vec<u8>> = tree.iter().map(|item| item.unwrap().0).collect();
        let all: Vec<Vec<u8>> = (0..6_000).map(name).collect();
        let outside: Vec<Vec<u8>> = (0..500).chain(5_500..6_000).map(name).collect();
        if keys == all {
            assert!(!done, "seed {seed}: a flushed removal is lost");
            absent += 1;
        } else {
            assert_eq!(keys, outside, "seed {seed}: the range is partly there");
            removed += 1;
        }
        assert_eq!(tree.len().unwrap(), keys.len() as u64, "seed {seed}");
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        drop(tree);
        db.close().unwrap();
    }
    eprintln!("{scenarios} crashed removals: {removed} removed ({finished} finished by recovery), {absent} absent");
    assert!(finished > 0, "no crash fell inside a removal");
}

/// A large tree dropped at a random I/O: after recovery it is entirely there (the drop never
/// became durable) or entirely gone, its name and its pages (the file holds little more than
/// the other tree); the other tree is intact.
#[test]
fn a_tree_dropped_midway_is_there_or_gone() {
    let scenarios = scenarios(120) / 4;
    let (mut gone, mut there, mut finished) = (0, 0, 0);
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let (sim, db) = open_simulated(dir.path());
        let (doomed, kept) = (
            db.open_tree("doomed").unwrap(),
            db.open_tree("kept").unwrap(),
        );
        for n in 0..6_000u32 {
            let key = format!("key{n:05}").into_bytes();
            doomed.insert(&key, value(&mut rng, &key, 0)).unwrap();
            if n % 10 == 0 {
                kept.insert(&key, b"kept").unwrap();
            }
        }
        drop(doomed);
        db.flush().unwrap();
        let kept_pages = {
            let report = db.check_integrity().unwrap();
            report.pages
        };
        sim.crash_after(rng.u64(0..30));
        let done = db.drop_tree("doomed").is_ok() && db.flush().is_ok();
        sim.crash();
        drop(kept);
        drop(db);
        let db = recover_and_open(&sim, dir.path(), seed);
        finished += db.stats().recovery.range_removals_finished;
        let names = db.tree_names().unwrap();
        if names.contains(&"doomed".to_string()) {
            assert!(!done, "seed {seed}: a flushed drop is undone");
            assert_eq!(
                db.open_tree("doomed").unwrap().iter().count(),
                6_000,
                "seed {seed}"
            );
            there += 1;
        } else {
            let report = db.check_integrity().unwrap();
            assert!(report.is_ok(), "seed {seed}: {report}");
            assert!(
                report.pages < kept_pages / 4,
                "seed {seed}: {} pages in use after the drop, {kept_pages} before",
                report.pages
            );
            gone += 1;
        }
        let kept = db.open_tree("kept").unwrap();
        assert_eq!(kept.len().unwrap(), 600, "seed {seed}");
        assert_eq!(kept.iter().count(), 600, "seed {seed}");
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        drop(kept);
        db.close().unwrap();
    }
    eprintln!(
        "{scenarios} crashed drops: {gone} gone ({finished} finished by recovery), {there} there"
    );
    assert!(finished > 0, "no crash fell inside a drop");
}

/// Batches of three threads over one key range, crashed at a random point: every value read
/// must come from a batch whose marker key (written in the same batch, unique to it) is present,
/// so no batch is partly there even when batches overwrite each other's keys; every batch
/// acknowledged under `Immediate` is there. (The commit order of concurrent batches is the
/// log's, which the test cannot see; the marker check holds for any order.)
#[test]
fn concurrent_batches_are_all_or_nothing_after_a_crash() {
    let scenarios = scenarios(160) / 4;
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let (sim, db) = open_simulated(dir.path());
        let tree = db.open_tree("t").unwrap();
        sim.crash_after(fastrand::Rng::with_seed(seed).u64(20..3000));
        let acknowledged: Vec<Vec<String>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..3u64)
                .map(|thread| {
                    let (db, tree) = (&db, &tree);
                    scope.spawn(move || {
                        let mut rng = fastrand::Rng::with_seed(seed * 8 + thread);
                        let mut acknowledged = Vec::new();
                        for n in 0..400 {
                            let batch = format!("b{thread}-{n}");
                            let mut writes = WriteBatch::new();
                            for _ in 0..rng.usize(1..5) {
                                let key = format!("key{:03}", rng.u32(0..300));
                                let mut value = format!("{batch}:").into_bytes();
                                value.resize(value.len() + rng.usize(0..400), b'v');
                                writes.insert(tree, key, value);
                            }
                            writes.insert(tree, format!("marker-{batch}"), "");
                            let durability = if rng.bool() {
                                Durability::Immediate
                            } else {
                                Durability::Eventual
                            };
                            match db.write_with(writes, durability) {
                                Ok(()) if durability == Durability::Immediate => {
                                    acknowledged.push(batch)
                                }
                                Ok(()) => {}
                                Err(_) => break,
                            }
                        }
                        acknowledged
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let (db, tree, stored) = crash_and_read_back(&sim, db, tree, dir.path(), seed);
        for (key, value) in &stored {
            if key.starts_with("marker-") {
                continue;
            }
            let text = String::from_utf8_lossy(value);
            let batch = text.split(':').next().unwrap();
            assert!(
                stored.contains_key(&format!("marker-{batch}")),
                "seed {seed}: {key} holds a value of batch {batch}, which did not commit"
            );
        }
        for batch in acknowledged.iter().flatten() {
            assert!(
                stored.contains_key(&format!("marker-{batch}")),
                "seed {seed}: acknowledged batch {batch} lost"
            );
        }
        assert_eq!(tree.len().unwrap(), stored.len() as u64, "seed {seed}");
        drop(tree);
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        db.close().unwrap();
    }
}

/// Threads of the shared-pages test, and keys per thread.
const SHARING_THREADS: usize = 3;
const KEYS_PER_THREAD: usize = 24;

/// One thread's batches in commit order: (key number, new value or `None` for a removal).
type Batches = Vec<Vec<(usize, Option<Vec<u8>>)>>;

/// Key `n` of `thread`: the threads' keys interleave, so their changes share leaves.
fn thread_key(thread: usize, n: usize) -> String {
    format!("k{n:02}-t{thread}")
}

/// Up to 300 batches of `thread` on its own keys, each Immediate or Eventual at random, until
/// one fails (the crash); returns them all (the failed one too: it may have committed) and how
/// many at least must survive (up to the last acknowledged Immediate one).
fn commit_thread_batches(
    db: &Db,
    tree: &leankv::Tree,
    seed: u64,
    thread: usize,
) -> (Batches, usize) {
    let mut rng = fastrand::Rng::with_seed(seed * 8 + thread as u64);
    let (mut batches, mut must_survive) = (Vec::new(), 0);
    for b in 0..300 {
        let mut writes = WriteBatch::new();
        let mut changes = Vec::new();
        for _ in 0..rng.usize(1..4) {
            let n = rng.usize(0..KEYS_PER_THREAD);
            if rng.u8(0..5) == 0 {
                writes.remove(tree, thread_key(thread, n));
                changes.push((n, None));
            } else {
                let mut value = format!("t{thread}b{b}:").into_bytes();
                value.resize(value.len() + rng.usize(0..700), b'v');
                writes.insert(tree, thread_key(thread, n), &value);
                changes.push((n, Some(value)));
            }
        }
        let durability = if rng.bool() {
            Durability::Immediate
        } else {
            Durability::Eventual
        };
        batches.push(changes);
        match db.write_with(writes, durability) {
            Ok(()) if durability == Durability::Immediate => must_survive = batches.len(),
            Ok(()) => {}
            Err(_) => break,
        }
    }
    (batches, must_survive)
}

/// The longest prefix of `batches`, at least `must_survive` long, after which `thread`'s keys
/// hold what `stored` holds, if any.
fn thread_prefix(
    stored: &BTreeMap<String, Vec<u8>>,
    thread: usize,
    batches: &Batches,
    must_survive: usize,
) -> Option<usize> {
    let recovered: Vec<Option<&Vec<u8>>> = (0..KEYS_PER_THREAD)
        .map(|n| stored.get(&thread_key(thread, n)))
        .collect();
    let mut model: Vec<Option<&Vec<u8>>> = vec![None; KEYS_PER_THREAD];
    let mut matched = None;
    for prefix in 0..=batches.len() {
        if let Some(changes) = prefix.checked_sub(1).map(|last| &batches[last]) {
            for (n, value) in changes {
                model[*n] = value.as_ref();
            }
        }
        if prefix >= must_survive && model == recovered {
            matched = Some(prefix);
        }
    }
    matched
}

/// Three threads commit batches of puts and removes on keys of their own, interleaved in one
/// tree (so their changes share leaves, which split and merge under a pool of a few frames),
/// crashed at a random point. A thread's commits follow one another and the log keeps a prefix
/// of the commit order, so each thread's keys must hold the state after a prefix of its batches
/// no shorter than its last one acknowledged under `Immediate`: a change lost, replayed out of
/// order, or kept from a commit the log lost breaks that.
#[test]
fn each_threads_commits_survive_as_a_prefix_when_threads_share_pages() {
    let scenarios = scenarios(160) / 4;
    let mut prefixes = [0usize; 2];
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let (sim, db) = open_simulated(dir.path());
        let tree = db.open_tree("t").unwrap();
        sim.crash_after(fastrand::Rng::with_seed(seed).u64(20..4000));
        let attempted: Vec<(Batches, usize)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..SHARING_THREADS)
                .map(|thread| {
                    let (db, tree) = (&db, &tree);
                    scope.spawn(move || commit_thread_batches(db, tree, seed, thread))
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let (db, tree, stored) = crash_and_read_back(&sim, db, tree, dir.path(), seed);
        assert_eq!(tree.len().unwrap(), stored.len() as u64, "seed {seed}");
        for (thread, (batches, must_survive)) in attempted.iter().enumerate() {
            let Some(prefix) = thread_prefix(&stored, thread, batches, *must_survive) else {
                panic!(
                    "seed {seed}: thread {thread}'s keys hold no prefix of its {} batches with \
                     the first {must_survive}",
                    batches.len()
                )
            };
            prefixes[usize::from(prefix > *must_survive)] += 1;
        }
        drop(tree);
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        db.close().unwrap();
    }
    eprintln!(
        "{scenarios} scenarios: {} threads' prefixes ended at their last Immediate commit, {} \
         went beyond it",
        prefixes[0], prefixes[1]
    );
}

/// The tree's key count is exactly the number of keys it holds.
fn check_key_count(db: &Db, seed: u64) {
    let tree = db.open_tree("t").unwrap();
    let keys = tree.iter().count() as u64;
    assert_eq!(tree.len().unwrap(), keys, "seed {seed}: key count");
    // Recovered from the log (or the catalog after a clean close), not counted again.
    assert_eq!(db.stats().trees_counted_by_scan, 0, "seed {seed}");
}

/// After a clean close (which leaves each log file at most one checkpoint interval long) the
/// next life starts a fresh log over the old files, and that log recovers a crash: every put
/// acknowledged under `Immediate` before it is there, the puts present are a prefix of those
/// made, and the first life's data is intact.
#[test]
fn the_life_after_a_clean_close_recovers_a_crash() {
    let interval = 1 << 20; // `options()`
    let put = |db: &Db, tree: &leankv::Tree, n: u32, life: u8| {
        let mut batch = WriteBatch::new();
        let value = format!("life{life}-{n}-").repeat(1 + n as usize % 7);
        batch.insert(tree, format!("key{n:05}"), value);
        db.write_with(batch, Durability::Immediate)
    };
    for seed in 0..scenarios(120) / 8 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let (sim, db) = open_simulated(dir.path());
        let tree = db.open_tree("t").unwrap();
        let first_life = rng.u32(100..3000);
        for n in 0..first_life {
            put(&db, &tree, n, 1).unwrap();
        }
        drop(tree);
        db.close().unwrap();
        for name in ["wal-0", "wal-1"] {
            assert!(
                sim.storage(name).len().unwrap() <= interval,
                "seed {seed}: {name}"
            );
        }
        let db = open(
            dir.path(),
            FILES.map(|name| sim.storage(name) as Arc<dyn Storage>),
        )
        .unwrap();
        let tree = db.open_tree("t").unwrap();
        sim.crash_after(rng.u64(1..400));
        let mut acknowledged = first_life;
        for n in first_life..first_life + 2000 {
            if put(&db, &tree, n, 2).is_err() {
                break; // the crash
            }
            acknowledged = n + 1;
        }
        sim.crash();
        drop((tree, db));
        let db = recover_and_open(&sim, dir.path(), seed);
        let tree = db.open_tree("t").unwrap();
        let present = tree.iter().count() as u32;
        assert!(
            present >= acknowledged,
            "seed {seed}: {present} keys, {acknowledged} acknowledged"
        );
        for n in 0..present {
            let life = if n < first_life { 1 } else { 2 };
            let expected = format!("life{life}-{n}-").repeat(1 + n as usize % 7);
            let found = tree.get(format!("key{n:05}")).unwrap();
            assert_eq!(found, Some(expected.into_bytes()), "seed {seed}: key {n}");
        }
        assert!(db.check_integrity().unwrap().is_ok(), "seed {seed}");
    }
}
