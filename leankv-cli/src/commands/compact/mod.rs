//! `leankv compact DIR`: rewrites the database into a new directory beside it, without free
//! pages, and swaps the two directories atomically.
//!
//! The work directory is `.NAME.compact-PID` beside DIR (same file system, so that the swap
//! is one rename). It holds a marker file, `COMPACTING` (written first, naming DIR), and the
//! new database in its subdirectory `db`; the swap exchanges `db` with DIR. So the marker
//! never moves: the live DIR never carries it, and the work directory carries it from its
//! creation to its removal, whichever database its `db` holds. A later `compact` removes only
//! work directories that carry the marker, hold nothing but the marker and a database, and
//! whose database's `LOCK` it can lock itself (the engine's `flock`): a directory of the same
//! name that another program made, or whose database another process has open, is left alone.
//!
//! Steps, and what a crash (or a kill) at each leaves. DIR always holds a whole database, the
//! old one or the new one, which have the same contents: the database is never lost, and the
//! work directory, which the next `compact` removes, never holds the only good copy.
//!
//! | step | DIR | `.NAME.compact-PID` |
//! |---|---|---|
//! | 1. open DIR (locks it), remove marked leftovers of earlier runs | old | none (or an older one, partly removed) |
//! | 2. create it (mode 0700), write `COMPACTING`, create `db`, check that the owner and group can be kept | old | empty (removed as empty), or marker and an empty `db` |
//! | 3. copy every tree into `db` (no log: thrown away unless whole) | old | marker, partial copy |
//! | 4. reopen and verify the copy; give every file and `db` the old ones' owner, group and mode; sync them, `db` and the work directory | old | marker, whole copy |
//! | 5. exchange `db` and DIR (`renameat2(RENAME_EXCHANGE)`, atomic), sync both parents | old or new | marker, the other one |
//! | 6. close the old database; remove its files, its `LOCK`, `db`, the marker, the directory | new | marker and the old copy (partly removed), or empty |
//!
//! Any failure before step 5 removes the work directory and leaves DIR as it was. If syncing
//! the parents in step 5 fails, the swap may not survive a power loss: the old database is
//! kept (the marker removed, so no later `compact` removes it), the command fails and says
//! where it is.

mod leftovers;

use crate::error::{CliError, CliResult};
use crate::open::{self, OpenOptions, DATABASE_FILES, PAGE_FILE};
use crate::progress::{self, Ticker};
use leankv::{Db, Options};
use leftovers::{refuse_foreign_files, remove_leftover, remove_leftovers};
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

/// The marker file in a work directory.
const MARKER: &str = "COMPACTING";
/// The database's subdirectory in a work directory.
const COPY: &str = "db";
/// The engine's lock file (it holds an exclusive `flock` on it while the database is open).
const LOCK: &str = "LOCK";

/// Sizes and page counts on one side of the compaction.
#[derive(Debug, Clone, Copy)]
struct Size {
    page_file: u64,
    all_files: u64,
    pages: u64,
    free_pages: u64,
}

/// The owner, group and mode of a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    uid: u32,
    gid: u32,
    mode: u32,
}

impl Owner {
    fn of(meta: &std::fs::Metadata) -> Owner {
        Owner {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
        }
    }
}

