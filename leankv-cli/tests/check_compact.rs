//! `check` on sound and damaged databases, and `compact`.

mod common;

use common::{damage_last_page, leankv, load_keys, on, put, scratch, stdout_of, text_of};
use predicates::prelude::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

#[test]
fn stat_with_pages_reports_each_trees_room() {
    let s = scratch();
    load_keys(&s.db, 3000);
    put(&s.db, "other", "k", "v");
    let plain: serde_json::Value =
        serde_json::from_str(&text_of(leankv().args(["stat", "--json"]).arg(&s.db))).unwrap();
    assert!(plain["trees"][0].get("pages").is_none(), "{plain}");
    let stat = text_of(leankv().args(["stat", "--json", "--pages"]).arg(&s.db));
    let stat: serde_json::Value = serde_json::from_str(&stat).unwrap();
    let trees = stat["trees"].as_array().unwrap();
    let room =
        |name: &str| trees.iter().find(|tree| tree["name"] == name).unwrap()["pages"].clone();
    let (other, loaded) = (room("other"), room("t"));
    assert_eq!(other["height"], 1, "{stat}");
    assert_eq!(other["leaf"], 1, "{stat}");
    assert_eq!(other["inner"], 0, "{stat}");
    assert!(loaded["height"].as_u64().unwrap() >= 2, "{stat}");
    assert!(loaded["leaf"].as_u64().unwrap() >= 2, "{stat}");
    assert!(loaded["inner"].as_u64().unwrap() >= 1, "{stat}");
    assert_eq!(loaded["large_value"], 0, "{stat}");
    let fill = loaded["leaf_fill"].as_f64().unwrap();
    assert!(fill > 0.0 && fill <= 1.0, "{stat}");
    on("stat", &s.db)
        .arg("--pages")
        .assert()
        .success()
        .stdout(predicate::str::contains("% full").and(predicate::str::contains("height")));
}

#[test]
fn check_passes_a_sound_database() {
    let s = scratch();
    load_keys(&s.db, 3000);
    put(&s.db, "other", "k", "v");
    on("check", &s.db)
        .assert()
        .success()
        .stdout(predicate::str::contains("no problems"));
}

#[test]
fn check_reports_damage_with_status_3() {
    let s = scratch();
    load_keys(&s.db, 3000);
    damage_last_page(&s.db);
    on("check", &s.db)
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
    on("check", &s.db)
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
    on("del", &s.db).args(["empty", "k"]).assert().success();
    // 90% of the keys go.
    on("del", &s.db)
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
    on("compact", &s.db)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("notes.txt"));
    assert!(s.db.join("notes.txt").exists());
}

/// A work directory as a compaction leaves it: the marker, and `db` holding the database
/// files of `from` (a whole old copy, as a crash between the swap and the removal leaves it).
fn marked_leftover(path: &Path, from: &Path) {
    std::fs::create_dir(path).unwrap();
    std::fs::write(path.join("COMPACTING"), "leankv compact of db\n").unwrap();
    std::fs::create_dir(path.join("db")).unwrap();
    for name in ["LOCK", "leankv.pages", "leankv.wal-0"] {
        std::fs::copy(from.join(name), path.join("db").join(name)).unwrap();
    }
}

#[test]
fn compact_removes_only_the_leftovers_it_made_and_nobody_uses() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    let root = s.root.path();
    // Removed: a marked leftover whose database nobody has open, and an empty one (a run
    // stopped right after creating it).
    let leftover = root.join(".db.compact-12345");
    marked_leftover(&leftover, &s.db);
    let empty = root.join(".db.compact-12");
    std::fs::create_dir(&empty).unwrap();
    // Kept: a database of that name that compact did not make (no marker), another process's
    // database that is open, a marked one with other files in it, another name.
    let foreign = root.join(".db.compact-777");
    put(&foreign, "mine", "key", "value");
    let open = root.join(".db.compact-888");
    marked_leftover(&open, &s.db);
    let held = leankv::Db::open(
        open.join("db"),
        leankv::Options::default().pool_size(8 << 20),
    )
    .unwrap();
    let cluttered = root.join(".db.compact-999");
    marked_leftover(&cluttered, &s.db);
    std::fs::write(cluttered.join("db").join("notes.txt"), "mine").unwrap();
    let unrelated = root.join(".db.compact-12345x");
    std::fs::create_dir(&unrelated).unwrap();
    on("compact", &s.db)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "left by an interrupted compaction",
        ))
        .stderr(predicate::str::contains("has no COMPACTING file"))
        .stderr(predicate::str::contains("open in another process"))
        .stderr(predicate::str::contains("notes.txt"));
    assert!(!leftover.exists());
    assert!(!empty.exists());
    held.close().unwrap();
    assert!(open.join("db").join("leankv.pages").exists());
    assert!(cluttered.join("db").join("notes.txt").exists());
    assert!(cluttered.join("db").join("leankv.pages").exists());
    assert!(unrelated.exists());
    leankv()
        .arg("get")
        .arg(&foreign)
        .args(["mine", "key"])
        .assert()
        .success()
        .stdout("value");
    on("get", &s.db)
        .args(["t", "k"])
        .assert()
        .success()
        .stdout("v");
    // The one that was open goes once it is closed.
    leankv().arg("compact").arg(&s.db).assert().success();
    assert!(!open.exists());
}

