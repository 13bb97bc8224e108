//! `leankv load DIR`: applies JSON lines in the dump format (see `crate::format`), in write
//! batches of bounded size.
//!
//! Each batch is atomic; the load as a whole is not. On a malformed line, or a key or value
//! over the engine's limits, the load stops, and every line before it has been applied (the
//! batch in progress is written first), so the message's line number says exactly where to
//! resume. A batch whose write fails (I/O) is applied not at all, and the message names its
//! lines. An interrupted load (a kill, a crash) leaves a consistent database holding a prefix
//! of the batches.

use crate::error::{CliError, CliResult};
use crate::format::{parse_line, Change};
use crate::open::{self, with_db, OpenOptions};
use crate::progress::{self, Ticker};
use indicatif::ProgressBar;
use leankv::{Db, Tree, WriteBatch};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Instant;

/// A batch is written once it holds this many bytes of keys and values, even if it has fewer
/// changes than `--batch` asks for: memory stays bounded with large values.
const BATCH_BYTES: usize = 8 << 20;

/// What a load did.
#[derive(Debug, Default)]
struct Counts {
    lines: u64,
    inserted: u64,
    removed: u64,
    trees: u64,
}

/// Runs `load`.
pub fn run(
    dir: &Path,
    file: Option<&Path>,
    batch_size: u64,
    quiet: bool,
    options: OpenOptions,
) -> CliResult<()> {
    let (input, bar, by_bytes): (Box<dyn Read>, ProgressBar, bool) = match file {
        Some(path) => {
            let file = File::open(path).map_err(|e| CliError::io("opening", path, e))?;
            let len = file.metadata().map(|meta| meta.len()).unwrap_or(0);
            (Box::new(file), progress::bytes(len, quiet, "load"), true)
        }
        None => (
            Box::new(std::io::stdin().lock()),
            progress::pairs(None, quiet, "load"),
            false,
        ),
    };
    let started = Instant::now();
    let db = open::open_or_create(dir, options)?;
    let counts = with_db(db, |db| {
        let mut loader = Loader {
            db,
            trees: HashMap::new(),
            existing: db.tree_names()?.into_iter().collect(),
            batch: WriteBatch::new(),
            batch_first_line: 0,
            batch_bytes: 0,
            batch_size: usize::try_from(batch_size).unwrap_or(usize::MAX),
            counts: Counts::default(),
            line: 0,
        };
        let mut ticker = Ticker::new(bar);
        let result = loader.apply_all(BufReader::with_capacity(1 << 20, input), |bytes| {
            ticker.add(if by_bytes { bytes } else { 1 })
        });
        ticker.finish();
        // What came before a bad line is applied, as the message promises.
        let flushed = loader.write_batch();
        result.and(flushed)?;
        Ok(loader.counts)
    })?;
    if !quiet {
        eprintln!(
            "loaded {} lines: {} pairs stored, {} removals, {} trees created, in {:.2} s",
            counts.lines,
            counts.inserted,
            counts.removed,
            counts.trees,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

struct Loader<'a> {
    db: &'a Db,
    /// The trees met so far.
    trees: HashMap<String, Tree>,
    /// The trees the database had before the load.
    existing: HashSet<String>,
    batch: WriteBatch,
    /// The input line of the batch's first change.
    batch_first_line: u64,
    batch_bytes: usize,
    batch_size: usize,
    counts: Counts,
    /// The input line read last.
    line: u64,
}

impl Loader<'_> {
    /// Applies every line of `input`; `progress` gets each line's length in bytes.
    fn apply_all(
        &mut self,
        mut input: impl BufRead,
        mut progress: impl FnMut(u64),
    ) -> CliResult<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = input
                .read_until(b'\n', &mut line)
                .map_err(|e| CliError::failure(format!("reading the input: {e}")))?;
            if read == 0 {
                return Ok(());
            }
            self.line += 1;
            progress(read as u64);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let number = self.line;
            let change =
                parse_line(&line).map_err(|e| CliError::failure(format!("line {number}: {e}")))?;
            self.apply(change)?;
            self.counts.lines += 1;
        }
    }

    /// Adds `change` to the batch (writing the batch when full). A change the engine would
    /// refuse is refused here, on its own line, so that the lines before it are applied.
    fn apply(&mut self, change: Change) -> CliResult<()> {
        let number = self.line;
        let at_line = |error: CliError| error.context(format!("line {number}"));
        let too_large = |what: &str, len: usize, max: usize| {
            at_line(CliError::failure(format!(
                "{what} of {len} bytes exceeds the limit of {max} bytes"
            )))
        };
        match change {
            Change::Tree(name) => {
                self.tree(&name).map_err(at_line)?;
            }
            Change::Insert { tree, key, value } => {
                if key.len() > self.db.max_key_size() {
                    return Err(too_large("key", key.len(), self.db.max_key_size()));
                }
                if value.len() > self.db.max_value_size() {
                    return Err(too_large("value", value.len(), self.db.max_value_size()));
                }
                self.batch_bytes += key.len() + value.len();
                let tree = self.tree(&tree).map_err(at_line)?.clone();
                self.add(|batch| batch.insert(&tree, key, value));
                self.counts.inserted += 1;
            }
            Change::Remove { tree, key } => {
                let tree = self.tree(&tree).map_err(at_line)?.clone();
                // A key over the limit cannot be there: nothing to remove.
                if key.len() <= self.db.max_key_size() {
                    self.batch_bytes += key.len();
                    self.add(|batch| batch.remove(&tree, key));
                }
                self.counts.removed += 1;
            }
        }
        if self.batch.len() >= self.batch_size || self.batch_bytes >= BATCH_BYTES {
            self.write_batch()?;
        }
        Ok(())
    }

    fn add(&mut self, change: impl FnOnce(&mut WriteBatch)) {
        if self.batch.is_empty() {
            self.batch_first_line = self.line;
        }
        change(&mut self.batch);
    }

    /// The tree `name`, opened (and created if missing) on first use.
    fn tree(&mut self, name: &str) -> CliResult<&Tree> {
        if !self.trees.contains_key(name) {
            let tree = self.db.open_tree(name)?;
            if !self.existing.contains(name) {
                self.counts.trees += 1;
            }
            self.trees.insert(name.to_string(), tree);
        }
        Ok(&self.trees[name])
    }

    fn write_batch(&mut self) -> CliResult<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        self.db.write(batch).map_err(|e| {
            CliError::from(e).context(format!(
                "writing the changes of lines {} to {} (none of them was applied)",
                self.batch_first_line, self.line
            ))
        })
    }
}
