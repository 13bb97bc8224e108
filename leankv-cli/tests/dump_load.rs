//! `dump` and `load`: the format, the round trip byte for byte, removals, bad input.

mod common;

use common::{leankv, put, scratch, stdout_of, text_of};
use predicates::prelude::*;
use std::path::Path;

fn dump(db: &Path) -> Vec<u8> {
    stdout_of(leankv().args(["--quiet", "dump"]).arg(db))
}

fn load(db: &Path, input: impl Into<Vec<u8>>) -> assert_cmd::assert::Assert {
    leankv()
        .args(["--quiet", "load"])
        .arg(db)
        .write_stdin(input.into())
        .assert()
}

#[test]
fn dump_writes_the_documented_format() {
    let s = scratch();
    put(&s.db, "users", "ada", "lovelace");
    leankv()
        .args(["--hex", "put"])
        .arg(&s.db)
        .args(["bin", "ff00", "e282ac"]) // the value is UTF-8: "€"
        .assert()
        .success();
    leankv()
        .args(["--hex", "del"])
        .arg(&s.db)
        .args(["bin", "ff00"])
        .assert()
        .success();
    leankv()
        .args(["--hex", "put"])
        .arg(&s.db)
        .args(["bin", "ff00", "e282"]) // not UTF-8
        .assert()
        .success();
    put(&s.db, "empty", "k", "v");
    leankv()
        .arg("del")
        .arg(&s.db)
        .args(["empty", "k"])
        .assert()
        .success();
    let text = String::from_utf8(dump(&s.db)).unwrap();
    assert_eq!(
        text,
        "{\"tree\":\"bin\"}\n\
         {\"tree\":\"bin\",\"key\":{\"base64\":\"/wA=\"},\"value\":{\"base64\":\"4oI=\"}}\n\
         {\"tree\":\"empty\"}\n\
         {\"tree\":\"users\"}\n\
         {\"tree\":\"users\",\"key\":\"ada\",\"value\":\"lovelace\"}\n"
    );
    // One tree alone; a missing one is status 1.
    let users = text_of(leankv().args(["--quiet", "dump"]).arg(&s.db).arg("users"));
    assert_eq!(users.lines().count(), 2);
    leankv()
        .arg("dump")
        .arg(&s.db)
        .arg("nobody")
        .assert()
        .code(1);
}

#[test]
fn dump_then_load_round_trips_byte_for_byte() {
    let s = scratch();
    // Every byte value in keys and values, text with escapes, a large value (past the leaf:
    // over a quarter page), empty key and value, an empty tree.
    let mut input = String::from("{\"tree\":\"empty\"}\n");
    for i in 0..=255u32 {
        let key = format!("{:02x}{:02x}", i, 255 - i);
        let value = format!("{:02x}", i).repeat(1 + i as usize % 7);
        input.push_str(&format!(
            "{{\"tree\":\"bytes\",\"key\":{},\"value\":{}}}\n",
            base64_json(&hex::decode(&key).unwrap()),
            base64_json(&hex::decode(&value).unwrap())
        ));
    }
    input.push_str(
        "{\"tree\":\"text\",\"key\":\"caf\u{e9} \\\"quoted\\\"\\ttab\\nline\",\"value\":\"\u{1F600}\"}\n",
    );
    input.push_str("{\"tree\":\"text\",\"key\":\"\",\"value\":\"\"}\n");
    input.push_str(&format!(
        "{{\"tree\":\"text\",\"key\":\"large\",\"value\":\"{}\"}}\n",
        "x".repeat(50_000)
    ));
    load(&s.db, input).success();
    let first = dump(&s.db);
    let copy = s.root.path().join("copy");
    load(&copy, first.clone()).success();
    let second = dump(&copy);
    assert!(first == second, "the dumps differ");
    let text = String::from_utf8(first).unwrap();
    assert!(text.contains("{\"tree\":\"empty\"}\n"));
    assert_eq!(text.lines().count(), 3 + 256 + 3);
    // Binary keys that are not UTF-8 come out as base64, UTF-8 as strings.
    assert!(text.contains("\"key\":{\"base64\":"));
    assert!(text.contains("\"value\":\"\u{1F600}\""));
    leankv().arg("check").arg(&copy).assert().success();
}

