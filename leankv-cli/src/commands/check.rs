//! `leankv check DIR`: the engine's integrity check, plus the trees' key counts against the
//! pairs found in their leaves. Prints the report; status 3 when anything is damaged.

use crate::error::{output_error, CliError, CliResult, DAMAGED};
use crate::open::{self, with_db, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Runs `check`.
pub fn run(dir: &Path, options: OpenOptions) -> CliResult<()> {
    // A database too damaged to open is damaged: status 3 as for problems found in it.
    let db = open::open_existing(dir, options)?;
    let report = with_db(db, |db| {
        let mut report = db.check_integrity()?;
        if !report.is_ok() {
            // Opening the trees to count them could fail on the damage already reported.
            return Ok(report);
        }
        // Every leaf pair is a tree's key or a catalog entry (one per tree); the counts the
        // trees keep must add up to what the walk found.
        let names = db.tree_names()?;
        let mut counted = names.len() as u64;
        for name in &names {
            counted += db.open_tree(name)?.len()?;
        }
        if counted != report.entries {
            report.problems.push(format!(
                "the trees' key counts and the catalog add up to {counted} entries, but the \
                 leaves hold {}",
                report.entries
            ));
        }
        Ok(report)
    })?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}: {report}", dir.display())
        .and_then(|()| {
            if report.is_ok() {
                writeln!(out)
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush())
        .map_err(output_error)?;
    if report.is_ok() {
        Ok(())
    } else {
        Err(CliError::new(
            DAMAGED,
            format!(
                "{} is damaged: {} problem(s)",
                dir.display(),
                report.problems.len()
            ),
        ))
    }
}
