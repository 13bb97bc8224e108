//! `leankv dump DIR [TREE]`: every tree (or one) as JSON lines (see `crate::format`).

use crate::error::{output_error, CliError, CliResult};
use crate::format::{Encoded, OutRecord};
use crate::open::{self, existing_tree, with_db, OpenOptions};
use crate::progress::{self, Ticker};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
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
    let (trees, pairs) = with_db(db, |db| {
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
        let sink: Box<dyn Write> = match output {
            Some(path) => {
                Box::new(File::create(path).map_err(|e| CliError::io("creating", path, e))?)
            }
            None => Box::new(std::io::stdout().lock()),
        };
        let mut out = BufWriter::with_capacity(1 << 20, sink);
        let mut ticker = Ticker::new(progress::pairs(Some(total), quiet, "dump"));
        let mut pairs = 0u64;
        for name in &names {
            let tree = db.open_tree(name)?;
            write_record(&mut out, name, None).map_err(output_error)?;
            let mut failed = None;
            tree.scan::<&[u8], _>(.., |key, value| {
                match write_record(&mut out, name, Some((key, value))) {
                    Ok(()) => {
                        pairs += 1;
                        ticker.add(1);
                        true
                    }
                    Err(error) => {
                        failed = Some(error);
                        false
                    }
                }
            })?;
            if let Some(error) = failed {
                return Err(output_error(error));
            }
        }
        ticker.finish();
        out.flush().map_err(output_error)?;
        if output.is_some() {
            let file = out.into_inner().map_err(|e| output_error(e.into_error()))?;
            drop(file);
        }
        Ok((names.len(), pairs))
    })?;
    if let Some(path) = output {
        // A dump to a file is complete only once it is on disk (a device or a pipe given as
        // the file has nothing to sync).
        let file = File::open(path).map_err(|e| CliError::io("opening", path, e))?;
        if file.metadata().is_ok_and(|meta| meta.is_file()) {
            file.sync_all()
                .map_err(|e| CliError::io("syncing", path, e))?;
        }
    }
    if !quiet {
        eprintln!(
            "dumped {pairs} pairs of {trees} trees in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn write_record(
    out: &mut impl Write,
    tree: &str,
    pair: Option<(&[u8], &[u8])>,
) -> std::io::Result<()> {
    let record = OutRecord {
        tree,
        key: pair.map(|(key, _)| Encoded(key)),
        value: pair.map(|(_, value)| Encoded(value)),
    };
    serde_json::to_writer(&mut *out, &record)?;
    out.write_all(b"\n")
}
