//! The single-key and range commands: `get`, `put`, `del`, `scan`.

use crate::bytes::{Encoding, KeyRange};
use crate::cli::{DelArgs, RangeArgs, ScanArgs};
use crate::error::{output_error, CliError, CliResult};
use crate::format::{Encoded, OutRecord};
use crate::open::{self, existing_tree, with_db, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

/// `get`: the value to standard output, raw (or hex and a newline); status 1 if missing.
pub fn get(
    dir: &Path,
    tree: &str,
    key: &str,
    encoding: Encoding,
    options: OpenOptions,
) -> CliResult<()> {
    let key = encoding.parse("key", key)?;
    let db = open::open_existing(dir, options)?;
    let value = with_db(db, |db| Ok(existing_tree(db, tree)?.get(&key)?))?;
    let Some(value) = value else {
        return Err(CliError::not_found(format!(
            "no key {} in tree {tree:?}",
            encoding.show(&key)
        )));
    };
    let mut out = std::io::stdout().lock();
    if encoding.hex {
        writeln!(out, "{}", hex::encode(&value))
    } else {
        out.write_all(&value)
    }
    .and_then(|()| out.flush())
    .map_err(output_error)
}

/// `put`: stores the value (from the argument or standard input), creating what is missing.
pub fn put(
    dir: &Path,
    tree: &str,
    key: &str,
    value: Option<&str>,
    encoding: Encoding,
    options: OpenOptions,
) -> CliResult<()> {
    let key = encoding.parse("key", key)?;
    let value = match value {
        Some(value) => encoding.parse("value", value)?,
        None => {
            let mut value = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut value)
                .map_err(|e| CliError::failure(format!("reading standard input: {e}")))?;
            value
        }
    };
    let db = open::open_or_create(dir, options)?;
    with_db(db, |db| Ok(db.open_tree(tree)?.insert(&key, &value)?))
}

/// `del`: one key (status 1 if it was missing) or a range (prints the count).
pub fn del(args: &DelArgs, encoding: Encoding, quiet: bool, options: OpenOptions) -> CliResult<()> {
    let key = args
        .key
        .as_deref()
        .map(|key| encoding.parse("key", key))
        .transpose()?;
    let range = KeyRange::from_args(&args.range, encoding)?;
    let RangeArgs { prefix, from, to } = &args.range;
    if key.is_none() && prefix.is_none() && from.is_none() && to.is_none() {
        return Err(CliError::usage(
            "del needs a KEY, or a range: --prefix, --from and/or --to (--prefix '' for all)",
        ));
    }
    let db = open::open_existing(&args.dir, options)?;
    let tree = &args.tree;
    let removed = with_db(db, |db| {
        let handle = existing_tree(db, tree)?;
        match &key {
            Some(key) => Ok(u64::from(handle.remove(key)?)),
            None if range.is_empty() => Ok(0),
            None => Ok(handle.remove_range::<&[u8], _>(range.bounds())?),
        }
    })?;
    match key {
        Some(key) if removed == 0 => Err(CliError::not_found(format!(
            "no key {} in tree {tree:?}",
            encoding.show(&key)
        ))),
        Some(_) => Ok(()),
        None => {
            if !quiet {
                eprintln!("removed {removed} keys from tree {tree:?}");
            }
            Ok(())
        }
    }
}

/// `scan`: the pairs in a range, in key order (or reversed), as lines.
pub fn scan(args: &ScanArgs, encoding: Encoding, options: OpenOptions) -> CliResult<()> {
    let range = KeyRange::from_args(&args.range, encoding)?;
    let db = open::open_existing(&args.dir, options)?;
    with_db(db, |db| {
        let tree = existing_tree(db, &args.tree)?;
        if range.is_empty() {
            return Ok(());
        }
        let limit = usize::try_from(args.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let pairs = tree.range::<&[u8], _>(range.bounds());
        let mut print = |pair: leankv::Result<(Vec<u8>, Vec<u8>)>| -> CliResult<()> {
            let (key, value) = pair?;
            print_pair(&mut out, args, encoding, &key, &value).map_err(output_error)
        };
        if args.reverse {
            pairs.rev().take(limit).try_for_each(&mut print)?;
        } else {
            pairs.take(limit).try_for_each(&mut print)?;
        }
        out.flush().map_err(output_error)
    })
}

fn print_pair(
    out: &mut impl Write,
    args: &ScanArgs,
    encoding: Encoding,
    key: &[u8],
    value: &[u8],
) -> std::io::Result<()> {
    if args.json {
        let record = OutRecord {
            tree: &args.tree,
            key: Some(Encoded(key)),
            value: Some(Encoded(value)),
        };
        serde_json::to_writer(&mut *out, &record)?;
        return writeln!(out);
    }
    if args.keys_only {
        return writeln!(out, "{}", encoding.show(key));
    }
    writeln!(out, "{}\t{}", encoding.show(key), encoding.show(value))
}
