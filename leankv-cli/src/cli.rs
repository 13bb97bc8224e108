//! The command line: clap's derive definitions with their help texts.

use crate::error::EXIT_STATUS_HELP;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  leankv put ./db users ada lovelace         create ./db and tree \"users\" if missing
  leankv get ./db users ada                  prints lovelace (no newline added)
  leankv --hex put ./db blobs 00ff 'c0ffee'  key and value in hex
  leankv scan ./db users --prefix a --limit 10
  leankv scan ./db users --from a --to m --reverse
  leankv del ./db users --prefix tmp/        remove every key starting with tmp/
  leankv stat ./db
  leankv check ./db || echo damaged
  leankv dump ./db > db.jsonl                every tree, one JSON object per line
  leankv load ./copy < db.jsonl              read a dump back (into a new or existing database)
  leankv compact ./db                        give the free pages' space back";

/// Inspect, check, query, dump, load and compact leankv databases.
///
/// DIR is a database directory (the page file `leankv.pages` and the log files live in it).
/// Only `put` and `load` create a database that is not there; every command takes the
/// database's lock, so it fails (status 5) while another process has the database open.
#[derive(Debug, Parser)]
#[command(name = "leankv", version, after_help = after_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Memory for the buffer pool (e.g. 64MiB, 1GiB); pages beyond it stay on disk. Too
    /// small a pool for the database's page size is a usage error (status 2).
    #[arg(long, global = true, default_value = "64MiB", value_parser = parse_pool_size)]
    pub pool_size: usize,

    /// Keys and values on the command line are hex (KEY, VALUE, --prefix, --from, --to), and
    /// `get` and `scan` print them as hex.
    #[arg(short = 'x', long, global = true)]
    pub hex: bool,

    /// No progress bars and no summaries on standard error (errors are still reported).
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

fn after_help() -> String {
    format!("{EXAMPLES}\n\n{EXIT_STATUS_HELP}")
}

