//! A real kill -9 loop over the file storage: a child process writes with three threads (single
//! inserts with `Durability::Immediate` and `Eventual`, atomic batches or transactions that
//! insert two keys and remove one of the previous batch, transactions that fail and are undone
//! (their keys never present, the key they removed back), and rounds that insert a few hundred keys in one batch
//! and then remove them with one `remove_range` or drop the tree they were put in), the parent
//! kills it with SIGKILL at a random moment, reopens (recovery), and checks against what the
//! child had acknowledged:
//!
//! * every commit acknowledged under `Immediate` is present;
//! * no batch, range removal or dropped tree is partly present;
//! * every value read is one the child wrote for that key (large values included);
//! * `check_integrity` finds nothing.
//!
//! The child logs each attempt before it starts and each acknowledgement after it returns, one
//! `write` per line to a file opened for appending (the page cache keeps them across a kill).
//! `LEANKV_KILL_CYCLES` sets the number of cycles (default 12; the closing notes' long run used
//! 500); every 10 cycles start over with a new database.

mod common;

use leankv::{Db, Durability, Options, WriteBatch};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_DIR: &str = "LEANKV_TEST_KILL_DIR";
const CHILD_CYCLE: &str = "LEANKV_TEST_KILL_CYCLE";
const ACKS: &str = "acks.log";
/// Keys of the range rounds: `range:{cycle}:{round}:{index}`.
const RANGE_KEYS: &str = "range:";
const KEYS_PER_ROUND: usize = 300;

fn options() -> Options {
    common::small(96).checkpoint_every(1 << 20)
}

/// The value of `key` at `version`: one in six is a large value (stored outside the leaf).
fn value(key: &str, version: u64) -> Vec<u8> {
    let mut value = format!("{key}@{version}:").into_bytes();
    let len = if version % 6 == 5 {
        2000 + (version as usize * 131) % 20_000
    } else {
        40 + (version as usize * 7 + key.len()) % 120
    };
    let filler = (0..).map(|i: usize| b'a' + ((i / 7 + version as usize) % 26) as u8);
    value.extend(filler.take(len.saturating_sub(value.len())));
    value
}

fn child(dir: &Path, cycle: u64) -> ! {
    let db = Db::open(dir, options()).unwrap();
    let tree = db.open_tree("t").unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(ACKS))
        .unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0u64.. {
                // Odd rounds fill a tree of their own and drop it.
                let prefix = format!("{RANGE_KEYS}{cycle}:{round}:");
                let round_tree = (round % 2 == 1).then(|| db.open_tree(&prefix).unwrap());
                let target = round_tree.as_ref().unwrap_or(&tree);
                (&log)
                    .write_all(format!("attempt range {prefix}\n").as_bytes())
                    .unwrap();
                let mut writes = WriteBatch::new();
                for index in 0..KEYS_PER_ROUND {
                    writes.insert(target, format!("{prefix}{index:03}"), value(&prefix, 0));
                }
                db.write(writes).unwrap();
                if round_tree.is_some() {
                    assert!(db.drop_tree(&prefix).unwrap());
                } else {
                    let end = format!("{prefix}~");
                    assert_eq!(
                        tree.remove_range(prefix..end).unwrap(),
                        KEYS_PER_ROUND as u64
                    );
                }
            }
        });
        for thread in 0..2u64 {
            let (tree, db, log) = (&tree, &db, &log);
            scope.spawn(move || {
                let line = |text: String| (&*log).write_all(text.as_bytes()).unwrap();
                let durability = if thread == 0 {
                    Durability::Immediate
                } else {
                    Durability::Eventual
                };
                for n in 0u64.. {
                    if n % 4 == 3 {
                        let batch = format!("c{cycle}t{thread}b{n}");
                        let previous = format!("c{cycle}t{thread}b{}", n.saturating_sub(4));
                        line(format!("attempt batch {batch} {previous}\n"));
                        if n % 8 == 7 {
                            // The same changes as a transaction.
                            db.transaction_with(durability, |txn| {
                                txn.insert(tree, format!("{batch}-0"), value(&batch, 0))?;
                                txn.insert(tree, format!("{batch}-1"), value(&batch, 1))?;
                                if n >= 7 {
                                    txn.remove(tree, format!("{previous}-1"))?;
                                }
                                Ok::<_, leankv::Error>(())
                            })
                            .unwrap();
                        } else {
                            let mut writes = WriteBatch::new();
                            writes.insert(tree, format!("{batch}-0"), value(&batch, 0));
                            writes.insert(tree, format!("{batch}-1"), value(&batch, 1));
                            if n >= 7 {
                                writes.remove(tree, format!("{previous}-1"));
                            }
                            db.write_with(writes, durability).unwrap();
                        }
                        if thread == 0 {
                            line(format!("ack batch {batch}\n"));
                        }
                    } else {
                        if n % 16 == 5 {
                            abandoned_transaction(db, tree, &format!("c{cycle}t{thread}"), n);
                        }
                        let key = format!("c{cycle}t{thread}k{}", n % 50);
                        line(format!("attempt put {key} {n}\n"));
                        let mut writes = WriteBatch::new();
                        writes.insert(tree, &key, value(&key, n));
                        db.write_with(writes, durability).unwrap();
                        if thread == 0 {
                            line(format!("ack put {key} {n}\n"));
                        }
                    }
                }
            });
        }
    });
    unreachable!("the writers never stop");
}

