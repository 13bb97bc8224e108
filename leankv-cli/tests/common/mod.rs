//! Helpers shared by the tests: the binary, run on databases in temporary directories.

#![allow(dead_code)] // each test file uses some of them

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The `leankv` binary, with a small pool (the tests' databases are small).
pub fn leankv() -> Command {
    let mut command = assert_cmd::cargo::cargo_bin_cmd!("leankv");
    command.args(["--pool-size", "8MiB"]);
    command
}

/// `leankv COMMAND DB` with the tests' pool size, for more arguments to follow.
pub fn on(command: &str, db: &Path) -> Command {
    let mut leankv = leankv();
    leankv.arg(command).arg(db);
    leankv
}

/// The `leankv` binary with no options.
pub fn leankv_bare() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("leankv")
}

/// The page size of the databases the tool creates.
pub const PAGE_SIZE: u64 = 16384;

/// Overwrites part of the last page of the page file (a leaf of the last tree loaded).
pub fn damage_last_page(db: &Path) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(db.join("leankv.pages"))
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.write_all_at(&[0xa5; 64], len - PAGE_SIZE + 5000)
        .unwrap();
}

/// Whether the tests run as root (owners can be changed, permissions do not bind).
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::tempfile().unwrap();
    probe.metadata().unwrap().uid() == 0
}

/// A temporary directory and the database path in it (the database itself is not created).
pub struct Scratch {
    pub root: tempfile::TempDir,
    pub db: PathBuf,
}

pub fn scratch() -> Scratch {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("db");
    Scratch { root, db }
}

/// `leankv put`, which must succeed.
pub fn put(db: &Path, tree: &str, key: &str, value: &str) {
    on("put", db).args([tree, key, value]).assert().success();
}

/// Runs `leankv` with `args` after the database path's command and returns its standard
/// output, which must be a success.
pub fn stdout_of(command: &mut Command) -> Vec<u8> {
    command.assert().success().get_output().stdout.clone()
}

/// Standard output as text.
pub fn text_of(command: &mut Command) -> String {
    String::from_utf8(stdout_of(command)).unwrap()
}

/// A database with tree "t" holding `n` keys `key000000`.. with 100-byte values, made by
/// `load` (fast even for many keys).
pub fn load_keys(db: &Path, n: usize) {
    let mut input = String::from("{\"tree\":\"t\"}\n");
    for i in 0..n {
        input.push_str(&format!(
            "{{\"tree\":\"t\",\"key\":\"key{i:06}\",\"value\":\"{}\"}}\n",
            "v".repeat(100)
        ));
    }
    leankv()
        .args(["--quiet", "load"])
        .arg(db)
        .write_stdin(input)
        .assert()
        .success();
}