/// A pool size: a size with an optional unit, above zero and addressable (the engine checks
/// that it holds enough pages of the database's page size, which only the open knows).
fn parse_pool_size(text: &str) -> Result<usize, String> {
    let bytes = parse_size::Config::new()
        .with_binary()
        .parse_size(text)
        .map_err(|e| e.to_string())?;
    if bytes == 0 {
        return Err("the pool size must be larger than 0".into());
    }
    usize::try_from(bytes).map_err(|_| format!("{bytes} bytes is too large a pool"))
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show trees, key counts, pages, free pages, file sizes and format version
    ///
    /// With --pages, also each tree's pages (leaves, inner nodes, large values), height and
    /// how full its leaves are: this walks every page, reading the whole page file.
    Stat {
        /// The database directory.
        dir: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Walk every tree's pages to report each tree's room (reads the whole page file).
        #[arg(long)]
        pages: bool,
    },
    /// Check the integrity of the database; status 3 if damaged
    ///
    /// Walks every tree on disk: checksums, node structure, key order, fence keys, page
    /// ownership, and the trees' key counts against the pairs in their leaves. Prints the
    /// report; exits with status 3 and lists what is damaged if anything is.
    Check {
        /// The database directory.
        dir: PathBuf,
    },
    /// Print the value of a key; status 1 if missing
    ///
    /// Prints the value's raw bytes, no newline added (with --hex: hex and a newline). Exits
    /// with status 1 if the key or the tree is missing.
    Get {
        /// The database directory.
        dir: PathBuf,
        /// The tree.
        tree: String,
        /// The key.
        key: String,
    },
    /// Store a value under a key, creating the database and the tree if missing
    Put {
        /// The database directory.
        dir: PathBuf,
        /// The tree.
        tree: String,
        /// The key.
        key: String,
        /// The value (or --stdin).
        #[arg(required_unless_present = "stdin")]
        value: Option<String>,
        /// Read the value from standard input, byte for byte (for binary or long values).
        #[arg(long, conflicts_with = "value")]
        stdin: bool,
    },
    /// Remove a key, or every key in a range or with a prefix
    ///
    /// With KEY: removes it; status 1 if it was not there. With --prefix, --from and/or --to:
    /// removes every key in the range as one atomic removal (whole leaves are freed) and says
    /// how many keys it removed.
    #[command(alias = "rm")]
    Del(DelArgs),
    /// Print the pairs of a tree (or a range of it) in key order
    ///
    /// One `key<TAB>value` line per pair: text with \\, tab, newline, carriage return and
    /// other control characters escaped (\\, \t, \n, \r, \xNN) and bytes that are not UTF-8
    /// as \xNN; hex with --hex; JSON lines in the dump format with --json.
    Scan(ScanArgs),
    /// Write every tree (or one) as JSON lines
    ///
    /// A `{"begin":{"format":1}}` line, then a `{"tree":NAME}` line per tree, each followed by a
    /// `{"tree":NAME,"key":K,"value":V}` line per pair in key order, and last an
    /// `{"end":{"pairs":N,"trees":M}}` line that lets `load` notice a dump that was cut off. K
    /// and V are JSON strings when they are valid UTF-8, else `{"base64":"..."}`. With -o FILE
    /// the dump goes to a temporary file beside FILE, which replaces FILE (keeping its
    /// permissions) only once the dump is complete and synced: a failed dump leaves FILE as it
    /// was.
    Dump {
        /// The database directory.
        dir: PathBuf,
        /// Only this tree.
        tree: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Read JSON lines in the format of `dump` and apply them
    ///
    /// A tree line creates the tree, a pair line stores the pair, a pair line with
    /// `"value":null` removes the key. Creates the database if missing; existing keys not in
    /// the input are kept. Each batch is atomic; a malformed line stops the load (status 4)
    /// after every line before it has been applied. A dump's begin line requires its end line,
    /// whose counts are checked: a cut-off dump stops the load (status 4) after the lines that
    /// are there have been applied. Trees are created outside the batches, so an interrupted
    /// load may leave a tree it names empty.
    Load {
        /// The database directory.
        dir: PathBuf,
        /// Read this file instead of standard input.
        #[arg(short, long)]
        file: Option<PathBuf>,
        /// Changes per atomic write batch.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        batch: u64,
    },
    /// Rewrite the database without free pages and swap it in atomically
    ///
    /// Copies every tree into a new database beside DIR (in `.NAME.compact-PID/db`), verifies
    /// the copy, gives its files the owner, group and mode of the old ones, and exchanges the two
    /// directories in one atomic step; prints the sizes before and after. (The page file never
    /// shrinks otherwise: freed pages are only reused.) Needs disk space for the copy. An
    /// interruption leaves DIR holding the old or the new database, never neither; the next
    /// compact removes what it left. Must be run from outside DIR (status 2 otherwise), and by
    /// a user who may keep the files' owner and group (the owner or root).
    Compact {
        /// The database directory.
        dir: PathBuf,
    },
}

/// `del`: one key, or a range (one of the two must be given; `kv::del` checks).
#[derive(Debug, Args)]
pub struct DelArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// The tree.
    pub tree: String,
    /// The key to remove.
    #[arg(conflicts_with_all = ["prefix", "from", "to"])]
    pub key: Option<String>,
    #[command(flatten)]
    pub range: RangeArgs,
}

/// `scan`: which pairs, in which order, printed how.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// The tree.
    pub tree: String,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Descending key order.
    #[arg(long)]
    pub reverse: bool,
    /// Print at most this many pairs.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Print only the keys.
    #[arg(long, conflicts_with = "json")]
    pub keys_only: bool,
    /// Print JSON lines in the format of `dump` (its pair lines only).
    #[arg(long)]
    pub json: bool,
}

/// A key range: keys with a prefix, from a key (included), to a key (excluded); together,
/// the keys that satisfy all given.
#[derive(Debug, Args)]
pub struct RangeArgs {
    /// Only keys starting with this prefix (an empty prefix matches every key).
    #[arg(long)]
    pub prefix: Option<String>,
    /// Only keys at or after this key.
    #[arg(long)]
    pub from: Option<String>,
    /// Only keys before this key (excluded).
    #[arg(long)]
    pub to: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
