//! `leankv compact DIR`: rewrites the database into a new directory beside it, without free
//! pages, and swaps the two directories atomically.
//!
//! Steps, and what a crash (or a kill) at each leaves. DIR always holds a whole database, the
//! old one or the new one, which have the same contents: the database is never lost.
//!
//! 1. Open DIR (the engine locks it: nobody can change it until the swap) and remove the
//!    leftovers of earlier runs that crashed (`.NAME.compact-PID` beside it, step 6).
//!    *Crash:* DIR is the old database (recovered from its log at the next open, as after any
//!    crash).
//! 2. Create `.NAME.compact-PID` beside DIR (same file system, so it can be swapped in) and
//!    copy every tree into a new database there, in key order, with the same page size. The
//!    copy runs without the write-ahead log (it is thrown away unless complete), and a
//!    sequential load leaves every leaf full. *Crash:* DIR is the old database; the partial
//!    copy is a leftover that the next `compact` removes (or remove it by hand).
//! 3. Close the copy, reopen it (with the log, as any database) and verify it: the same trees,
//!    the same pairs, key counts and the integrity check. *Crash:* as in 2.
//! 4. Sync every file of the copy and its directory. *Crash:* as in 2.
//! 5. Exchange the two directories with one `renameat2(RENAME_EXCHANGE)` and sync their
//!    parent. *Crash:* the exchange is atomic: DIR is the old or the new database, and the
//!    leftover holds the other one.
//! 6. Close the old database (it now lives under the leftover's name) and remove it.
//!    *Crash:* DIR is the new database; the leftover (old copy, perhaps partly removed) is
//!    removed by the next `compact`.
//!
//! Any failure before step 5 removes the copy and leaves DIR as it was.

use crate::error::{CliError, CliResult};
use crate::open::{self, OpenOptions, DATABASE_FILES, PAGE_FILE};
use crate::progress::{self, Ticker};
use leankv::{Db, Options};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Sizes and page counts on one side of the compaction.
#[derive(Debug, Clone, Copy)]
struct Size {
    page_file: u64,
    all_files: u64,
    pages: u64,
    free_pages: u64,
}

/// Runs `compact`.
pub fn run(dir: &Path, quiet: bool, options: OpenOptions) -> CliResult<()> {
    if !open::database_exists(dir) {
        // The same message as every other command's.
        open::open_existing(dir, options)?;
    }
    let dir = open::real_dir(dir)?;
    let (parent, name) = match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), name.to_string_lossy().into_owned()),
        _ => {
            return Err(CliError::failure(format!(
                "cannot compact {}",
                dir.display()
            )))
        }
    };
    refuse_foreign_files(&dir)?;
    let (page_file, all_files) = sizes(&dir)?;
    let started = Instant::now();
    let source = open::open_existing(&dir, options)?;
    let stats = source.stats();
    let before = Size {
        page_file,
        all_files,
        pages: stats.page_count,
        free_pages: stats.free_pages,
    };
    let prefix = format!(".{name}.compact-");
    remove_leftovers(&parent, &prefix);
    let copy = parent.join(format!("{prefix}{}", std::process::id()));
    let swapped = std::fs::create_dir(&copy)
        .map_err(|e| CliError::io("creating", &copy, e))
        .and_then(|()| build_and_swap(&source, &dir, &copy, &parent, quiet, options));
    let after = match swapped {
        Ok(after) => after,
        Err(error) => {
            // Before the swap: DIR is untouched; the copy goes.
            let _ = source.close();
            let _ = std::fs::remove_dir_all(&copy);
            return Err(error.context(format!("compacting {}", dir.display())));
        }
    };
    // The old database now lives at `copy`: close it there, then remove it. Failures here
    // leave a leftover, not a problem: DIR is the new database.
    if let Err(error) = source.close() {
        warn(format!("closing the old copy: {error}"));
    }
    crash_point("closed");
    if let Err(error) = std::fs::remove_dir_all(&copy) {
        warn(format!("removing the old copy {}: {error}", copy.display()));
    }
    let (page_file, all_files) = sizes(&dir)?;
    let after = Size {
        page_file,
        all_files,
        ..after
    };
    println!(
        "compacted {} in {:.2} s\n  page file  {:>14} -> {:>14} bytes ({})\n  all files  {:>14} \
         -> {:>14} bytes ({})\n  pages      {:>14} -> {:>14} ({} free before, {} after)",
        dir.display(),
        started.elapsed().as_secs_f64(),
        before.page_file,
        after.page_file,
        change(before.page_file, after.page_file),
        before.all_files,
        after.all_files,
        change(before.all_files, after.all_files),
        before.pages,
        after.pages,
        before.free_pages,
        after.free_pages,
    );
    Ok(())
}

