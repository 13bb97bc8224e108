//! Work directories that interrupted `compact` runs left beside a database: which are ours
//! to remove (marked, nothing foreign in them, their database unlocked) and removing them.

use super::{crash_point, warn, COPY, LOCK, MARKER};
use crate::error::{CliError, CliResult};
use crate::open::DATABASE_FILES;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Refuses a directory holding files the engine does not own: the old directory is removed
/// after the swap, and they would go with it.
pub(super) fn refuse_foreign_files(dir: &Path) -> CliResult<()> {
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| CliError::io("listing", dir, e))? {
        let name = entry
            .map_err(|e| CliError::io("listing", dir, e))?
            .file_name();
        if !is_database_file(&name) {
            foreign.push(name.to_string_lossy().into_owned());
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

fn is_database_file(name: &OsStr) -> bool {
    DATABASE_FILES.iter().any(|file| name == *file)
}

/// Removes what interrupted runs left beside the database: the directories named
/// `PREFIX<digits>` (compared byte for byte) that are empty, or that carry the marker and
/// pass `remove_leftover`'s checks. Called while the database is locked, so no other
/// `compact` of it is before its swap. Others are left, with a note.
pub(super) fn remove_leftovers(parent: &Path, prefix: &OsStr) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let ours = name
            .as_bytes()
            .strip_prefix(prefix.as_bytes())
            .is_some_and(|pid| !pid.is_empty() && pid.iter().all(u8::is_ascii_digit));
        // `file_type` does not follow links: a link is never removed.
        if !ours || !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let path = entry.path();
        let marked = std::fs::symlink_metadata(path.join(MARKER)).is_ok_and(|meta| meta.is_file());
        let removed = if marked {
            remove_leftover(&path)
        } else if std::fs::remove_dir(&path).is_ok() {
            // Empty: a run stopped right after creating it (removing it loses nothing).
            Ok(())
        } else {
            Err(format!(
                "it has no {MARKER} file, so compact did not make it (or a version before the \
                 marker did: remove it by hand if it is an old copy)"
            ))
        };
        match removed {
            Ok(()) => warn(format!(
                "removed {}, left by an interrupted compaction",
                path.display()
            )),
            Err(why) => warn(format!("leaving {}: {why}", path.display())),
        }
    }
}

/// Removes the work directory `work` if it holds nothing but the marker and a database
/// directory holding only database files, and that database's lock can be taken (it is not
/// open). Removes the database's files with the lock held, the lock file last, then the
/// directory, the marker and `work`: an interruption leaves a directory this function still
/// removes. Says why if it leaves `work`.
pub(super) fn remove_leftover(work: &Path) -> Result<(), String> {
    let mut has_copy = false;
    for (name, is_dir) in list(work)? {
        if name == MARKER && !is_dir {
            continue;
        }
        if name == COPY && is_dir {
            has_copy = true;
            continue;
        }
        return Err(format!(
            "it holds {:?}, which compact did not put there",
            name.to_string_lossy()
        ));
    }
    if has_copy {
        let copy = work.join(COPY);
        let files = list(&copy)?;
        if let Some((name, _)) = files
            .iter()
            .find(|(name, is_dir)| *is_dir || !is_database_file(name))
        {
            return Err(format!(
                "{} holds {:?}, which is not a database file",
                copy.display(),
                name.to_string_lossy()
            ));
        }
        // The engine's lock: an exclusive `flock` on LOCK (`File::try_lock`, as the engine
        // takes it), held until the files are gone.
        let lock_path = copy.join(LOCK);
        let lock = match File::open(&lock_path) {
            Ok(file) => match file.try_lock() {
                Ok(()) => Some(file),
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err("its database is open in another process".into())
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(format!("locking {}: {e}", lock_path.display()))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("opening {}: {e}", lock_path.display())),
        };
        for (name, _) in files.iter().filter(|(name, _)| name != LOCK) {
            remove(&copy.join(name), false)?;
        }
        crash_point("removing");
        remove(&lock_path, false)?;
        drop(lock);
        remove(&copy, true)?;
    }
    remove(&work.join(MARKER), false)?;
    remove(work, true)
}

/// The entries of `dir`: names, and whether each is a directory (links are not followed).
fn list(dir: &Path) -> Result<Vec<(OsString, bool)>, String> {
    let listing = |e: std::io::Error| format!("listing {}: {e}", dir.display());
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let is_dir = entry.file_type().map_err(listing)?.is_dir();
        entries.push((entry.file_name(), is_dir));
    }
    Ok(entries)
}

/// Removes a file or an empty directory; one already gone is fine.
fn remove(path: &Path, dir: bool) -> Result<(), String> {
    let removed = if dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("removing {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}
