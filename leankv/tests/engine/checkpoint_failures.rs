//! Background checkpoints that fail or panic. Writers wait for checkpoints when the log runs
//! four intervals ahead of the last completed one: they must get an error then, never wait
//! forever, and go on once checkpoints succeed again.

use crate::common::key;
use leankv::testing::{FaultKind, FaultyStorage, MemoryStorage};
use leankv::{Db, Error, Options, Tree};
use std::sync::Arc;

/// Far more log than four 1 MiB checkpoint intervals.
const MAX_PUTS: u64 = 40_000;
const VALUE: [u8; 500] = [7; 500];

fn options() -> Options {
    Options::default()
        .pool_size(64 << 20)
        .checkpoint_every(1 << 20)
}

/// Puts keys from `first` on until one fails (its error) or `MAX_PUTS` succeeded; returns the
/// first key not put and the error.
fn put_until_error(tree: &Tree, first: u64) -> (u64, Option<Error>) {
    for n in first..first + MAX_PUTS {
        if let Err(error) = tree.insert(key(n), VALUE) {
            return (n, Some(error));
        }
    }
    (first + MAX_PUTS, None)
}

/// A database whose page writes all fail as `kind` says from now on, and the first write
/// that failed: its key's number and its error, which must say `expected`.
struct Failed {
    _dir: tempfile::TempDir,
    storage: Arc<FaultyStorage>,
    db: Db,
    tree: Tree,
    at: u64,
}

fn writes_until_failure(kind: FaultKind, expected: &str) -> Failed {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FaultyStorage::new(Arc::new(MemoryStorage::new())));
    let db = Db::open_with_storage(dir.path(), options(), storage.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    storage.fail_writes(0, u64::MAX, kind);
    let (at, error) = put_until_error(&tree, 0);
    let error = error.expect("a write fails while checkpoints cannot write pages");
    assert!(error.to_string().contains(expected), "{error}");
    Failed {
        _dir: dir,
        storage,
        db,
        tree,
        at,
    }
}

#[test]
fn writes_fail_while_checkpoints_fail_and_go_on_once_one_succeeds() {
    let Failed {
        _dir,
        storage,
        db,
        tree,
        at,
    } = writes_until_failure(FaultKind::NoSpace, "the last checkpoint failed");
    // The device has room again: a checkpoint (here the caller's) lets writes go on.
    storage.heal();
    db.flush().unwrap();
    let (end, error) = put_until_error(&tree, at);
    assert!(error.is_none(), "{error:?}");
    for n in (0..end).step_by(997) {
        assert_eq!(
            tree.get(key(n)).unwrap().as_deref(),
            Some(&VALUE[..]),
            "{n}"
        );
    }
    assert!(db.check_integrity().unwrap().is_ok());
    db.close().unwrap();
}

#[test]
fn a_panic_in_the_checkpoint_thread_fails_the_log_instead_of_leaving_writers_waiting() {
    let Failed {
        _dir,
        storage,
        db,
        tree,
        ..
    } = writes_until_failure(FaultKind::Panic, "the checkpoint thread panicked");
    storage.heal();
    assert!(tree.insert(b"after", b"the panic").is_err());
    // Close writes every page: the panicked write gave up its claims, so nothing waits on them.
    assert!(db.close().is_err(), "the log failed");
}
