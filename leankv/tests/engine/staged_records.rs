//! A batch's records wait on its thread until its commit appends them (`wal/staging.rs`). Here
//! a transaction larger than the pool has its pages written before its commit, while a second
//! thread's transactions change the same leaves, and the machine crashes (through the crash
//! simulator) inside the large transaction or after its commit. Every page written must have
//! been described by the log first (the WAL rule through the pages' staging marks) and each
//! page's changes must be in the log in the order made (the second thread publishes the first
//! one's records before it changes a leaf they touch): recovery then rolls back exactly the
//! transaction that did not commit, keeps every acknowledged commit, and invents nothing.
//!
//! `LEANKV_CRASHES` sets the number of scenarios (default 24).

use leankv::testing::{CrashSimulator, Storage};
use leankv::{Db, Durability, Error, Options};
use std::path::Path;
use std::sync::Arc;

const FILES: [&str; 3] = ["pages", "wal-0", "wal-1"];
/// Keys of each thread; the large transaction's values fill several times the pool.
const KEYS: usize = 400;

/// Opens the database in `files` (pages, two log files) with a pool of 24 pages, the least
/// allowed.
fn open(dir: &Path, files: [Arc<dyn Storage>; 3]) -> leankv::Result<Db> {
    let [pages, wal0, wal1] = files;
    let options = Options::default()
        .page_size(4096)
        .pool_size(24 * (4096 + 512))
        .checkpoint_every(1 << 20);
    Db::open_with_files(dir, options, pages, [wal0, wal1])
}

/// Key `n` of `thread`: the threads' keys interleave, so their changes share leaves.
fn key(thread: usize, n: usize) -> String {
    format!("k{n:04}-{thread}")
}

/// The value of key `n` of thread 0: loaded before the large transaction (`round` 0), which
/// rewrites it in place (`round` 1: no split, so nothing but the staging rules publishes its
/// records before its commit).
fn value(round: u64, n: usize) -> Vec<u8> {
    let mut value = format!("round-{round}-{n:04}-").into_bytes();
    value.resize(300 + n % 200, b'a' + ((n as u64 + round) % 26) as u8);
    value
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn pages_written_before_a_commit_are_described_by_the_log_first() {
    let scenarios = std::env::var("LEANKV_CRASHES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24u64);
    for seed in 0..scenarios {
        let dir = tempfile::tempdir().unwrap();
        let sim = CrashSimulator::new();
        let db = open(dir.path(), FILES.map(|name| sim.storage(name) as _)).unwrap();
        let tree = db.open_tree("t").unwrap();
        // Half the scenarios' second thread writes to another tree, half to this one, between
        // the large transaction's keys (its splits then publish the large one's records).
        let shared = seed % 4 >= 2;
        let other = db.open_tree("other").unwrap();
        let small_tree = if shared { &tree } else { &other };
        for n in 0..KEYS {
            tree.insert(key(0, n), value(0, n)).unwrap();
        }
        db.flush().unwrap();
        // Even seeds crash inside the large transaction, after this many of its changes.
        let crash_inside = (seed % 2 == 0).then_some(KEYS / 2 + (seed as usize * 7) % (KEYS / 2));
        let (large, written_while_open, acknowledged) = std::thread::scope(|scope| {
            let small = scope.spawn(|| {
                let mut acknowledged = 0;
                for n in 0..KEYS {
                    let committed = db.transaction_with(Durability::Immediate, |txn| {
                        txn.insert(small_tree, key(1, n), format!("small-{n}"))
                    });
                    if committed.is_err() {
                        break;
                    }
                    acknowledged = n + 1;
                }
                acknowledged
            });
            let writes_before = db.stats().page_writes;
            let mut written_while_open = 0;
            let large = db.transaction_with(Durability::Immediate, |txn| {
                for n in 0..KEYS {
                    let new = value(1, n);
                    let rewritten =
                        txn.update_in_place(&tree, key(0, n), |bytes| bytes.copy_from_slice(&new))?;
                    assert!(rewritten.is_some(), "seed {seed}: key {n} was loaded");
                    if crash_inside == Some(n) {
                        written_while_open = db.stats().page_writes - writes_before;
                        sim.crash();
                    }
                }
                written_while_open = written_while_open.max(db.stats().page_writes - writes_before);
                Ok::<_, Error>(())
            });
            (large, written_while_open, small.join().unwrap())
        });
        // The test means something only if pages the open transaction changed were written.
        assert!(
            written_while_open > 0,
            "seed {seed}: no page was written while the transaction was open"
        );
        assert_eq!(
            large.is_ok(),
            crash_inside.is_none(),
            "seed {seed}: {large:?}"
        );
        sim.crash();
        drop((tree, other));
        drop(db);

        let recovered = sim.recover(seed);
        let db = open(dir.path(), FILES.map(|name| recovered.storage(name) as _))
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        let tree = db.open_tree("t").unwrap();
        let other = db.open_tree("other").unwrap();
        let small_tree = if shared { &tree } else { &other };
        let round = u64::from(crash_inside.is_none());
        let mut small_keys = 0;
        for n in 0..KEYS {
            let stored = tree.get(key(0, n)).unwrap().map(text);
            assert_eq!(stored, Some(text(value(round, n))), "seed {seed}: key {n}");
            let small = small_tree.get(key(1, n)).unwrap();
            if n < acknowledged {
                assert!(small.is_some(), "seed {seed}: acknowledged commit {n} lost");
            }
            if let Some(small) = small {
                assert_eq!(small, format!("small-{n}").into_bytes(), "seed {seed}");
                small_keys += 1;
            }
        }
        let keys = KEYS as u64 + if shared { small_keys } else { 0 };
        assert_eq!(tree.len().unwrap(), keys, "seed {seed}");
        drop((tree, other));
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "seed {seed}: {report}");
        db.close().unwrap();
    }
}