/// A transaction that fails after its changes, so that they are undone: two keys no batch
/// attempted (present after a crash, they would be invented) and the removal of the first key
/// of `writer`'s latest batch (number `n - 2`; missing, that batch would be partly present).
fn abandoned_transaction(db: &Db, tree: &leankv::Tree, writer: &str, n: u64) {
    let abandoned = format!("{writer}x{n}");
    let latest = format!("{writer}b{}-0", n - 2);
    let failed = db.transaction(|txn| {
        txn.insert(tree, format!("{abandoned}-0"), value(&abandoned, 0))?;
        txn.insert(tree, format!("{abandoned}-1"), value(&abandoned, 1))?;
        txn.remove(tree, &latest)?;
        Err::<(), _>(None)
    });
    assert!(matches!(failed, Err(None)), "fails on purpose: {failed:?}");
}

/// What the children attempted and had acknowledged, over all cycles so far.
#[derive(Default)]
struct Model {
    /// Versions attempted per single key, and the last acknowledged one.
    attempted: HashMap<String, HashSet<u64>>,
    acknowledged: HashMap<String, u64>,
    /// Batches attempted (with the batch whose key they remove), and acknowledged.
    batches: BTreeMap<String, String>,
    batches_acknowledged: HashSet<String>,
    /// Range rounds attempted.
    range_rounds: usize,
}

impl Model {
    fn read(dir: &Path) -> Model {
        let mut model = Model::default();
        let text = std::fs::read_to_string(dir.join(ACKS)).unwrap_or_default();
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            match words[..] {
                ["attempt", "put", key, n] => {
                    let n: u64 = n.parse().unwrap();
                    model.attempted.entry(key.into()).or_default().insert(n);
                }
                ["ack", "put", key, n] => {
                    model.acknowledged.insert(key.into(), n.parse().unwrap());
                }
                ["attempt", "batch", batch, previous] => {
                    model.batches.insert(batch.into(), previous.into());
                }
                ["ack", "batch", batch] => {
                    model.batches_acknowledged.insert(batch.into());
                }
                ["attempt", "range", _] => model.range_rounds += 1,
                _ => {} // a line the kill cut short
            }
        }
        model
    }
}

/// The version a single key's value was written with.
fn version_of(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.split_once('@'))
        .and_then(|(_, rest)| rest.split_once(':'))
        .and_then(|(n, _)| n.parse().ok())
}

