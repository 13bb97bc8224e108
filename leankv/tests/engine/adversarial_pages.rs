//! Pages that carry a valid checksum but lie: stale copies, cycles, frame references, absurd
//! superblocks. Every read through them ends in `Error::Corruption` (never a hang, a panic or
//! a pair that was not written).
//!
//! Regressions: a leaf whose upper fence did not advance (a stale page) made scans loop
//! forever; a superblock whose page count times page size overflowed panicked at open.

use leankv::{Db, Error, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

const PAGE: usize = 4096;
const PAGE_FILE: &str = "leankv.pages";
/// Node header fields (see `btree/node.rs`).
const LEVEL: usize = 26;
const UPPER_SWIP: usize = 48;
const LEAF: u8 = 1;
const INNER: u8 = 2;

fn options() -> Options {
    Options::default()
        .page_size(PAGE)
        .pool_size(64 * (PAGE + 512))
}

/// A closed database with one tree of `count` keys over several levels, and its model.
fn database(dir: &Path, count: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, options()).unwrap();
    let tree = db.open_tree("t").unwrap();
    let mut model = BTreeMap::new();
    for n in 0..count {
        let (key, value) = (format!("key{n:06}").into_bytes(), vec![n as u8; 40]);
        tree.insert(&key, &value).unwrap();
        model.insert(key, value);
    }
    drop(tree);
    db.close().unwrap();
    model
}

fn pages(dir: &Path) -> Vec<Vec<u8>> {
    std::fs::read(dir.join(PAGE_FILE))
        .unwrap()
        .chunks(PAGE)
        .map(<[u8]>::to_vec)
        .collect()
}

/// Writes `image` as page `page_id` with its id and a valid checksum.
fn write_sealed(dir: &Path, page_id: usize, mut image: Vec<u8>) {
    image[8..16].copy_from_slice(&(page_id as u64).to_le_bytes());
    let checksum = crc32c::crc32c(&image[4..]);
    image[..4].copy_from_slice(&checksum.to_le_bytes());
    let mut file = std::fs::read(dir.join(PAGE_FILE)).unwrap();
    file[page_id * PAGE..(page_id + 1) * PAGE].copy_from_slice(&image);
    std::fs::write(dir.join(PAGE_FILE), file).unwrap();
}

fn page_ids_of_type(pages: &[Vec<u8>], page_type: u8) -> Vec<usize> {
    (1..pages.len())
        .filter(|&id| pages[id][4] == page_type)
        .collect()
}

/// Runs `case` on a thread and fails the test if it does not finish in a minute (a hang).
fn within_a_minute<T: Send + 'static>(case: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(case()));
    receiver
        .recv_timeout(Duration::from_secs(60))
        .expect("the case hung (or panicked)")
}

/// Reads everything through every path; returns what each reported. Pairs returned are
/// checked against the model as they come: an invented pair fails the test.
fn read_everything(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<leankv::Result<()>> {
    let db = match Db::open(dir, options()) {
        Ok(db) => db,
        Err(error) => return vec![Err(error)],
    };
    let tree = match db.open_tree("t") {
        Ok(tree) => tree,
        Err(error) => return vec![Err(error)],
    };
    let mut outcomes = Vec::new();
    let scanned = tree.iter().try_for_each(|item| {
        let (key, value) = item?;
        assert_eq!(model.get(&key), Some(&value), "invented pair for {key:?}");
        Ok(())
    });
    outcomes.push(scanned);
    let visited = tree.scan::<&[u8], _>(.., |key, value| {
        assert_eq!(model.get(key).map(Vec::as_slice), Some(value), "invented");
        true
    });
    outcomes.push(visited);
    for (key, value) in model.iter().step_by(7) {
        outcomes.push(tree.get(key).map(|found| {
            if let Some(found) = found {
                assert_eq!(&found, value, "invented value for {key:?}");
            }
        }));
    }
    outcomes.push(db.check_integrity().map(|report| {
        assert!(!report.is_ok(), "damage not reported");
    }));
    outcomes
}

fn corruptions(outcomes: &[leankv::Result<()>]) -> usize {
    outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Err(Error::Corruption { .. })))
        .count()
}

