//! `check` on sound and damaged databases, and `compact`.

mod common;

use common::{leankv, load_keys, put, scratch, stdout_of, text_of};
use predicates::prelude::*;
use std::path::Path;

const PAGE_SIZE: u64 = 16384;

/// Overwrites part of the last page of the page file (a leaf of the last tree loaded).
fn damage_last_page(db: &Path) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(db.join("leankv.pages"))
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.write_all_at(&[0xa5; 64], len - PAGE_SIZE + 5000)
        .unwrap();
}

#[test]
fn check_passes_a_sound_database() {
    let s = scratch();
    load_keys(&s.db, 3000);
    put(&s.db, "other", "k", "v");
    leankv()
        .arg("check")
        .arg(&s.db)
        .assert()
        .success()
        .stdout(predicate::str::contains("no problems"));
}

#[test]
fn check_reports_damage_with_status_3() {
    let s = scratch();
    load_keys(&s.db, 3000);
    damage_last_page(&s.db);
    leankv()
        .arg("check")
        .arg(&s.db)
        .assert()
        .code(3)
        .stdout(predicate::str::contains("1 problem(s)"))
        .stdout(predicate::str::contains("checksum mismatch"))
        .stderr(predicate::str::contains("is damaged"));
    // Other commands that meet the damage say so with the same status.
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .assert()
        .code(3)
        .stderr(predicate::str::contains("corrupt page"));
}

#[test]
fn a_file_that_is_no_database_is_a_failure() {
    let s = scratch();
    std::fs::create_dir(&s.db).unwrap();
    std::fs::write(s.db.join("leankv.pages"), vec![7u8; 8192]).unwrap();
    leankv()
        .arg("check")
        .arg(&s.db)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("not a leankv database"));
}

fn page_file_len(db: &Path) -> u64 {
    std::fs::metadata(db.join("leankv.pages")).unwrap().len()
}

#[test]
fn compact_gives_the_free_pages_back_and_keeps_every_pair() {
    let s = scratch();
    load_keys(&s.db, 20_000);
    put(&s.db, "empty", "k", "v");
    leankv()
        .arg("del")
        .arg(&s.db)
        .args(["empty", "k"])
        .assert()
        .success();
    // 90% of the keys go.
    leankv()
        .arg("del")
        .arg(&s.db)
        .args(["t", "--from", "key002000"])
        .assert()
        .success();
    let before = page_file_len(&s.db);
    let dump_before = stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db));
    let report = text_of(leankv().arg("compact").arg(&s.db));
    assert!(report.contains("page file"), "{report}");
    let after = page_file_len(&s.db);
    assert!(after * 5 < before, "{before} -> {after}: {report}");
    assert!(report.contains(&format!("{before} -> ")), "{report}");
    let dump_after = stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db));
    assert!(dump_before == dump_after, "compaction changed the contents");
    leankv().arg("check").arg(&s.db).assert().success();
    let stat = text_of(leankv().args(["stat", "--json"]).arg(&s.db));
    let stat: serde_json::Value = serde_json::from_str(&stat).unwrap();
    assert_eq!(stat["free_pages"], 0, "{stat}");
    // Nothing is left beside the database.
    let beside: Vec<_> = std::fs::read_dir(s.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["db"]);
}

#[test]
fn compact_keeps_a_custom_page_size_and_follows_links() {
    let s = scratch();
    // A database with 4 KiB pages, made through the library.
    let db = leankv::Db::open(
        &s.db,
        leankv::Options::default()
            .pool_size(8 << 20)
            .page_size(4096),
    )
    .unwrap();
    let tree = db.open_tree("t").unwrap();
    for i in 0..2000u32 {
        tree.insert(i.to_be_bytes(), [7u8; 50]).unwrap();
    }
    tree.remove_range(100u32.to_be_bytes()..).unwrap();
    db.close().unwrap();
    let link = s.root.path().join("link");
    std::os::unix::fs::symlink(&s.db, &link).unwrap();
    leankv().arg("compact").arg(&link).assert().success();
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    let stat = text_of(leankv().args(["stat", "--json"]).arg(&s.db));
    let stat: serde_json::Value = serde_json::from_str(&stat).unwrap();
    assert_eq!(stat["page_size"], 4096, "{stat}");
    assert_eq!(stat["trees"][0]["keys"], 100, "{stat}");
}

#[test]
fn compact_refuses_a_directory_with_other_files() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    std::fs::write(s.db.join("notes.txt"), "mine").unwrap();
    leankv()
        .arg("compact")
        .arg(&s.db)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("notes.txt"));
    assert!(s.db.join("notes.txt").exists());
}

#[test]
fn compact_removes_what_an_interrupted_compaction_left() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    // As a crash between the swap and the removal leaves it: a whole old copy.
    let leftover = s.root.path().join(".db.compact-12345");
    std::fs::create_dir(&leftover).unwrap();
    for name in ["LOCK", "leankv.pages", "leankv.wal-0"] {
        std::fs::copy(s.db.join(name), leftover.join(name)).unwrap();
    }
    // Not one of ours: another name, or other files in it.
    let unrelated = s.root.path().join(".db.compact-12345x");
    std::fs::create_dir(&unrelated).unwrap();
    leankv()
        .arg("compact")
        .arg(&s.db)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "left by an interrupted compaction",
        ));
    assert!(!leftover.exists());
    assert!(unrelated.exists());
    leankv()
        .arg("get")
        .arg(&s.db)
        .args(["t", "k"])
        .assert()
        .success()
        .stdout("v");
}

#[test]
fn compact_of_a_database_in_use_changes_nothing() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    let db = leankv::Db::open(&s.db, leankv::Options::default().pool_size(8 << 20)).unwrap();
    leankv().arg("compact").arg(&s.db).assert().code(5);
    db.close().unwrap();
    assert_eq!(std::fs::read_dir(s.root.path()).unwrap().count(), 1);
}

#[test]
fn a_compaction_killed_at_any_step_loses_nothing() {
    for step in ["copied", "synced", "swapped", "closed"] {
        let s = scratch();
        load_keys(&s.db, 3000);
        leankv()
            .arg("del")
            .arg(&s.db)
            .args(["t", "--from", "key000300"])
            .assert()
            .success();
        let dump = || stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db));
        let before = dump();
        let killed = leankv()
            .arg("compact")
            .arg(&s.db)
            .env("LEANKV_CLI_TEST_CRASH_AT", step)
            // A core dump, where they are on, lands in the temporary directory.
            .current_dir(s.root.path())
            .output()
            .unwrap();
        assert!(!killed.status.success(), "{step}: not killed");
        assert!(before == dump(), "{step}: the contents changed");
        leankv().arg("check").arg(&s.db).assert().success();
        // The next compaction removes what the killed one left and does its work.
        leankv().arg("compact").arg(&s.db).assert().success();
        assert!(before == dump(), "{step}: the contents changed");
        let leftovers = std::fs::read_dir(s.root.path())
            .unwrap()
            .filter(|entry| {
                let name = entry.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with(".db.compact-")
            })
            .count();
        assert_eq!(leftovers, 0, "{step}: a leftover beside the database");
    }
}
