//! Many trees on a small pool: roots of trees no handle uses leave the pool like any page.
//!
//! Regression: tree roots stayed in the pool for as long as the database was open, so opening
//! more trees than the pool has frames ended in `PoolExhausted`.

use leankv::{Db, Options};

const TREES: usize = 2_000;
const KEYS: u32 = 50;
const FRAMES: usize = 64;

fn options() -> Options {
    Options::default().pool_size(FRAMES * (leankv::DEFAULT_PAGE_SIZE + 512))
}

fn name(tree: usize) -> String {
    format!("tree-{tree:05}")
}

fn value(tree: usize, key: u32) -> Vec<u8> {
    format!("{tree}/{key}").into_bytes()
}

fn check_all(db: &Db) {
    for tree in 0..TREES {
        let handle = db.open_tree(&name(tree)).unwrap();
        let pairs: Vec<_> = handle.iter().map(Result::unwrap).collect();
        assert_eq!(pairs.len(), KEYS as usize, "tree {tree}");
        for (key, found) in (0..KEYS).zip(&pairs) {
            assert_eq!(found.0, key.to_be_bytes());
            assert_eq!(found.1, value(tree, key));
        }
    }
}

#[test]
fn two_thousand_trees_on_a_pool_of_64_frames() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for tree in 0..TREES {
        let handle = db.open_tree(&name(tree)).unwrap();
        for key in 0..KEYS {
            handle.insert(key.to_be_bytes(), value(tree, key)).unwrap();
        }
    }
    assert!(db.stats().frames_in_use <= FRAMES);
    check_all(&db);
    // A handle kept open keeps its tree usable while the others come and go.
    let kept = db.open_tree(&name(7)).unwrap();
    check_all(&db);
    assert_eq!(kept.get(3u32.to_be_bytes()).unwrap(), Some(value(7, 3)));
    drop(kept);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.tree_names().unwrap().len(), TREES);
    check_all(&db);
    assert!(db.check_integrity().unwrap().is_ok());
}
