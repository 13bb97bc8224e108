//! Every error a caller can meet: bad input, bad options, bad files, I/O faults, a second
//! opener, a closed database. None may panic, corrupt the tree or invent data.

use crate::common::{key, open, small};
use leankv::testing::{FaultKind, FaultyStorage, FileStorage};
use leankv::{Db, Error, Options};
use std::sync::Arc;

#[test]
fn oversize_keys_and_values_are_rejected_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Options::default().pool_size(8 << 20));
    let tree = db.open_tree("t").unwrap();
    assert_eq!(db.max_key_size(), leankv::MAX_KEY_SIZE);
    assert_eq!(db.max_value_size(), leankv::MAX_VALUE_SIZE);
    let long_key = vec![1u8; leankv::MAX_KEY_SIZE + 1];
    // Zeroed memory the rejection never touches: costs no 4 GiB.
    let long_value = vec![0u8; leankv::MAX_VALUE_SIZE + 1];
    tree.insert(b"k", b"v").unwrap();
    match tree.insert(&long_key, b"v") {
        Err(Error::KeyTooLarge { len, max }) => assert_eq!((len, max), (1025, 1024)),
        other => panic!("{other:?}"),
    }
    match tree.insert(b"k", &long_value) {
        Err(Error::ValueTooLarge { len, max }) => {
            assert_eq!((len, max), (1 << 32, (1 << 32) - 1))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        tree.get(b"k").unwrap(),
        Some(b"v".to_vec()),
        "old value kept"
    );
    assert_eq!(tree.get(&long_key).unwrap(), None);
    assert!(!tree.remove(&long_key).unwrap());
    // The largest keys with the largest values a leaf holds work, many times over (forcing
    // splits of full-size entries), and so do those with values just too long for a leaf.
    let inline = db.max_inline_value_size();
    let value_len = |n: u8| {
        if n.is_multiple_of(3) {
            inline + 1
        } else {
            inline
        }
    };
    for n in 0..40u8 {
        let mut k = vec![n; leankv::MAX_KEY_SIZE];
        k[0] = n;
        tree.insert(&k, vec![n; value_len(n)]).unwrap();
    }
    for n in 0..40u8 {
        assert_eq!(
            tree.get(vec![n; leankv::MAX_KEY_SIZE]).unwrap(),
            Some(vec![n; value_len(n)])
        );
    }
    assert_eq!(tree.iter().count(), 41);
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn empty_key_and_empty_value_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(32));
    let tree = db.open_tree("").unwrap();
    tree.insert(b"", b"").unwrap();
    tree.insert(b"a", b"").unwrap();
    assert_eq!(tree.get(b"").unwrap(), Some(Vec::new()));
    let all: Vec<_> = tree.iter().map(|i| i.unwrap()).collect();
    assert_eq!(all, vec![(vec![], vec![]), (b"a".to_vec(), vec![])]);
    assert!(tree.remove(b"").unwrap());
    assert_eq!(tree.get(b"").unwrap(), None);
    assert_eq!(db.tree_names().unwrap(), vec![String::new()]);
}

#[test]
fn options_that_cannot_work_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    for options in [
        Options::default().pool_size(100 << 10),
        Options::default().page_size(3000),
        Options::default().page_size(1 << 20),
        Options::default().cooling_fraction(0.0),
        Options::default().cooling_fraction(0.9),
    ] {
        match Db::open(dir.path(), options) {
            Err(Error::InvalidOptions(reason)) => assert!(!reason.is_empty()),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted bad options"),
        }
    }
}

#[test]
fn second_open_of_the_same_directory_is_refused_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(32));
    assert!(matches!(
        Db::open(dir.path(), small(32)),
        Err(Error::AlreadyOpen { .. })
    ));
    db.close().unwrap();
    open(dir.path(), small(32)).close().unwrap();
}

#[test]
fn foreign_or_garbage_page_file_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("leankv.pages"), vec![0x5Au8; 20_000]).unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"unrelated file").unwrap();
    assert!(matches!(
        Db::open(dir.path(), small(32)),
        Err(Error::NotADatabase { .. })
    ));
    std::fs::write(dir.path().join("leankv.pages"), b"short").unwrap();
    assert!(matches!(
        Db::open(dir.path(), small(32)),
        Err(Error::NotADatabase { .. })
    ));
}

/// A file of an older on-disk format (version 1: two-byte key heads) is refused with the
/// version named, never read with this build's layout.
#[test]
fn older_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path(), 10);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[12..16].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[4..512]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    match Db::open(dir.path(), small(32)) {
        Err(Error::NotADatabase { reason, .. }) => {
            assert!(reason.contains("format version 1"), "{reason}")
        }
        other => panic!("expected NotADatabase, got {other:?}"),
    }
}

#[test]
fn a_file_of_the_previous_format_opens_and_is_rewritten_in_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path(), 10);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[12..16], 3u32.to_le_bytes());
    bytes[12..16].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[4..512]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let db = open(dir.path(), small(32));
    let tree = db.open_tree("t").unwrap();
    for n in 0..10 {
        assert_eq!(tree.get(key(n)).unwrap(), Some(vec![n as u8; 100]));
    }
    assert_eq!(db.stats().format_version, 3);
    db.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap()[12..16], 3u32.to_le_bytes());
}