#[test]
fn a_stale_leaf_whose_fence_does_not_advance_ends_scans_with_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let model = database(dir.path(), 3_000);
    let pages = pages(dir.path());
    let leaves = page_ids_of_type(&pages, LEAF);
    assert!(leaves.len() > 4);
    // Each leaf in turn takes the contents of another one: its fences then name a range its
    // parent does not route to it (a scan arriving there would be sent back, forever).
    for (target, source) in [(leaves[1], leaves[0]), (leaves[2], leaves[3])] {
        let copy = tempfile::tempdir().unwrap();
        for entry in ["LOCK", PAGE_FILE] {
            std::fs::copy(dir.path().join(entry), copy.path().join(entry)).unwrap();
        }
        write_sealed(copy.path(), target, pages[source].clone());
        let path = copy.path().to_path_buf();
        let model = model.clone();
        let outcomes = within_a_minute(move || read_everything(&path, &model));
        assert!(outcomes[0].is_err() && outcomes[1].is_err(), "{outcomes:?}");
        assert!(corruptions(&outcomes) >= 2, "{outcomes:?}");
    }
}

#[test]
fn an_inner_node_that_refers_to_itself_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let model = database(dir.path(), 3_000);
    let pages = pages(dir.path());
    for inner in page_ids_of_type(&pages, INNER) {
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join(PAGE_FILE), copy.path().join(PAGE_FILE)).unwrap();
        let mut image = pages[inner].clone();
        // The upper child becomes the node itself (an unswizzled swip: page id << 1 | 1).
        image[UPPER_SWIP..UPPER_SWIP + 8].copy_from_slice(&((inner as u64) << 1 | 1).to_le_bytes());
        write_sealed(copy.path(), inner, image);
        let path = copy.path().to_path_buf();
        let model = model.clone();
        let outcomes = within_a_minute(move || read_everything(&path, &model));
        assert!(corruptions(&outcomes) >= 2, "page {inner}: {outcomes:?}");
    }
}

#[test]
fn frame_references_and_bad_levels_on_disk_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let model = database(dir.path(), 3_000);
    let pages = pages(dir.path());
    let inner = page_ids_of_type(&pages, INNER)[0];
    type Edit = fn(&mut Vec<u8>);
    let edits: [(&str, Edit); 3] = [
        ("a swizzled swip (frame 3)", |image| {
            image[UPPER_SWIP..UPPER_SWIP + 8].copy_from_slice(&(4u64 << 1).to_le_bytes())
        }),
        ("a level far too high", |image| {
            image[LEVEL..LEVEL + 2].copy_from_slice(&1000u16.to_le_bytes())
        }),
        ("a level one too high", |image| {
            let level = u16::from_le_bytes([image[LEVEL], image[LEVEL + 1]]);
            image[LEVEL..LEVEL + 2].copy_from_slice(&(level + 1).to_le_bytes())
        }),
    ];
    for (what, edit) in edits {
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join(PAGE_FILE), copy.path().join(PAGE_FILE)).unwrap();
        let mut image = pages[inner].clone();
        edit(&mut image);
        write_sealed(copy.path(), inner, image);
        let path = copy.path().to_path_buf();
        let model = model.clone();
        let outcomes = within_a_minute(move || read_everything(&path, &model));
        assert!(corruptions(&outcomes) >= 1, "{what}: {outcomes:?}");
    }
}

#[test]
fn a_superblock_whose_page_count_overflows_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    database(dir.path(), 10);
    for page_count in [u64::MAX, u64::MAX / 4096 + 1, 1 << 62, 1 << 52] {
        let mut file = std::fs::read(dir.path().join(PAGE_FILE)).unwrap();
        file[28..36].copy_from_slice(&page_count.to_le_bytes());
        let checksum = crc32c::crc32c(&file[4..512]);
        file[..4].copy_from_slice(&checksum.to_le_bytes());
        let copy = tempfile::tempdir().unwrap();
        std::fs::write(copy.path().join(PAGE_FILE), &file).unwrap();
        match Db::open(copy.path(), options()) {
            Err(Error::Corruption { page_id: 0, .. }) => {}
            other => panic!("page count {page_count}: {:?}", other.map(|_| ())),
        }
    }
}