/// The owners of DIR and of its files, which the copy's get.
#[derive(Debug)]
struct Owners {
    dir: Owner,
    files: Vec<(&'static str, Owner)>,
}

/// Runs `compact`.
pub fn run(dir: &Path, quiet: bool, options: OpenOptions) -> CliResult<()> {
    if !open::database_exists(dir) {
        // The same message as every other command's.
        open::open_existing(dir, options)?;
    }
    let dir = open::real_dir(dir)?;
    let (parent, name) = match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), name.to_os_string()),
        _ => {
            return Err(CliError::failure(format!(
                "cannot compact {}",
                dir.display()
            )))
        }
    };
    refuse_current_directory(&dir, &parent)?;
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
    // Read while the database is open: its files are all there, and nobody else changes them.
    let owners = owners(&dir)?;
    let mut prefix = OsString::from(".");
    prefix.push(&name);
    prefix.push(".compact-");
    remove_leftovers(&parent, &prefix);
    let mut work_name = prefix;
    work_name.push(std::process::id().to_string());
    let work = parent.join(work_name);
    let copy = work.join(COPY);
    // Only the owner can look inside while the copy is made (it gets DIR's mode at step 4).
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&work)
        .map_err(|e| {
            CliError::io("creating", &work, e).context(format!("compacting {}", dir.display()))
        })?;
    let swapped = prepare(&work, &copy, &dir, &owners)
        .and_then(|()| build_and_swap(&source, &dir, &work, &copy, &owners, quiet, options));
    let (after, synced) = match swapped {
        Ok(swapped) => swapped,
        Err(error) => {
            // Before the swap: DIR is untouched; the copy goes.
            let _ = source.close();
            if let Err(why) = remove_leftover(&work) {
                warn(format!("leaving {}: {why}", work.display()));
            }
            return Err(error.context(format!("compacting {}", dir.display())));
        }
    };
    // The old database now lives at `copy`: close it there.
    if let Err(error) = source.close() {
        warn(format!("closing the old copy: {error}"));
    }
    crash_point("closed");
    if let Err(error) = synced {
        // The exchange may be undone by a power loss; removing the old copy now could be
        // persisted without it. Keep it, unmarked, so that no later `compact` removes it.
        let unmarked = std::fs::remove_file(work.join(MARKER));
        return Err(CliError::failure(format!(
            "compacting {}: the new database is in place, but {error}, so the swap may not \
             survive a power loss. The old database is kept in {}{}; once `leankv check` \
             passes on {} (after a restart if the machine crashed), remove {} by hand",
            dir.display(),
            copy.display(),
            if unmarked.is_err() {
                " (its marker could not be removed: the next compact removes it)"
            } else {
                ""
            },
            dir.display(),
            work.display(),
        )));
    }
    // Failures here leave a leftover, not a problem: DIR is the new database.
    if let Err(why) = remove_leftover(&work) {
        warn(format!("leaving the old copy {}: {why}", work.display()));
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

/// Refuses to compact the directory the process is in, or one that holds it: the swap moves
/// the database directory away and removes it, which would leave the shell that ran the
/// command in a deleted directory.
fn refuse_current_directory(dir: &Path, parent: &Path) -> CliResult<()> {
    let Ok(cwd) = std::env::current_dir() else {
        return Ok(());
    };
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    if !cwd.starts_with(dir) {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "{} is the current directory or holds it: compact replaces that directory with a new \
         one and removes the old, which would leave this shell in a deleted directory; run it \
         from outside, e.g. `cd {}` first",
        dir.display(),
        parent.display()
    )))
}

/// The owner, group and mode of `dir` and of its database files.
fn owners(dir: &Path) -> CliResult<Owners> {
    let meta = std::fs::metadata(dir).map_err(|e| CliError::io("reading", dir, e))?;
    let mut files = Vec::new();
    for name in DATABASE_FILES {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => files.push((name, Owner::of(&meta))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::io("reading", &path, e)),
        }
    }
    Ok(Owners {
        dir: Owner::of(&meta),
        files,
    })
}

/// Step 2 after creating `work`: the marker, the copy's directory, and the check that the
/// copy can be given the owners of the database's files (before any work is done).
fn prepare(work: &Path, copy: &Path, dir: &Path, owners: &Owners) -> CliResult<()> {
    let marker = work.join(MARKER);
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .open(&marker)
        .map_err(|e| CliError::io("creating", &marker, e))?;
    write!(
        file,
        "leankv compact of {} (process {}): the new database is made in \"{COPY}\" here and \
         exchanged with it.\nThe next `leankv compact` of that database removes this directory \
         unless its database is open.\n",
        dir.display(),
        std::process::id()
    )
    .map_err(|e| CliError::io("writing", &marker, e))?;
    drop(file);
    crash_point("marked");
    std::fs::create_dir(copy).map_err(|e| CliError::io("creating", copy, e))?;
    check_owners(copy, owners)
}