fn check(dir: &Path, cycle: u64) {
    let model = Model::read(dir);
    let db = Db::open(dir, options()).unwrap_or_else(|e| panic!("cycle {cycle}: open: {e}"));
    let tree = db.open_tree("t").unwrap();
    let stored = common::text_contents(&tree);
    // Range rounds: every key of a round, or none.
    let mut rounds: HashMap<&str, usize> = HashMap::new();
    for key in stored.keys().filter(|key| key.starts_with(RANGE_KEYS)) {
        *rounds.entry(key.rsplit_once(':').unwrap().0).or_default() += 1;
    }
    for (round, keys) in &rounds {
        assert_eq!(
            *keys, KEYS_PER_ROUND,
            "cycle {cycle}: round {round} partly present"
        );
    }
    // Trees of dropping rounds: gone, or there with all their keys or (created, the batch
    // lost) none.
    for name in db.tree_names().unwrap() {
        if name.starts_with(RANGE_KEYS) {
            let keys = db.open_tree(&name).unwrap().iter().count();
            assert!(
                keys == 0 || keys == KEYS_PER_ROUND,
                "cycle {cycle}: tree {name} holds {keys} keys"
            );
        }
    }
    for (key, bytes) in stored
        .iter()
        .filter(|(key, _)| !key.starts_with(RANGE_KEYS))
    {
        if let Some((batch, index)) = key.rsplit_once('-') {
            assert!(
                model.batches.contains_key(batch),
                "cycle {cycle}: invented {key}"
            );
            assert_eq!(
                bytes,
                &value(batch, index.parse().unwrap()),
                "cycle {cycle}: {key}"
            );
            continue;
        }
        let version =
            version_of(bytes).unwrap_or_else(|| panic!("cycle {cycle}: invented value for {key}"));
        assert!(
            model
                .attempted
                .get(key)
                .is_some_and(|n| n.contains(&version)),
            "cycle {cycle}: {key} holds version {version}, never written"
        );
        assert_eq!(bytes, &value(key, version), "cycle {cycle}: {key}");
    }
    for (key, &acked) in &model.acknowledged {
        let version = stored.get(key).and_then(|bytes| version_of(bytes));
        assert!(
            version.is_some_and(|version| version >= acked),
            "cycle {cycle}: acknowledged {key}@{acked} lost (found {version:?})"
        );
    }
    // Batches: keys 0 and 1 together or not at all; key 1 gone if and only if the next batch
    // of the same writer (which removes it) is there.
    let present = |batch: &str, index: u32| stored.contains_key(&format!("{batch}-{index}"));
    let removers: HashMap<&str, &str> = model
        .batches
        .iter()
        .map(|(batch, previous)| (previous.as_str(), batch.as_str()))
        .collect();
    for batch in model.batches.keys() {
        let first = present(batch, 0);
        let removed_by_next = removers
            .get(batch.as_str())
            .is_some_and(|next| present(next, 0));
        assert_eq!(
            present(batch, 1),
            first && !removed_by_next,
            "cycle {cycle}: batch {batch} partly present"
        );
        if model.batches_acknowledged.contains(batch) {
            assert!(first, "cycle {cycle}: acknowledged batch {batch} lost");
        }
    }
    assert_eq!(
        tree.len().unwrap(),
        stored.len() as u64,
        "cycle {cycle}: key count"
    );
    assert_eq!(db.stats().trees_counted_by_scan, 0, "cycle {cycle}");
    drop(tree);
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "cycle {cycle}: {report}");
    eprintln!(
        "cycle {cycle}: {} keys ({} of {} range rounds), {} acknowledged puts, {} batches ({} acknowledged); {:?}",
        stored.len(),
        rounds.len(),
        model.range_rounds,
        model.acknowledged.len(),
        model.batches.len(),
        model.batches_acknowledged.len(),
        db.stats().recovery
    );
    db.close().unwrap();
}

#[test]
fn kill_9_loop_loses_no_acknowledged_commit() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        let cycle = std::env::var(CHILD_CYCLE).unwrap().parse().unwrap();
        child(Path::new(&dir), cycle);
    }
    let cycles: u64 = std::env::var("LEANKV_KILL_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12);
    let mut rng = fastrand::Rng::with_seed(cycles);
    let mut dir = tempfile::tempdir().unwrap();
    for cycle in 0..cycles {
        // A fresh database every 10 cycles keeps each check's cost bounded in long runs.
        if cycle % 10 == 0 {
            dir = tempfile::tempdir().unwrap();
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "kill_9_loop_loses_no_acknowledged_commit"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_CYCLE, cycle.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.u64(50..600)));
        let early = child.try_wait().unwrap();
        assert!(
            early.is_none(),
            "cycle {cycle}: the child ended by itself: {early:?}"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        check(dir.path(), cycle);
    }
}