#[test]
fn dump_to_a_file_and_load_from_a_file() {
    let s = scratch();
    common::load_keys(&s.db, 2000);
    let file = s.root.path().join("dump.jsonl");
    leankv()
        .arg("dump")
        .arg(&s.db)
        .arg("-o")
        .arg(&file)
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains("dumped 2000 pairs of 1 trees"));
    let copy = s.root.path().join("copy");
    leankv()
        .arg("load")
        .arg(&copy)
        .arg("--file")
        .arg(&file)
        .args(["--batch", "7"])
        .assert()
        .success()
        .stderr(predicate::str::contains("2000 pairs stored"));
    assert!(dump(&copy) == std::fs::read(&file).unwrap());
    // A device as the output file (nothing to sync there).
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .args(["-o", "/dev/null"])
        .assert()
        .success();
}

#[test]
fn load_applies_removals_and_merges_into_existing_trees() {
    let s = scratch();
    put(&s.db, "t", "keep", "1");
    put(&s.db, "t", "gone", "2");
    load(
        &s.db,
        "{\"tree\":\"t\",\"key\":\"gone\",\"value\":null}\n\n{\"tree\":\"t\",\"key\":\"new\",\"value\":\"3\"}\n",
    )
    .success();
    let pairs = text_of(leankv().arg("scan").arg(&s.db).arg("t"));
    assert_eq!(pairs, "keep\t1\nnew\t3\n");
}

#[test]
fn a_malformed_line_stops_the_load_after_the_lines_before_it() {
    let s = scratch();
    let input = "{\"tree\":\"t\",\"key\":\"a\",\"value\":\"1\"}\n\
                 {\"tree\":\"t\",\"key\":\"b\",\"value\":\"2\"}\n\
                 {\"tree\":\"t\",\"key\":\"c\"}\n\
                 {\"tree\":\"t\",\"key\":\"d\",\"value\":\"4\"}\n";
    load(&s.db, input)
        .code(4)
        .stderr(predicate::str::contains("line 3:"));
    let keys = text_of(leankv().arg("scan").arg(&s.db).args(["t", "--keys-only"]));
    assert_eq!(keys, "a\nb\n");
    for bad in [
        "not json\n",
        "{\"tree\":\"t\",\"key\":{\"base64\":\"***\"},\"value\":\"v\"}\n",
        "{\"tree\":\"t\",\"key\":\"k\",\"value\":\"v\",\"extra\":1}\n",
    ] {
        load(&s.db, bad)
            .code(4)
            .stderr(predicate::str::contains("line 1:"));
    }
    // Limits of the engine are failures with its message, with the line.
    // (Found on the line itself, not when its batch is written: the lines before it are in.)
    let long_key = "k".repeat(2000);
    load(
        &s.db,
        format!(
            "{{\"tree\":\"u\",\"key\":\"x\",\"value\":\"1\"}}\n\
             {{\"tree\":\"u\",\"key\":\"{long_key}\",\"value\":null}}\n\
             {{\"tree\":\"u\",\"key\":\"{long_key}\",\"value\":\"v\"}}\n"
        ),
    )
    .code(4)
    .stderr(predicate::str::contains(
        "line 3: key of 2000 bytes exceeds the limit of 1024 bytes",
    ));
    let keys = text_of(leankv().arg("scan").arg(&s.db).args(["u", "--keys-only"]));
    assert_eq!(keys, "x\n");
}

/// `{"base64": ...}` of `bytes`.
fn base64_json(bytes: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("{{\"base64\":\"{encoded}\"}}")
}
