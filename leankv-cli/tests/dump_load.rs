//! `dump` and `load`: the format, the round trip byte for byte, removals, bad input.

mod common;

use common::{damage_last_page, leankv, on, put, scratch, stdout_of, text_of};
use predicates::prelude::*;
use std::os::unix::fs::PermissionsExt;
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
    on("del", &s.db).args(["empty", "k"]).assert().success();
    let text = String::from_utf8(dump(&s.db)).unwrap();
    assert_eq!(
        text,
        "{\"begin\":{\"format\":1}}\n\
         {\"tree\":\"bin\"}\n\
         {\"tree\":\"bin\",\"key\":{\"base64\":\"/wA=\"},\"value\":{\"base64\":\"4oI=\"}}\n\
         {\"tree\":\"empty\"}\n\
         {\"tree\":\"users\"}\n\
         {\"tree\":\"users\",\"key\":\"ada\",\"value\":\"lovelace\"}\n\
         {\"end\":{\"pairs\":2,\"trees\":3}}\n"
    );
    // One tree alone; a missing one is status 1.
    let users = text_of(leankv().args(["--quiet", "dump"]).arg(&s.db).arg("users"));
    assert_eq!(
        users,
        "{\"begin\":{\"format\":1}}\n\
         {\"tree\":\"users\"}\n\
         {\"tree\":\"users\",\"key\":\"ada\",\"value\":\"lovelace\"}\n\
         {\"end\":{\"pairs\":1,\"trees\":1}}\n"
    );
    on("dump", &s.db).arg("nobody").assert().code(1);
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
    assert_eq!(text.lines().count(), 2 + 3 + 256 + 3);
    assert!(text.ends_with("{\"end\":{\"pairs\":259,\"trees\":3}}\n"));
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
    on("dump", &s.db)
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
    // A relative path, and a link (the file it names is replaced, the link stays).
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .args(["-o", "relative.jsonl"])
        .current_dir(s.root.path())
        .assert()
        .success();
    assert!(std::fs::read(s.root.path().join("relative.jsonl")).unwrap() == dump(&s.db));
    let link = s.root.path().join("link.jsonl");
    std::os::unix::fs::symlink("relative.jsonl", &link).unwrap();
    std::fs::write(s.root.path().join("relative.jsonl"), "old").unwrap();
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .arg("-o")
        .arg(&link)
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::read(&link).unwrap() == dump(&s.db));
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

#[test]
fn a_failed_dump_leaves_the_previous_file_as_it_was() {
    let s = scratch();
    common::load_keys(&s.db, 3000);
    let file = s.root.path().join("backup.jsonl");
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .arg("-o")
        .arg(&file)
        .assert()
        .success();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let backup = std::fs::read(&file).unwrap();
    // A dump that fails half way (on a damaged page, after many lines are written).
    put(&s.db, "t", "key000000", "changed");
    damage_last_page(&s.db);
    leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .arg("-o")
        .arg(&file)
        .assert()
        .code(3);
    assert!(
        std::fs::read(&file).unwrap() == backup,
        "the backup changed"
    );
    // No temporary file is left beside it.
    let mut beside: Vec<_> = std::fs::read_dir(s.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    beside.sort();
    assert_eq!(beside, ["backup.jsonl", "db"]);
    // A dump that succeeds replaces it and keeps its permissions.
    let other = s.root.path().join("other");
    put(&other, "t", "k", "v");
    leankv()
        .args(["--quiet", "dump"])
        .arg(&other)
        .arg("-o")
        .arg(&file)
        .assert()
        .success();
    assert!(std::fs::read(&file).unwrap() == dump(&other));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn load_refuses_a_dump_that_is_cut_off() {
    let s = scratch();
    common::load_keys(&s.db, 100);
    let whole = String::from_utf8(dump(&s.db)).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 1 + 1 + 100 + 1);
    // Cut at a line boundary (the end line lost, or more): the lines there are applied, and
    // the load fails saying so.
    for keep in [lines.len() - 1, 50, 1] {
        let copy = s.root.path().join(format!("cut-{keep}"));
        let input: String = lines[..keep]
            .iter()
            .map(|line| format!("{line}\n"))
            .collect();
        load(&copy, input)
            .code(4)
            .stderr(predicate::str::contains("the dump is cut off"));
        if keep > 2 {
            let keys = text_of(leankv().arg("scan").arg(&copy).args(["t", "--keys-only"]));
            assert_eq!(keys.lines().count(), keep - 2);
        }
    }
    // A line missing from the middle: the end line's counts do not match.
    let mut input: String = whole.lines().map(|line| format!("{line}\n")).collect();
    input = input.replacen(lines[40], "", 1).replacen("\n\n", "\n", 1);
    load(&s.root.path().join("gap"), input)
        .code(4)
        .stderr(predicate::str::contains(
            "counts 100 pair lines and 1 tree lines, but 99 and 1 were read",
        ));
    // A dump that follows a cut-off one.
    let input = format!("{}\n{whole}", lines[..50].join("\n"));
    load(&s.root.path().join("twice"), input)
        .code(4)
        .stderr(predicate::str::contains(
            "begins before the one begun on line 1 ended",
        ));
    // Dumps one after the other are fine; so is input without begin and end lines.
    let copy = s.root.path().join("concatenated");
    let other = s.root.path().join("other");
    put(&other, "u", "k", "v");
    let mut input = dump(&s.db);
    input.extend(dump(&other));
    input.extend(b"{\"tree\":\"w\",\"key\":\"k\",\"value\":\"v\"}\n");
    load(&copy, input).success();
    let stat = text_of(leankv().args(["stat", "--json"]).arg(&copy));
    assert!(stat.contains("\"u\"") && stat.contains("\"w\""), "{stat}");
    // A format this version does not know.
    load(
        &s.root.path().join("future"),
        "{\"begin\":{\"format\":2}}\n",
    )
    .code(4)
    .stderr(predicate::str::contains("format 2"));
}

#[test]
fn a_dump_that_fails_in_a_pipe_fails_the_load() {
    let s = scratch();
    common::load_keys(&s.db, 3000);
    damage_last_page(&s.db);
    // `leankv dump db | leankv load copy`: what the failed dump wrote reaches the load.
    let failed = leankv()
        .args(["--quiet", "dump"])
        .arg(&s.db)
        .assert()
        .code(3)
        .get_output()
        .stdout
        .clone();
    assert!(failed.starts_with(b"{\"begin\""));
    load(&s.root.path().join("copy"), failed)
        .code(4)
        .stderr(predicate::str::contains("the dump is cut off"));
}

/// `{"base64": ...}` of `bytes`.
fn base64_json(bytes: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("{{\"base64\":\"{encoded}\"}}")
}