#[test]
fn leftovers_are_matched_on_the_bytes_of_the_name() {
    let s = scratch();
    let root = s.root.path();
    // A name that is not UTF-8 (its lossy form would match other names' leftovers too).
    let db = root.join(OsStr::from_bytes(b"db\xff"));
    put(&db, "t", "k", "v");
    let ours = root.join(OsStr::from_bytes(b".db\xff.compact-1"));
    marked_leftover(&ours, &db);
    // Another database's (`db\xfe`): a marked leftover, and one in the layout of old versions
    // (the database files directly in it).
    let theirs = root.join(OsStr::from_bytes(b".db\xfe.compact-1"));
    marked_leftover(&theirs, &db);
    let theirs_flat = root.join(OsStr::from_bytes(b".db\xfe.compact-2"));
    std::fs::create_dir(&theirs_flat).unwrap();
    for name in ["LOCK", "leankv.pages", "leankv.wal-0"] {
        std::fs::copy(db.join(name), theirs_flat.join(name)).unwrap();
    }
    leankv().arg("compact").arg(&db).assert().success();
    assert!(theirs_flat.join("leankv.pages").exists());
    assert!(theirs.join("db").join("leankv.pages").exists());
    assert!(!ours.exists());
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
    for step in [
        "marked", "copied", "synced", "swapped", "closed", "removing",
    ] {
        let s = scratch();
        load_keys(&s.db, 3000);
        on("del", &s.db)
            .args(["t", "--from", "key000300"])
            .assert()
            .success();
        let dump = || stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db));
        let before = dump();
        let killed = on("compact", &s.db)
            .env("LEANKV_CLI_TEST_CRASH_AT", step)
            // A core dump, where they are on, lands in the temporary directory.
            .current_dir(s.root.path())
            .output()
            .unwrap();
        assert!(!killed.status.success(), "{step}: not killed");
        // The live directory never carries the marker; the leftover always does.
        assert!(
            !s.db.join("COMPACTING").exists(),
            "{step}: marker in the database"
        );
        let left: Vec<_> = std::fs::read_dir(s.root.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path != &s.db && !path.ends_with("core"))
            .collect();
        assert_eq!(left.len(), 1, "{step}: {left:?}");
        assert!(
            left[0].join("COMPACTING").exists(),
            "{step}: unmarked leftover"
        );
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

