//! Disk use after a clean close: each log file keeps at most 64 MiB (what the next life
//! overwrites first, so that its syncs need no file-system metadata), the rest of its space is
//! released; the page file gives back the blocks it allocated ahead of new pages; and the
//! database reopens with everything in it.

use leankv::{Db, Durability, Options};

const RETAINED: u64 = 64 << 20;

#[test]
fn a_clean_close_releases_the_log_beyond_what_the_next_life_reuses() {
    let dir = tempfile::tempdir().unwrap();
    let log_len = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().len();
    let options = Options::default()
        .page_size(4096)
        .pool_size(8 << 20)
        .checkpoint_every(1 << 30)
        .durability(Durability::None);
    let value = |n: u32| format!("{n:08}").repeat(120);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    let mut n = 0u32;
    // Until the first log file outgrows what a close keeps (one checkpoint at the open, none
    // after: the interval is 1 GiB).
    while log_len("leankv.wal-0") <= RETAINED + (4 << 20) {
        for _ in 0..1000 {
            tree.insert(n.to_be_bytes(), value(n)).unwrap();
            n += 1;
        }
    }
    drop(tree);
    db.close().unwrap();
    assert_eq!(log_len("leankv.wal-0"), RETAINED);
    assert!(log_len("leankv.wal-1") <= RETAINED);
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap(), u64::from(n));
    for k in [0, n / 2, n - 1] {
        assert_eq!(
            tree.get(k.to_be_bytes()).unwrap(),
            Some(value(k).into_bytes())
        );
    }
    assert!(db.check_integrity().unwrap().is_ok());
}

#[test]
fn a_clean_close_leaves_a_page_file_of_its_pages_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pages_len = || {
        std::fs::metadata(dir.path().join("leankv.pages"))
            .unwrap()
            .len()
    };
    let options = Options::default()
        .page_size(4096)
        .pool_size(2 << 20)
        .write_ahead_log(false);
    let value = |n: u32| format!("{n:08}").repeat(40);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    // Beyond the pool, so that evictions write new pages past the file's end all along.
    let count = 20_000u32;
    for n in 0..count {
        tree.insert(n.to_be_bytes(), value(n)).unwrap();
    }
    let grown = pages_len();
    drop(tree);
    let stats = db.stats();
    let pages_end = stats.page_count * stats.page_size as u64;
    assert!(grown > 4 << 20, "the data went to the file ({grown} bytes)");
    db.close().unwrap();
    assert_eq!(pages_len(), pages_end);
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap(), u64::from(count));
    for n in (0..count).step_by(997) {
        assert_eq!(
            tree.get(n.to_be_bytes()).unwrap(),
            Some(value(n).into_bytes())
        );
    }
    assert!(db.check_integrity().unwrap().is_ok());
}