/// Steps 2 to 5: returns the copy's page counts.
fn build_and_swap(
    source: &Db,
    dir: &Path,
    copy: &Path,
    parent: &Path,
    quiet: bool,
    options: OpenOptions,
) -> CliResult<Size> {
    let permissions = std::fs::metadata(dir)
        .map_err(|e| CliError::io("reading", dir, e))?
        .permissions();
    std::fs::set_permissions(copy, permissions)
        .map_err(|e| CliError::io("setting the permissions of", copy, e))?;
    copy_trees(source, copy, quiet, options)?;
    crash_point("copied");
    let after = verify(source, copy, quiet, options)?;
    sync_directory_and_files(copy)?;
    crash_point("synced");
    exchange(copy, dir)?;
    // Swapped: from here on nothing fails the command, whose failures say that nothing
    // changed.
    if let Err(error) = sync(parent) {
        warn(format!(
            "{error} (the swap is done, but may not survive a power loss)"
        ));
    }
    crash_point("swapped");
    Ok(after)
}

/// Step 2: every tree of `source` into a new database in `copy`.
fn copy_trees(source: &Db, copy: &Path, quiet: bool, options: OpenOptions) -> CliResult<()> {
    let target = Db::open(
        copy,
        Options::default()
            .pool_size(options.pool_size)
            .page_size(source.stats().page_size)
            .write_ahead_log(false),
    )?;
    let names = source.tree_names()?;
    let mut total = 0;
    for name in &names {
        total += source.open_tree(name)?.len()?;
    }
    let mut ticker = Ticker::new(progress::pairs(Some(total), quiet, "copy"));
    let copied = (|| -> CliResult<()> {
        for name in &names {
            let from = source.open_tree(name)?;
            let to = target.open_tree(name)?;
            let mut failed = None;
            from.scan::<&[u8], _>(.., |key, value| match to.insert(key, value) {
                Ok(()) => {
                    ticker.add(1);
                    true
                }
                Err(error) => {
                    failed = Some(error);
                    false
                }
            })?;
            if let Some(error) = failed {
                return Err(error.into());
            }
        }
        Ok(())
    })();
    ticker.finish();
    let closed = target.close();
    copied?;
    Ok(closed?)
}

/// Step 3: the copy, reopened, holds the same trees and pairs as `source` and passes the
/// integrity check. Returns its page counts.
fn verify(source: &Db, copy: &Path, quiet: bool, options: OpenOptions) -> CliResult<Size> {
    let target = Db::open(copy, options.options())?;
    let checked = (|| -> CliResult<Size> {
        let names = source.tree_names()?;
        if target.tree_names()? != names {
            return Err(CliError::failure("the copy does not have the same trees"));
        }
        let mut total = 0;
        for name in &names {
            total += source.open_tree(name)?.len()?;
        }
        let mut ticker = Ticker::new(progress::pairs(Some(total), quiet, "verify"));
        for name in &names {
            let (from, to) = (source.open_tree(name)?, target.open_tree(name)?);
            if from.len()? != to.len()? {
                return Err(CliError::failure(format!(
                    "tree {name:?}: the copy has {} keys, the database {}",
                    to.len()?,
                    from.len()?
                )));
            }
            let mut copied = to.iter();
            for pair in from.iter() {
                if Some(pair?) != copied.next().transpose()? {
                    return Err(CliError::failure(format!(
                        "tree {name:?}: the copy differs from the database"
                    )));
                }
                ticker.add(1);
            }
            if copied.next().is_some() {
                return Err(CliError::failure(format!(
                    "tree {name:?}: the copy has more pairs than the database"
                )));
            }
        }
        ticker.finish();
        let report = target.check_integrity()?;
        if !report.is_ok() {
            return Err(CliError::failure(format!(
                "the copy fails the integrity check: {report}"
            )));
        }
        let stats = target.stats();
        Ok(Size {
            page_file: 0,
            all_files: 0,
            pages: stats.page_count,
            free_pages: stats.free_pages,
        })
    })();
    let closed = target.close();
    let size = checked?;
    closed?;
    Ok(size)
}