/// Creates a database with one tree of `count` keys and returns the page file's path.
fn populated(dir: &std::path::Path, count: u64) -> std::path::PathBuf {
    let db = open(dir, small(32));
    let tree = db.open_tree("t").unwrap();
    for n in 0..count {
        tree.insert(key(n), [n as u8; 100]).unwrap();
    }
    db.close().unwrap();
    dir.join("leankv.pages")
}

fn flip_byte(path: &std::path::Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_in_a_page_is_reported_as_corruption_naming_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path(), 3_000);
    // Page 10 is some node of the tree (the root is reloaded at open; leaves on demand).
    flip_byte(&path, 10 * 4096 + 2000);
    let db = open(dir.path(), small(32));
    let tree = db.open_tree("t").unwrap();
    let mut corruption = None;
    for n in 0..3_000 {
        match tree.get(key(n)) {
            Ok(value) => assert_eq!(value, Some(vec![n as u8; 100]), "wrong data returned"),
            Err(Error::Corruption { page_id, reason }) => {
                corruption = Some((page_id, reason));
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    let (page_id, reason) = corruption.expect("the damaged page was never read");
    assert_eq!(page_id, 10);
    assert!(reason.contains("checksum"), "{reason}");
    let report = db.check_integrity().unwrap();
    assert!(!report.is_ok());
    assert!(
        report.problems.iter().any(|p| p.contains("page 10")),
        "{report}"
    );
}

#[test]
fn a_damaged_superblock_is_corruption_of_page_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path(), 10);
    flip_byte(&path, 21);
    match Db::open(dir.path(), small(32)) {
        Err(Error::Corruption { page_id: 0, .. }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_truncated_page_file_is_detected_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path(), 3_000);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(file.metadata().unwrap().len() / 2).unwrap();
    assert!(matches!(
        Db::open(dir.path(), small(32)),
        Err(Error::Corruption { page_id: 0, .. })
    ));
}

#[test]
fn handles_return_closed_after_close() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(32));
    let tree = db.open_tree("t").unwrap();
    tree.insert(b"a", b"1").unwrap();
    db.close().unwrap();
    assert!(matches!(tree.get(b"a"), Err(Error::Closed)));
    assert!(matches!(tree.insert(b"b", b"2"), Err(Error::Closed)));
    assert!(matches!(tree.iter().next(), Some(Err(Error::Closed))));
    // The key count is kept outside the pages, but a closed database answers nothing.
    assert!(matches!(tree.len(), Err(Error::Closed)));
    assert!(matches!(tree.is_empty(), Err(Error::Closed)));
}

#[test]
fn full_device_surfaces_as_an_io_error_and_the_database_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(FileStorage::open(&dir.path().join("leankv.pages"), false).unwrap());
    let storage = Arc::new(FaultyStorage::new(file.clone()));
    let db = Db::open_with_storage(dir.path(), small(32), storage.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    storage.fail_writes(0, u64::MAX, FaultKind::NoSpace);
    let mut written = 0u64;
    let error = loop {
        match tree.insert(key(written), [7u8; 200]) {
            Ok(()) => written += 1,
            Err(error) => break error,
        }
        assert!(written < 100_000, "eviction never needed a write");
    };
    match &error {
        Error::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::StorageFull),
        other => panic!("{other:?}"),
    }
    // Reads of what was inserted still work while the device is full.
    for n in (0..written).step_by(50) {
        assert_eq!(tree.get(key(n)).unwrap(), Some(vec![7u8; 200]));
    }
    storage.heal();
    for n in written..written + 500 {
        tree.insert(key(n), [7u8; 200]).unwrap();
    }
    db.close().unwrap();
    let db =
        Db::open_with_storage(dir.path(), small(32), Arc::new(FaultyStorage::new(file))).unwrap();
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.iter().count() as u64, written + 500, "nothing lost");
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn failed_and_short_reads_surface_and_leave_the_database_usable() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 3_000);
    let file = Arc::new(FileStorage::open(&dir.path().join("leankv.pages"), true).unwrap());
    let storage = Arc::new(FaultyStorage::new(file));
    let db = Db::open_with_storage(dir.path(), small(32), storage.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    for kind in [FaultKind::Fail(std::io::ErrorKind::Other), FaultKind::Short] {
        storage.fail_reads(0, 1, kind);
        let outcome = (0..3_000).map(|n| tree.get(key(n))).find(Result::is_err);
        match (kind, outcome) {
            (FaultKind::Fail(_), Some(Err(Error::Io { .. }))) => {}
            (FaultKind::Short, Some(Err(Error::Corruption { .. }))) => {}
            (kind, other) => panic!("{kind:?}: {other:?}"),
        }
    }
    for n in 0..3_000 {
        assert_eq!(tree.get(key(n)).unwrap(), Some(vec![n as u8; 100]));
    }
}
