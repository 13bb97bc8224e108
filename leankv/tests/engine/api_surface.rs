//! What an application sees of the public types beyond their operations: `Debug` output that
//! says which database, tree and range it is looking at.

use leankv::{Db, Options};

#[test]
fn db_tree_range_and_options_describe_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default().pool_size(8 << 20);
    assert!(format!("{options:?}").starts_with("Options {"));
    let db = Db::open(dir.path(), options).unwrap();
    let users = db.open_tree("users").unwrap();
    users.insert(b"ada", b"lovelace").unwrap();

    let db_text = format!("{db:?}");
    assert!(db_text.starts_with("Db {"), "{db_text}");
    assert!(db_text.contains("open_trees: [\"users\"]"), "{db_text}");
    assert!(db_text.contains(&format!("{:?}", dir.path())), "{db_text}");

    let tree_text = format!("{users:?}");
    assert!(
        tree_text.starts_with("Tree { name: \"users\""),
        "{tree_text}"
    );

    let mut range = users.range(b"a\x00".to_vec()..b"b".to_vec());
    let range_text = format!("{range:?}");
    assert!(range_text.contains("tree: \"users\""), "{range_text}");
    assert!(range_text.contains("Included(a\\x00)"), "{range_text}");
    assert!(range_text.contains("Excluded(b)"), "{range_text}");
    assert!(range_text.contains("finished: false"), "{range_text}");
    assert_eq!(range.next().unwrap().unwrap().0, b"ada");
    assert!(range.next().is_none());
    assert!(format!("{range:?}").contains("finished: true"));
}
