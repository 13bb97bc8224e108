//! Scans of data larger than the pool: read-ahead through the prefetch threads, and hinting
//! (leaves a scan brings in go straight to the cooling stage), which must leave a hot working
//! set in memory while a scan four times the pool runs through.

use crate::common::{key, open, small, value_for};
use leankv::{Db, Tree};

const POOL_FRAMES: usize = 256;

/// Fills `tree` with `count` keys of about 100-byte values; returns the keys' numbers.
fn fill(tree: &Tree, first: u64, count: u64) {
    for n in first..first + count {
        tree.insert(key(n), value_for(n, 0, 200)).unwrap();
    }
}

/// Looks every key of the hot tree up; returns the page reads this took.
fn read_hot(db: &Db, hot: &Tree, count: u64) -> u64 {
    let before = db.stats().page_reads;
    for n in 0..count {
        assert_eq!(hot.get(key(n)).unwrap(), Some(value_for(n, 0, 200)));
    }
    db.stats().page_reads - before
}

#[test]
fn a_scan_four_times_the_pool_leaves_the_hot_tree_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let hot_keys = 2_000; // about a third of the pool
    let big_keys = 30_000; // about five times the pool
    {
        let db = open(dir.path(), small(POOL_FRAMES));
        fill(&db.open_tree("hot").unwrap(), 0, hot_keys);
        fill(&db.open_tree("big").unwrap(), 0, big_keys);
        db.close().unwrap();
    }
    let db = open(dir.path(), small(POOL_FRAMES));
    let (hot, big) = (db.open_tree("hot").unwrap(), db.open_tree("big").unwrap());
    let cold_reads = read_hot(&db, &hot, hot_keys);
    assert!(
        cold_reads > 30,
        "the hot tree must span many pages: {cold_reads}"
    );
    // Warm until a whole pass needs no read.
    for _ in 0..10 {
        if read_hot(&db, &hot, hot_keys) == 0 {
            break;
        }
    }
    let before = db.stats();
    let scanned = big
        .iter()
        .try_fold(0u64, |count, item| item.map(|_| count + 1));
    assert_eq!(scanned.unwrap(), big_keys);
    let after = db.stats();
    let scan_reads = after.page_reads - before.page_reads;
    assert!(
        scan_reads as usize > 3 * POOL_FRAMES,
        "the scan must read far more than the pool holds: {scan_reads}"
    );
    assert!(after.scan_cooled > before.scan_cooled);
    // Without hinting every page of the hot tree is read again. With it, the hot tree loses
    // only the pages that random cooling happens to pick while the scan runs (the tree is
    // not touched then): 4 to 15 of 61 over many runs, hence the margin.
    let reads_after_scan = read_hot(&db, &hot, hot_keys);
    assert!(
        reads_after_scan * 3 <= cold_reads,
        "the scan pushed the hot tree out: {reads_after_scan} of its {cold_reads} pages were \
         read again"
    );
    // Point operations still bring pages in as hot: a second pass reads nothing.
    assert_eq!(read_hot(&db, &hot, hot_keys), 0);
}

#[test]
fn a_cold_scan_reads_ahead_and_returns_everything_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 60_000;
    {
        let db = open(dir.path(), small(POOL_FRAMES));
        fill(&db.open_tree("big").unwrap(), 0, keys);
        db.close().unwrap();
    }
    for depth in [leankv::DEFAULT_SCAN_PREFETCH, 0] {
        let db = open(dir.path(), small(POOL_FRAMES).scan_prefetch(depth));
        let big = db.open_tree("big").unwrap();
        let mut expected = 0;
        for item in big.iter() {
            let (found, value) = item.unwrap();
            assert_eq!(found, key(expected));
            assert_eq!(value, value_for(expected, 0, 200));
            expected += 1;
        }
        assert_eq!(expected, keys);
        let stats = db.stats();
        if depth == 0 {
            assert_eq!(stats.prefetch_reads, 0);
        } else {
            assert!(
                stats.prefetch_reads * 2 > stats.page_reads,
                "most leaves should arrive by read-ahead: {} of {} reads",
                stats.prefetch_reads,
                stats.page_reads
            );
        }
        // Short scans past the pool's contents read ahead little or nothing.
        let before = db.stats().prefetch_reads;
        for n in (0..keys).step_by(5_000) {
            assert_eq!(big.range(key(n)..).take(5).count(), 5);
        }
        assert!(db.stats().prefetch_reads - before <= 12 * 4);
        db.close().unwrap();
    }
}

/// Keys inserted in ascending order (appends, bulk loads) fill their leaves instead of leaving
/// each split half empty: the pages used stay close to the data's size, with or without
/// eviction during the load.
#[test]
fn ascending_inserts_fill_their_leaves() {
    for (page_size, frames) in [(4096, 4_096), (16_384, 4_096), (16_384, 64)] {
        let dir = tempfile::tempdir().unwrap();
        let options = leankv::Options::default()
            .page_size(page_size)
            .pool_size(frames * (page_size + 512));
        let db = open(dir.path(), options);
        let tree = db.open_tree("log").unwrap();
        let count = 40_000u64;
        for n in 0..count {
            tree.insert(n.to_be_bytes(), [7u8; 120]).unwrap();
        }
        let report = db.check_integrity().unwrap();
        assert!(report.is_ok(), "{report}");
        // Entries of 8 + 120 bytes plus an 8-byte slot each; half-full leaves would need
        // about twice the pages.
        let data_pages = count * (8 + 120 + 8) / page_size as u64;
        assert!(
            report.pages < data_pages * 115 / 100,
            "{} pages for {data_pages} pages of data ({page_size}-byte pages, {frames} frames)",
            report.pages
        );
        assert_eq!(tree.iter().count() as u64, count);
    }
}

/// While the pool has room, a scan replaces nothing: the pages it reads stay hot, so a
/// warm-up scan warms up.
#[test]
fn scans_into_a_pool_with_room_keep_their_pages_hot() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 20_000;
    {
        let db = open(dir.path(), small(POOL_FRAMES));
        fill(&db.open_tree("data").unwrap(), 0, keys);
        db.close().unwrap();
    }
    let db = open(dir.path(), small(POOL_FRAMES * 16));
    let tree = db.open_tree("data").unwrap();
    assert_eq!(tree.iter().count() as u64, keys);
    let stats = db.stats();
    assert!(
        stats.page_reads > 100 && stats.prefetch_reads > 0,
        "{stats:?}"
    );
    assert_eq!(stats.scan_cooled, 0);
    assert_eq!(read_hot(&db, &tree, keys), 0);
    assert_eq!(
        db.stats().cooling_hits,
        stats.cooling_hits,
        "lookups after the scan found leaves cooling"
    );
}
