//! `leankv dump DIR [TREE]`: every tree (or one) as JSON lines (see `crate::format`), between a
//! begin line and an end line that counts the lines, so that `load` can tell a dump that was
//! cut off from a whole one.
//!
//! With `-o FILE` the dump is written to a temporary file beside FILE (`.FILE.leankv-dump-PID`),
//! synced, and renamed over FILE only once it is complete and the database is closed: a dump
//! that fails, or is killed, leaves FILE as it was (a previous backup is not lost), and the
//! temporary file is removed (a kill leaves it behind: remove it by hand). The new file gets the
//! old one's permissions, and its owner and group where the user may set them. A FILE that is
//! not a regular file (`/dev/null`, a named pipe), or that names an open file of the process
//! (`/dev/stdout`, `/dev/fd/N`, `/proc/...`), is written directly, appending.

use crate::error::{output_error, CliError, CliResult};
use crate::format::{BeginInfo, Encoded, EndInfo, OutBegin, OutEnd, OutRecord, FORMAT_VERSION};
use crate::open::{self, existing_tree, with_db, OpenOptions};
use crate::progress::{self, Ticker};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Runs `dump`.
pub fn run(
    dir: &Path,
    only: Option<&str>,
    output: Option<&Path>,
    quiet: bool,
    options: OpenOptions,
) -> CliResult<()> {
    let db = open::open_existing(dir, options)?;
    let started = Instant::now();
    let (trees, pairs, pending) = with_db(db, |db| {
        let names = match only {
            Some(name) => {
                existing_tree(db, name)?;
                vec![name.to_string()]
            }
            None => db.tree_names()?,
        };
        let mut total = 0;
        for name in &names {
            total += db.open_tree(name)?.len()?;
        }
        // The file is created only once the database is known to be there.
        let (sink, pending): (Box<dyn Write>, Option<Replacement>) = match output {
            Some(path) => match Replacement::begin(path)? {
                Target::Replace(replacement) => {
                    let file = replacement
                        .file
                        .try_clone()
                        .map_err(|e| CliError::io("opening", &replacement.temp, e))?;
                    (Box::new(file), Some(replacement))
                }
                Target::Direct(file) => (Box::new(file), None),
            },
            None => (Box::new(std::io::stdout().lock()), None),
        };
        // On an error below, `pending` is dropped and removes the temporary file; what the
        // writer still buffers goes to the temporary file (or the pipe or device), not FILE.
        let mut out = BufWriter::with_capacity(1 << 20, sink);
        let mut ticker = Ticker::new(progress::pairs(Some(total), quiet, "dump"));
        let mut pairs = 0u64;
        write_line(
            &mut out,
            &OutBegin {
                begin: BeginInfo {
                    format: FORMAT_VERSION,
                },
            },
        )
        .map_err(output_error)?;
        for name in &names {
            let tree = db.open_tree(name)?;
            write_record(&mut out, name, None).map_err(output_error)?;
            open::try_scan(&tree, |key, value| {
                write_record(&mut out, name, Some((key, value))).map_err(output_error)?;
                pairs += 1;
                ticker.add(1);
                Ok::<_, CliError>(())
            })?;
        }
        ticker.finish();
        let end = EndInfo {
            pairs,
            trees: names.len() as u64,
        };
        write_line(&mut out, &OutEnd { end }).map_err(output_error)?;
        out.flush().map_err(output_error)?;
        drop(out);
        Ok((names.len(), pairs, pending))
    })?;
    // Only a complete dump of a database that closed cleanly replaces FILE.
    if let Some(pending) = pending {
        pending.commit()?;
    }
    if !quiet {
        eprintln!(
            "dumped {pairs} pairs of {trees} trees in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn write_line(out: &mut impl Write, line: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

fn write_record(
    out: &mut impl Write,
    tree: &str,
    pair: Option<(&[u8], &[u8])>,
) -> std::io::Result<()> {
    write_line(
        out,
        &OutRecord {
            tree,
            key: pair.map(|(key, _)| Encoded(key)),
            value: pair.map(|(_, value)| Encoded(value)),
        },
    )
}

/// Where `-o FILE` writes.
enum Target {
    /// A regular file (or none yet): a temporary file beside it, renamed over it at the end.
    Replace(Replacement),
    /// Something else (a device, a named pipe): written directly, as there is nothing to
    /// replace.
    Direct(File),
}

/// A temporary file that becomes `target` on `commit`, and is removed if dropped before.
struct Replacement {
    temp: PathBuf,
    target: PathBuf,
    file: File,
    committed: bool,
}

impl Replacement {
    fn begin(path: &Path) -> CliResult<Target> {
        // `metadata` follows links as the kernel does (also the links of /proc, such as
        // /dev/stdout, which name no path).
        let (target, old) = match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                return Err(CliError::failure(format!(
                    "{} is a directory",
                    path.display()
                )))
            }
            // Not a file to replace: a device, a pipe, or what /dev/stdout or /proc/self/fd/N
            // names (the caller's open file, perhaps appended to, whose name is not this one).
            Ok(meta) if !meta.is_file() || is_special(path) => {
                // Appending: what the caller opened with `>>` is not overwritten.
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(|e| CliError::io("opening", path, e))?;
                return Ok(Target::Direct(file));
            }
            Ok(meta) => (
                std::fs::canonicalize(path).map_err(|e| CliError::io("resolving", path, e))?,
                Some(meta),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (resolve_links(path)?, None),
            Err(e) => return Err(CliError::io("reading", path, e)),
        };
        let (parent, name) = match target.file_name() {
            Some(name) => (directory_of(&target), name),
            None => {
                return Err(CliError::failure(format!(
                    "cannot write to {}",
                    path.display()
                )))
            }
        };
        let mut temp_name = OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".leankv-dump-{}", std::process::id()));
        let temp = parent.join(temp_name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            // Until it has the old file's permissions, nobody else reads it.
            .mode(if old.is_some() { 0o600 } else { 0o666 })
            .open(&temp)
            .map_err(|e| CliError::io("creating the temporary file", &temp, e))?;
        let replacement = Replacement {
            temp,
            target: target.clone(),
            file,
            committed: false,
        };
        if let Some(old) = old {
            // The owner first: a change of owner may clear the set-id bits of the mode.
            let new = replacement
                .file
                .metadata()
                .map_err(|e| CliError::io("reading", &replacement.temp, e))?;
            if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
                if let Err(error) =
                    std::os::unix::fs::fchown(&replacement.file, Some(old.uid()), Some(old.gid()))
                {
                    eprintln!(
                        "leankv: {} will belong to this user: keeping its owner (uid {}, gid \
                         {}) is not permitted: {error}",
                        path.display(),
                        old.uid(),
                        old.gid()
                    );
                }
            }
            replacement
                .file
                .set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))
                .map_err(|e| CliError::io("setting the permissions of", &replacement.temp, e))?;
        }
        Ok(Target::Replace(replacement))
    }

    /// Syncs the temporary file, renames it over the target and syncs the directory.
    fn commit(mut self) -> CliResult<()> {
        self.file
            .sync_all()
            .map_err(|e| CliError::io("syncing", &self.temp, e))?;
        std::fs::rename(&self.temp, &self.target)
            .map_err(|e| CliError::io("renaming the dump to", &self.target, e))?;
        self.committed = true;
        let parent = directory_of(&self.target);
        File::open(parent)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| {
                CliError::io("syncing", parent, e)
                    .context("the dump is complete, but may not survive a power loss")
            })
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Whether `path` names an open file of the process (/dev/stdout, /dev/fd/N, /proc/...), not a
/// file of that name.
fn is_special(path: &Path) -> bool {
    ["/dev/stdout", "/dev/stderr", "/dev/fd", "/proc"]
        .iter()
        .any(|special| path.starts_with(special))
}

/// The directory that holds `path` ("." for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// `path` with its symbolic links followed, for a file that does not exist yet (a link to a
/// file to be created is kept, and the file created where it points).
fn resolve_links(path: &Path) -> CliResult<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&path)
                    .map_err(|e| CliError::io("reading the link", &path, e))?;
                path = match path.parent() {
                    Some(parent) => parent.join(link),
                    None => link,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(CliError::failure(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}
