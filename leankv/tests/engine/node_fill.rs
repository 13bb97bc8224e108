//! How full splits leave the leaves: keys that arrive in order stay in full nodes, whether
//! they arrive at the end of the tree or at an append point in its middle.

use crate::common::{open, small};

const GROUPS: u8 = 10;

/// Row sizes (values of 4 KiB pages) and keys per group: small rows, a hundred keys to a
/// leaf, and large ones, five to a leaf (TPC-C's customers).
const ROWS: [(usize, u32); 2] = [(100, 3_000), (700, 600)];

/// Pages the leaves of a database take after `keys` are inserted in that order with values of
/// `value_len` bytes.
fn leaf_pages_after(keys: impl Iterator<Item = [u8; 5]>, value_len: usize) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(4096));
    let tree = db.open_tree("t").unwrap();
    let mut inserted = 0;
    for key in keys {
        tree.insert(key, vec![7u8; value_len]).unwrap();
        inserted += 1;
    }
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(tree.len().unwrap(), inserted);
    let space = report
        .spaces
        .iter()
        .find(|space| space.name == "t")
        .unwrap();
    assert_eq!(space.entries, inserted);
    space.leaf_pages
}

/// A key of `group` (its first byte) with sequence number `n`.
fn key(group: u8, n: u32) -> [u8; 5] {
    let mut key = [group; 5];
    key[1..].copy_from_slice(&n.to_be_bytes());
    key
}

/// Ten groups of keys, each growing at its own end, as TPC-C's districts grow their orders:
/// every group but the last appends in the middle of the tree. Cutting a full leaf where its
/// keys arrive keeps the leaves behind each append point full, as appends at the tree's end
/// are (halving them would leave those leaves half empty for good: ~1.5x the pages).
#[test]
fn keys_arriving_in_order_inside_the_tree_fill_their_leaves() {
    for (value_len, per_group) in ROWS {
        let sorted = leaf_pages_after(
            (0..GROUPS).flat_map(|g| (0..per_group).map(move |n| key(g, n))),
            value_len,
        );
        let interleaved = leaf_pages_after(
            (0..per_group).flat_map(|n| (0..GROUPS).map(move |g| key(g, n))),
            value_len,
        );
        assert!(
            interleaved * 100 <= sorted * 105,
            "{value_len}-byte values: {interleaved} leaves for groups growing side by side, \
             {sorted} for the same keys in order"
        );
    }
}

/// Keys inserted two by two at random places (each pair in order) fill the leaves as random
/// single keys do: a pair's second key arrives right after the first, but that is no append
/// point, and its cuts must not leave nodes emptier than splitting by size does.
#[test]
fn keys_inserted_in_pairs_at_random_places_fill_as_random_keys() {
    for (value_len, per_group) in ROWS {
        let mut rng = fastrand::Rng::with_seed(3);
        let numbers: Vec<u32> = (0..u32::from(GROUPS) * per_group / 2)
            .map(|i| i.wrapping_mul(2_654_435_761) << 1)
            .collect();
        let singles = {
            let mut shuffled: Vec<u32> = numbers.iter().flat_map(|&n| [n, n + 1]).collect();
            rng.shuffle(&mut shuffled);
            leaf_pages_after(shuffled.into_iter().map(|n| key(0, n)), value_len)
        };
        let pairs = leaf_pages_after(
            numbers.iter().flat_map(|&n| [key(0, n), key(0, n + 1)]),
            value_len,
        );
        assert!(
            pairs * 100 <= singles * 105,
            "{value_len}-byte values: {pairs} leaves for pairs, {singles} for the same keys \
             one by one"
        );
    }
}

/// The integrity check's space report accounts for every page of the file: each tree's
/// leaves, inner nodes and large values, and the free pages, with the leaves' bytes in use.
#[test]
fn the_space_report_accounts_for_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), small(4096));
    let tree = db.open_tree("t").unwrap();
    for n in 0..5_000u32 {
        tree.insert(key(1, n), [7u8; 100]).unwrap();
    }
    // Large values take pages of their own, and a removed range leaves free pages.
    let large = db.open_tree("large").unwrap();
    for n in 0..10u32 {
        large.insert(n.to_be_bytes(), vec![3u8; 20_000]).unwrap();
    }
    tree.remove_range(key(1, 4_000)..).unwrap();
    let report = db.check_integrity().unwrap();
    assert!(report.is_ok(), "{report}");
    let stats = db.stats();
    let names: Vec<&str> = report.spaces.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["<catalog>", "large", "t"]);
    let tree_pages: u64 = report.spaces.iter().map(|s| s.pages()).sum();
    assert_eq!(
        tree_pages + stats.free_pages + 1,
        stats.page_count,
        "the superblock is page 0"
    );
    let nodes: u64 = report
        .spaces
        .iter()
        .map(|s| s.leaf_pages + s.inner_pages)
        .sum();
    assert_eq!(nodes, report.pages);
    let [catalog, large, t] = &report.spaces[..] else {
        unreachable!()
    };
    assert_eq!((catalog.height, catalog.entries), (1, 2));
    assert_eq!(large.entries, 10);
    assert!(large.large_value_pages >= 10 * 20_000 / 4096, "{large:?}");
    assert_eq!(t.entries, 4_000);
    assert_eq!(t.large_value_pages, 0);
    assert!(t.height >= 2 && t.inner_pages >= 1, "{t:?}");
    assert_eq!(t.leaf_bytes, t.leaf_pages * 4096);
    // Keys inserted in order fill their leaves (the range removal left one partly empty).
    assert!(t.leaf_fill() > 0.9, "{t:?}");
}
