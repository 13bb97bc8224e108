//! Without the write-ahead log (`Options::write_ahead_log(false)`, the benchmarks' logging-free
//! mode), a process killed while it has a database open leaves the database marked open, and
//! the next open says so (`Error::NotClosedCleanly`) instead of opening a file that may have
//! lost changes or mix page versions as if nothing happened. A clean close, or a drop, clears
//! the mark. (With the log, a kill is recovered: `kill_loop.rs`.)

mod common;

use common::{key, value_for};
use leankv::{Db, Error, Options};
use std::process::Command;

fn small(frames: usize) -> Options {
    common::small(frames).write_ahead_log(false)
}

/// Set in the child process: the database directory to open and abort in.
const CHILD_DIR: &str = "LEANKV_TEST_ABORT_IN";

#[test]
fn a_killed_process_leaves_the_database_marked_open() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        // The child: write, flush (everything on disk), write more, then die without closing.
        let db = Db::open(&dir, small(64)).unwrap();
        let tree = db.open_tree("t").unwrap();
        for n in 0..2_000 {
            tree.insert(key(n), value_for(n, 0, 100)).unwrap();
        }
        db.flush().unwrap();
        for n in 2_000..4_000 {
            tree.insert(key(n), value_for(n, 0, 100)).unwrap();
        }
        std::process::abort();
    }
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_process_leaves_the_database_marked_open",
        ])
        .arg("--nocapture")
        .env(CHILD_DIR, dir.path())
        .status()
        .unwrap();
    assert!(!status.success(), "the child was meant to abort");
    match Db::open(dir.path(), small(64)) {
        Err(Error::NotClosedCleanly { path }) => assert_eq!(path, dir.path()),
        other => panic!("a killed database opened without a word: {other:?}"),
    }
    // Salvage: every page either reads as written or is reported; the flushed keys are what a
    // crash without a log can still keep (eviction may have overwritten some of their pages).
    let db = Db::open(dir.path(), small(64).open_after_crash(true)).unwrap();
    let tree = db.open_tree("t").unwrap();
    for item in tree.iter() {
        match item {
            Ok((k, v)) => {
                let n: u64 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                assert_eq!(v, value_for(n, 0, 100), "a value that was never written");
            }
            Err(Error::Corruption { .. }) => break,
            Err(other) => panic!("unexpected error reading a salvaged database: {other}"),
        }
    }
    drop(tree);
    db.close().unwrap();
    // The clean close cleared the mark.
    Db::open(dir.path(), small(64)).unwrap().close().unwrap();
}

#[test]
fn closing_or_dropping_clears_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small(64)).unwrap();
    db.open_tree("t").unwrap().insert(b"k", b"v").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = Db::open(dir.path(), small(64)).unwrap();
    assert_eq!(
        db.open_tree("t").unwrap().get(b"k").unwrap(),
        Some(b"v".to_vec())
    );
    db.close().unwrap();
    Db::open(dir.path(), small(64)).unwrap();
}