#[test]
fn compact_keeps_the_permissions_of_the_files() {
    let s = scratch();
    load_keys(&s.db, 3000);
    let modes = [
        ("", 0o750),
        ("leankv.pages", 0o600),
        ("leankv.wal-0", 0o640),
        ("leankv.wal-1", 0o604),
        ("LOCK", 0o400),
    ];
    for (name, mode) in modes {
        std::fs::set_permissions(s.db.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    leankv().arg("compact").arg(&s.db).assert().success();
    for (name, mode) in modes {
        let meta = std::fs::metadata(s.db.join(name)).unwrap();
        assert_eq!(meta.mode() & 0o7777, mode, "{name:?}");
    }
}

#[test]
fn compact_keeps_the_owner_and_group_of_the_files() {
    if !common::running_as_root() {
        eprintln!("skipped: changing owners needs root");
        return;
    }
    let s = scratch();
    load_keys(&s.db, 100);
    let files = ["", "leankv.pages", "leankv.wal-0", "leankv.wal-1", "LOCK"];
    for name in files {
        std::os::unix::fs::chown(s.db.join(name), Some(65534), Some(65533)).unwrap();
    }
    std::os::unix::fs::chown(s.db.join("LOCK"), Some(65532), Some(65531)).unwrap();
    leankv().arg("compact").arg(&s.db).assert().success();
    for name in files {
        let meta = std::fs::metadata(s.db.join(name)).unwrap();
        let expected = if name == "LOCK" {
            (65532, 65531)
        } else {
            (65534, 65533)
        };
        assert_eq!((meta.uid(), meta.gid()), expected, "{name:?}");
    }
}

#[test]
fn compact_refuses_when_it_cannot_keep_the_owner() {
    use std::os::unix::process::CommandExt;
    if !common::running_as_root() {
        eprintln!("skipped: running as another user needs root");
        return;
    }
    // A database of root's that another user may write (so that it can open it), compacted by
    // that user: the new files could not belong to root.
    let s = scratch();
    load_keys(&s.db, 100);
    let world = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    world(s.root.path(), 0o777);
    world(&s.db, 0o777);
    for name in ["leankv.pages", "leankv.wal-0", "leankv.wal-1", "LOCK"] {
        world(&s.db.join(name), 0o666);
    }
    let before = stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db));
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin!("leankv"));
    command
        .args(["--pool-size", "8MiB", "compact"])
        .arg(&s.db)
        .uid(65534)
        .gid(65534);
    assert_cmd::Command::from_std(command)
        .assert()
        .code(4)
        .stderr(predicate::str::contains(
            "run compact as the database's owner",
        ));
    let beside: Vec<_> = std::fs::read_dir(s.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["db"]);
    let meta = std::fs::metadata(s.db.join("leankv.pages")).unwrap();
    assert_eq!(meta.uid(), 0);
    assert!(before == stdout_of(leankv().args(["--quiet", "dump"]).arg(&s.db)));
}

#[test]
fn compact_keeps_the_old_copy_when_the_swap_cannot_be_synced() {
    let s = scratch();
    load_keys(&s.db, 3000);
    on("del", &s.db)
        .args(["t", "--from", "key000300"])
        .assert()
        .success();
    let dump = |db: &Path| stdout_of(leankv().args(["--quiet", "dump"]).arg(db));
    let before = dump(&s.db);
    let pages_before = page_file_len(&s.db);
    let failed = on("compact", &s.db)
        .env("LEANKV_CLI_TEST_FAIL_AT", "sync-parents")
        .assert()
        .code(4)
        .stderr(predicate::str::contains("the new database is in place"))
        .stderr(predicate::str::contains("The old database is kept in"))
        .get_output()
        .clone();
    let message = String::from_utf8(failed.stderr).unwrap();
    // The new database is in place, the old one kept beside it, not marked for removal.
    assert!(page_file_len(&s.db) < pages_before);
    assert!(before == dump(&s.db));
    let kept: Vec<_> = std::fs::read_dir(s.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path != &s.db)
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let old = kept[0].join("db");
    assert!(message.contains(&old.display().to_string()), "{message}");
    assert!(!kept[0].join("COMPACTING").exists());
    assert_eq!(page_file_len(&old), pages_before);
    // The next compaction leaves it: it is for the user to remove.
    on("compact", &s.db)
        .assert()
        .success()
        .stderr(predicate::str::contains("has no COMPACTING file"));
    assert!(before == dump(&old));
}

#[test]
fn compact_refuses_the_current_directory_and_its_ancestors() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    leankv()
        .args(["compact", "."])
        .current_dir(&s.db)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run it from outside"));
    on("compact", &s.db).current_dir(&s.db).assert().code(2);
    let inside = s.db.join("sub");
    std::fs::create_dir(&inside).unwrap();
    leankv()
        .args(["compact", ".."])
        .current_dir(&inside)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run it from outside"));
    std::fs::remove_dir(&inside).unwrap();
    // Nothing was done; from beside it, it works.
    assert_eq!(std::fs::read_dir(s.root.path()).unwrap().count(), 1);
    leankv()
        .args(["compact", "db"])
        .current_dir(s.root.path())
        .assert()
        .success();
}