/// Whether this process may give new files the owners of the database's: tried on the copy's
/// (empty) directory, with every owner and group in use, the directory's last.
fn check_owners(copy: &Path, owners: &Owners) -> CliResult<()> {
    let handle = File::open(copy).map_err(|e| CliError::io("opening", copy, e))?;
    let me = handle
        .metadata()
        .map_err(|e| CliError::io("reading", copy, e))?
        .uid();
    let mut wanted: Vec<(u32, u32)> = Vec::new();
    for owner in owners
        .files
        .iter()
        .map(|(_, owner)| owner)
        .chain([&owners.dir])
    {
        let pair = (owner.uid, owner.gid);
        wanted.retain(|other| *other != pair);
        wanted.push(pair);
    }
    for (uid, gid) in wanted {
        std::os::unix::fs::fchown(&handle, Some(uid), Some(gid)).map_err(|error| {
            CliError::failure(format!(
                "the database's files belong to uid {uid} and gid {gid}, and the compacted \
                 files must too, but this user (uid {me}) may not give files that owner and \
                 group ({error}); run compact as the database's owner or as root. Nothing was \
                 changed"
            ))
        })?;
    }
    Ok(())
}

/// Steps 3 to 5: returns the copy's page counts, and whether the swap was synced.
fn build_and_swap(
    source: &Db,
    dir: &Path,
    work: &Path,
    copy: &Path,
    owners: &Owners,
    quiet: bool,
    options: OpenOptions,
) -> CliResult<(Size, CliResult<()>)> {
    copy_trees(source, copy, quiet, options)?;
    crash_point("copied");
    let after = verify(source, copy, quiet, options)?;
    finish_copy(copy, owners)?;
    sync(work)?;
    crash_point("synced");
    exchange(copy, dir)?;
    // Swapped: the directory entries of both parents changed.
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let synced = injected_failure("sync-parents")
        .and_then(|()| sync(parent))
        .and_then(|()| sync(work));
    crash_point("swapped");
    Ok((after, synced))
}

/// Step 4 after the verification: every file of the copy, then its directory, gets the owner,
/// group and mode of the database's one of the same name (the owner first: changing it may
/// clear set-id bits) and is synced.
fn finish_copy(copy: &Path, owners: &Owners) -> CliResult<()> {
    let apply = |path: &Path, owner: Option<&Owner>| -> CliResult<()> {
        let file = File::open(path).map_err(|e| CliError::io("opening", path, e))?;
        if let Some(owner) = owner {
            std::os::unix::fs::fchown(&file, Some(owner.uid), Some(owner.gid))
                .map_err(|e| CliError::io("setting the owner of", path, e))?;
            file.set_permissions(std::fs::Permissions::from_mode(owner.mode))
                .map_err(|e| CliError::io("setting the permissions of", path, e))?;
        }
        file.sync_all()
            .map_err(|e| CliError::io("syncing", path, e))
    };
    for entry in std::fs::read_dir(copy).map_err(|e| CliError::io("listing", copy, e))? {
        let entry = entry.map_err(|e| CliError::io("listing", copy, e))?;
        let name = entry.file_name();
        let owner = owners
            .files
            .iter()
            .find(|(file, _)| name == *file)
            .map(|(_, owner)| owner);
        apply(&entry.path(), owner)?;
    }
    apply(copy, Some(&owners.dir))
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
            open::try_scan(&from, |key, value| {
                to.insert(key, value)?;
                ticker.add(1);
                Ok::<_, CliError>(())
            })?;
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

/// For the tests of failures that cannot be caused from outside: an I/O error at the step the
/// environment variable `LEANKV_CLI_TEST_FAIL_AT` names.
fn injected_failure(step: &str) -> CliResult<()> {
    if std::env::var_os("LEANKV_CLI_TEST_FAIL_AT").is_some_and(|at| at == step) {
        return Err(CliError::failure(format!("{step}: an injected failure")));
    }
    Ok(())
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
