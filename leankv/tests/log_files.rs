//! The log's disk use after a clean close: each log file keeps at most 64 MiB (what the next
//! life overwrites first, so that its syncs need no file-system metadata), the rest of its
//! space is released, and the database reopens with everything in it.

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
