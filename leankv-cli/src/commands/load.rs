//! `leankv load DIR`: applies JSON lines in the dump format (see `crate::format`), in write
//! batches of bounded size.
//!
//! Each batch is atomic; the load as a whole is not. On a malformed line, or a key or value
//! over the engine's limits, the load stops, and every line before it has been applied (the
//! batch in progress is written first), so the message's line number says exactly where to
//! resume. A batch whose write fails (I/O) is applied not at all, and the message names its
//! lines. An interrupted load (a kill, a crash) leaves a consistent database holding a prefix
//! of the batches.
//!
//! Trees are created when a line first names them, outside the batches (the engine creates a
//! tree on its own, not in a write batch). So an interrupted load can also leave a tree that
//! the input names with none of its pairs yet, empty: harmless (an empty tree holds no keys;
//! `del` or `load` again). Deferring the creation to the first batch that writes to the tree
//! would narrow that window, not close it, so the load does not pretend to.
//!
//! A dump's begin line (`{"begin":...}`) makes its end line (`{"end":...}`) mandatory, and the
//! end line's counts are checked against the lines read since the begin line: a dump cut off
//! (by a `dump` that failed or was killed, a truncated copy, a pipe that closed early) stops
//! the load with status 4 after every line that was there has been applied, instead of passing
//! for a whole one. Input without a begin line needs no end line.

use crate::error::{CliError, CliResult};
use crate::format::{parse_line, Change, EndInfo, Line, FORMAT_VERSION};
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
            begun_at: None,
            segment: EndInfo::default(),
        };
        let mut ticker = Ticker::new(bar);
        let result = loader
            .apply_all(BufReader::with_capacity(1 << 20, input), |bytes| {
                ticker.add(if by_bytes { bytes } else { 1 })
            })
            .and_then(|()| loader.check_ended());
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
    /// The line of the begin line of the dump being read, until its end line.
    begun_at: Option<u64>,
    /// The pair and tree lines since the last begin or end line (or the start).
    segment: EndInfo,
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
            let parsed =
                parse_line(&line).map_err(|e| CliError::failure(format!("line {number}: {e}")))?;
            match parsed {
                Line::Change(change) => {
                    match change {
                        Change::Tree(_) => self.segment.trees += 1,
                        Change::Insert { .. } | Change::Remove { .. } => self.segment.pairs += 1,
                    }
                    self.apply(change)?;
                }
                Line::Begin(begin) => {
                    if begin.format != FORMAT_VERSION {
                        return Err(CliError::failure(format!(
                            "line {number}: a dump in format {}, which this leankv does not \
                             read (it reads format {FORMAT_VERSION})",
                            begin.format
                        )));
                    }
                    if let Some(begun) = self.begun_at {
                        return Err(CliError::failure(format!(
                            "line {number}: a dump begins before the one begun on line {begun} \
                             ended: that dump is cut off (the lines before this one are applied)"
                        )));
                    }
                    self.begun_at = Some(number);
                    self.segment = EndInfo::default();
                }
                Line::End(end) => {
                    if end != self.segment {
                        let since = match self.begun_at {
                            Some(begun) => format!("since its begin line {begun}"),
                            None => "before it".to_string(),
                        };
                        return Err(CliError::failure(format!(
                            "line {number}: the dump's end line counts {} pair lines and {} \
                             tree lines, but {} and {} were read {since}: lines are missing or \
                             were added (the lines before this one are applied)",
                            end.pairs, end.trees, self.segment.pairs, self.segment.trees
                        )));
                    }
                    self.begun_at = None;
                    self.segment = EndInfo::default();
                }
            }
            self.counts.lines += 1;
        }
    }

    /// At the end of the input: a dump that began has ended.
    fn check_ended(&self) -> CliResult<()> {
        match self.begun_at {
            None => Ok(()),
            Some(begun) => Err(CliError::failure(format!(
                "the input ends after line {} without the end line of the dump begun on line \
                 {begun}: the dump is cut off (a dump that failed or was interrupted, or a \
                 partial copy); the lines that were there are applied",
                self.line
            ))),
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
