//! `get`, `put`, `del`, `scan` and `stat`, with their exit statuses, run as the binary.

mod common;

use common::{leankv, on, put, scratch, text_of};
use predicates::prelude::*;

#[test]
fn put_get_del_round_trip_with_documented_statuses() {
    let s = scratch();
    put(&s.db, "users", "ada", "lovelace");
    put(&s.db, "users", "alan", "turing");
    // The value raw, no newline added.
    on("get", &s.db)
        .args(["users", "ada"])
        .assert()
        .success()
        .stdout("lovelace");
    // Missing key and missing tree: status 1, nothing on stdout, a message on stderr.
    on("get", &s.db)
        .args(["users", "grace"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("no key grace"));
    on("get", &s.db)
        .args(["nobody", "ada"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no tree \"nobody\""));
    on("del", &s.db).args(["users", "ada"]).assert().success();
    on("del", &s.db).args(["users", "ada"]).assert().code(1);
    // Reading commands did not create the tree they looked for.
    let trees = text_of(leankv().args(["stat", "--json"]).arg(&s.db));
    assert!(!trees.contains("nobody"), "{trees}");
}

#[test]
fn a_missing_database_is_an_error_and_is_not_created() {
    let s = scratch();
    for args in [
        &["get", "t", "k"][..],
        &["scan", "t"],
        &["stat"],
        &["check"],
        &["dump"],
        &["compact"],
        &["del", "t", "k"],
    ] {
        leankv()
            .arg(args[0])
            .arg(&s.db)
            .args(&args[1..])
            .assert()
            .code(4)
            .stderr(predicate::str::contains("no leankv database"));
    }
    assert!(!s.db.exists());
}

#[test]
fn usage_errors_exit_with_status_2() {
    let s = scratch();
    leankv().arg("get").arg(&s.db).assert().code(2);
    leankv().args(["frobnicate"]).assert().code(2);
    // Bad hex is a usage error too, found before anything is opened or created.
    leankv()
        .args(["--hex", "put"])
        .arg(&s.db)
        .args(["t", "zz", "00"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not hex"));
    on("put", &s.db).args(["t", "k"]).assert().code(2);
    on("del", &s.db)
        .args(["t", "k", "--prefix", "p"])
        .assert()
        .code(2);
    on("del", &s.db)
        .arg("t")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs a KEY"));
    assert!(!s.db.exists());
}

#[test]
fn a_bad_pool_size_is_a_usage_error() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    for size in ["0", "0MiB", "lots"] {
        common::leankv_bare()
            .args(["--pool-size", size, "get"])
            .arg(&s.db)
            .args(["t", "k"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--pool-size"));
    }
    // Too small for the database's pages: the engine says so, still a usage error.
    common::leankv_bare()
        .args(["--pool-size", "64KiB", "get"])
        .arg(&s.db)
        .args(["t", "k"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("at least"));
}

#[test]
fn help_has_examples_and_exit_statuses() {
    leankv()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Examples:"))
        .stdout(predicate::str::contains("Exit status:"))
        .stdout(predicate::str::contains("5  the database is in use"));
}

#[test]
fn hex_keys_and_values_in_and_out() {
    let s = scratch();
    leankv()
        .args(["--hex", "put"])
        .arg(&s.db)
        .args(["bin", "00ff", "c0ffee"])
        .assert()
        .success();
    leankv()
        .args(["get"])
        .arg(&s.db)
        .args(["bin", "00ff", "--hex"])
        .assert()
        .success()
        .stdout("c0ffee\n");
    // Without --hex, the value's raw bytes (key "k" is 6b in hex).
    leankv()
        .args(["--hex", "put"])
        .arg(&s.db)
        .args(["bin", "6b", "00ff0a"])
        .assert()
        .success();
    let raw = on("get", &s.db).args(["bin", "k"]).output().unwrap();
    assert!(raw.status.success());
    assert_eq!(raw.stdout, [0x00, 0xff, 0x0a]);
    // scan escapes what is not printable text.
    on("scan", &s.db)
        .arg("bin")
        .assert()
        .success()
        .stdout("\\x00\\xff\t\\xc0\\xff\\xee\nk\t\\x00\\xff\\n\n");
    leankv()
        .args(["scan", "--hex"])
        .arg(&s.db)
        .arg("bin")
        .assert()
        .success()
        .stdout("00ff\tc0ffee\n6b\t00ff0a\n");
}

#[test]
fn put_reads_binary_values_from_stdin() {
    let s = scratch();
    let value: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    on("put", &s.db)
        .args(["files", "blob", "--stdin"])
        .write_stdin(value.clone())
        .assert()
        .success();
    let out = on("get", &s.db).args(["files", "blob"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, value);
}

#[test]
fn scan_ranges_order_limits_and_formats() {
    let s = scratch();
    for key in ["a", "b1", "b2", "b3", "c", "tab\tkey"] {
        put(&s.db, "t", key, &format!("v-{key}"));
    }
    let scan = |args: &[&str]| text_of(leankv().arg("scan").arg(&s.db).arg("t").args(args));
    assert_eq!(
        scan(&[]),
        "a\tv-a\nb1\tv-b1\nb2\tv-b2\nb3\tv-b3\nc\tv-c\ntab\\tkey\tv-tab\\tkey\n"
    );
    assert_eq!(scan(&["--prefix", "b", "--keys-only"]), "b1\nb2\nb3\n");
    assert_eq!(
        scan(&["--from", "b2", "--to", "c", "--keys-only"]),
        "b2\nb3\n"
    );
    assert_eq!(
        scan(&["--prefix", "b", "--reverse", "--limit", "2", "--keys-only"]),
        "b3\nb2\n"
    );
    assert_eq!(scan(&["--from", "c", "--to", "a"]), "");
    assert_eq!(
        scan(&["--prefix", "c", "--json"]),
        "{\"tree\":\"t\",\"key\":\"c\",\"value\":\"v-c\"}\n"
    );
}

#[test]
fn del_of_a_range_or_prefix_removes_and_counts() {
    let s = scratch();
    for key in ["a", "b1", "b2", "b3", "c", "d"] {
        put(&s.db, "t", key, "v");
    }
    on("del", &s.db)
        .args(["t", "--prefix", "b"])
        .assert()
        .success()
        .stderr("removed 3 keys from tree \"t\"\n");
    on("del", &s.db)
        .args(["t", "--from", "c"])
        .assert()
        .success()
        .stderr(predicate::str::contains("removed 2 keys"));
    let left = text_of(leankv().arg("scan").arg(&s.db).args(["t", "--keys-only"]));
    assert_eq!(left, "a\n");
}

#[test]
fn stat_reports_trees_keys_pages_and_format() {
    let s = scratch();
    common::load_keys(&s.db, 3000);
    put(&s.db, "other", "k", "v");
    let text = text_of(leankv().arg("stat").arg(&s.db));
    assert!(text.contains("format version  3"), "{text}");
    assert!(text.contains("page size       16384 bytes"), "{text}");
    assert!(text.contains("trees           2 (3001 keys)"), "{text}");
    assert!(text.contains("leankv.pages"), "{text}");
    on("del", &s.db)
        .args(["t", "--prefix", ""])
        .assert()
        .success();
    let json = text_of(leankv().args(["stat", "--json"]).arg(&s.db));
    let stat: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(stat["format_version"], 3);
    assert_eq!(stat["trees"][1]["name"], "t");
    assert_eq!(stat["trees"][1]["keys"], 0);
    assert_eq!(stat["trees"][0]["keys"], 1);
    let (pages, free) = (
        stat["pages"].as_u64().unwrap(),
        stat["free_pages"].as_u64().unwrap(),
    );
    assert!(free > 0 && free < pages, "{json}");
    assert_eq!(
        stat["page_file_bytes"].as_u64().unwrap(),
        pages * 16384,
        "{json}"
    );
}

#[test]
fn a_database_open_elsewhere_gives_status_5() {
    let s = scratch();
    put(&s.db, "t", "k", "v");
    let db = leankv::Db::open(&s.db, leankv::Options::default().pool_size(8 << 20)).unwrap();
    on("get", &s.db)
        .args(["t", "k"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("already open"));
    db.close().unwrap();
    on("get", &s.db)
        .args(["t", "k"])
        .assert()
        .success()
        .stdout("v");
}

#[test]
fn a_database_a_crash_left_is_recovered_and_the_tool_says_so() {
    let s = scratch();
    let crashed = s.root.path().join("crashed");
    let options = leankv::Options::default()
        .pool_size(64 << 20)
        .durability(leankv::Durability::Immediate);
    let db = leankv::Db::open(&s.db, options).unwrap();
    let tree = db.open_tree("t").unwrap();
    for i in 0..100 {
        tree.insert(format!("k{i:03}"), format!("v{i:03}")).unwrap();
    }
    // The files as a kill would leave them: every commit in the synced log, the pages as the
    // open's checkpoint wrote them (the page file copied first: it is never ahead of the log).
    std::fs::create_dir(&crashed).unwrap();
    for name in ["leankv.pages", "leankv.wal-0", "leankv.wal-1"] {
        std::fs::copy(s.db.join(name), crashed.join(name)).unwrap();
    }
    db.close().unwrap();
    on("get", &crashed)
        .args(["t", "k042"])
        .assert()
        .success()
        .stdout("v042")
        .stderr(predicate::str::contains(
            "was not closed cleanly: recovered in",
        ));
    // Closed cleanly by that command, and by the library: nothing to say.
    on("get", &crashed)
        .args(["t", "k099"])
        .assert()
        .success()
        .stdout("v099")
        .stderr("");
    on("get", &s.db)
        .args(["t", "k000"])
        .assert()
        .success()
        .stderr("");
}
