//! Opening a database for a command: the options a command-line tool wants, the difference
//! between "open an existing database" and "create one", trees looked up without being
//! created, and a close whose errors are reported.

use crate::error::{CliError, CliResult};
use leankv::{Db, Durability, Options, Tree};
use std::path::{Path, PathBuf};

/// The page file in a database directory. The engine does not export its file names; the
/// tests (`stat` of a missing database, `compact`) notice if they change.
pub const PAGE_FILE: &str = "leankv.pages";
/// Every file the engine keeps in a database directory: the lock file, the page file and the
/// two log files. `compact` refuses a directory with anything else in it (it would not carry
/// it over).
pub const DATABASE_FILES: [&str; 4] = ["LOCK", PAGE_FILE, "leankv.wal-0", "leankv.wal-1"];

/// How the tool opens databases.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Bytes of buffer pool.
    pub pool_size: usize,
}

impl OpenOptions {
    /// The engine's options: the pool size asked for, and commits that are not synced one by
    /// one (every command closes the database before it exits, which makes everything
    /// durable: a command that returned has its changes on disk).
    pub fn options(&self) -> Options {
        Options::default()
            .pool_size(self.pool_size)
            .durability(Durability::None)
    }
}

/// Whether `dir` holds a leankv database (a non-empty page file).
pub fn database_exists(dir: &Path) -> bool {
    std::fs::metadata(dir.join(PAGE_FILE)).is_ok_and(|meta| meta.is_file() && meta.len() > 0)
}

/// Opens the database in `dir`, which must exist: the engine would create a missing one, and
/// a typo in a path must not leave an empty database behind.
pub fn open_existing(dir: &Path, options: OpenOptions) -> CliResult<Db> {
    if !database_exists(dir) {
        return Err(CliError::failure(format!(
            "no leankv database in {} (no {PAGE_FILE} there)",
            dir.display()
        )));
    }
    open(dir, options)
}

/// Opens the database in `dir`, creating it if missing.
pub fn open_or_create(dir: &Path, options: OpenOptions) -> CliResult<Db> {
    open(dir, options)
}

/// Opens the database in `dir`; if opening it recovered from a crash (it replayed more of the
/// log than a clean close leaves), says so on stderr: that open may have taken a while, and the
/// latest commits before the crash may be missing.
fn open(dir: &Path, options: OpenOptions) -> CliResult<Db> {
    let db = Db::open(dir, options.options())
        .map_err(|e| CliError::from(e).context(format!("opening {}", dir.display())))?;
    let recovery = db.stats().recovery;
    if recovery.records > 1 {
        eprintln!(
            "leankv: {} was not closed cleanly: recovered in {:.1} s, replaying {:.1} MiB of \
             log ({} records, {} pages rebuilt, {} unfinished batches rolled back)",
            dir.display(),
            recovery.duration.as_secs_f64(),
            recovery.log_bytes as f64 / f64::from(1 << 20),
            recovery.records,
            recovery.pages,
            recovery.batches_rolled_back,
        );
    }
    Ok(db)
}

/// The tree `name` if the database has it (`Db::open_tree` would create it): status 1 if not.
pub fn existing_tree(db: &Db, name: &str) -> CliResult<Tree> {
    if !db.tree_names()?.iter().any(|tree| tree == name) {
        return Err(CliError::not_found(format!(
            "no tree {name:?} in {}",
            db.path().display()
        )));
    }
    Ok(db.open_tree(name)?)
}

/// Visits every pair of `tree` in key order until `visit` fails, and returns that failure
/// (or the scan's own).
pub fn try_scan<E: From<leankv::Error>>(
    tree: &Tree,
    mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut failed = None;
    tree.scan::<&[u8], _>(.., |key, value| match visit(key, value) {
        Ok(()) => true,
        Err(error) => {
            failed = Some(error);
            false
        }
    })?;
    failed.map_or(Ok(()), Err)
}

/// Runs `command` on `db`, then closes it: a close that fails is reported as the command's
/// failure unless the command failed first (its error is the one to tell).
pub fn with_db<T>(db: Db, command: impl FnOnce(&Db) -> CliResult<T>) -> CliResult<T> {
    let path = db.path().to_path_buf();
    let result = command(&db);
    let closed = db.close();
    let value = result?;
    closed.map_err(|e| CliError::from(e).context(format!("closing {}", path.display())))?;
    Ok(value)
}

/// The sizes of the files in `dir`, by name, and their sum (not following links).
pub fn file_sizes(dir: &Path) -> CliResult<(Vec<(String, u64)>, u64)> {
    let mut files = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| CliError::io("listing the directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("listing the directory", dir, e))?;
        let meta = entry
            .metadata()
            .map_err(|e| CliError::io("reading the size of", &entry.path(), e))?;
        if meta.is_file() {
            files.push((entry.file_name().to_string_lossy().into_owned(), meta.len()));
        }
    }
    files.sort();
    let total = files.iter().map(|(_, size)| size).sum();
    Ok((files, total))
}

/// `dir` with links resolved, for commands that must act on the real directory.
pub fn real_dir(dir: &Path) -> CliResult<PathBuf> {
    std::fs::canonicalize(dir).map_err(|e| CliError::io("resolving", dir, e))
}