/// For the tests of what a crash leaves: aborts the process (no destructor runs, as in a
/// kill) at the step the environment variable `LEANKV_CLI_TEST_CRASH_AT` names.
fn crash_point(step: &str) {
    if std::env::var_os("LEANKV_CLI_TEST_CRASH_AT").is_some_and(|at| at == step) {
        std::process::abort();
    }
}

/// Step 5: swaps the two directories in one atomic step.
fn exchange(copy: &Path, dir: &Path) -> CliResult<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    renameat_with(CWD, copy, CWD, dir, RenameFlags::EXCHANGE).map_err(|errno| {
        let hint = match errno {
            rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS => {
                " (the file system cannot exchange two directories atomically)"
            }
            _ => "",
        };
        CliError::failure(format!(
            "swapping {} and {}: {}{hint}; the database was not changed",
            copy.display(),
            dir.display(),
            std::io::Error::from(errno)
        ))
    })
}

/// Refuses a directory holding files the engine does not own: the old directory is removed
/// after the swap, and they would go with it.
fn refuse_foreign_files(dir: &Path) -> CliResult<()> {
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| CliError::io("listing", dir, e))? {
        let entry = entry.map_err(|e| CliError::io("listing", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !DATABASE_FILES.contains(&name.as_str()) {
            foreign.push(name);
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    Err(CliError::failure(format!(
        "{} holds files that are not the database's ({}); compact replaces the directory, so \
         move them elsewhere first",
        dir.display(),
        foreign.join(", ")
    )))
}

/// Removes what crashed runs left beside the database (`PREFIX<pid>` directories holding
/// only database files). Called while the database is locked: no other `compact` of it is
/// before its swap, so none of these is a copy about to be swapped in.
fn remove_leftovers(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name
            .strip_prefix(prefix)
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        let path = entry.path();
        if !ours || !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        if refuse_foreign_files(&path).is_err() {
            warn(format!("leaving {}: it holds other files", path.display()));
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => warn(format!(
                "removed {}, left by an interrupted compaction",
                path.display()
            )),
            Err(error) => warn(format!("removing {}: {error}", path.display())),
        }
    }
}

/// Syncs every file in `dir`, then `dir` itself.
fn sync_directory_and_files(dir: &Path) -> CliResult<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| CliError::io("listing", dir, e))? {
        let path: PathBuf = entry.map_err(|e| CliError::io("listing", dir, e))?.path();
        sync(&path)?;
    }
    sync(dir)
}

fn sync(path: &Path) -> CliResult<()> {
    File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|e| CliError::io("syncing", path, e))
}

/// The page file's size and all files' in `dir`.
fn sizes(dir: &Path) -> CliResult<(u64, u64)> {
    let (files, total) = open::file_sizes(dir)?;
    let page_file = files
        .iter()
        .find(|(name, _)| name == PAGE_FILE)
        .map_or(0, |(_, bytes)| *bytes);
    Ok((page_file, total))
}

/// "-90.0%" and the like.
fn change(before: u64, after: u64) -> String {
    if before == 0 {
        return "-".into();
    }
    format!(
        "{:+.1}%",
        (after as f64 - before as f64) * 100.0 / before as f64
    )
}

/// A note on standard error that does not change the outcome (printed even with `--quiet`:
/// it is about files left on disk).
fn warn(message: String) {
    eprintln!("leankv: {message}");
}
