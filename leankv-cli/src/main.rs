//! `leankv`: the command-line tool for leankv databases. See README.md and `leankv --help`.
//!
//! A thin layer over leankv's public API: `cli` parses the command line, `commands` run it,
//! `error` maps every failure to its exit status.

mod bytes;
mod cli;
mod commands;
mod error;
mod format;
mod open;
mod progress;

use bytes::Encoding;
use clap::Parser;
use cli::{Cli, Command};
use error::CliResult;
use open::OpenOptions;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if !error.message.is_empty() {
                eprintln!("leankv: {error}");
            }
            error.exit_code()
        }
    }
}

fn run(cli: Cli) -> CliResult<()> {
    let options = OpenOptions {
        pool_size: cli.pool_size,
    };
    let encoding = Encoding { hex: cli.hex };
    let quiet = cli.quiet;
    match cli.command {
        Command::Stat { dir, json, pages } => commands::stat::run(&dir, json, pages, options),
        Command::Check { dir } => commands::check::run(&dir, options),
        Command::Get { dir, tree, key } => commands::kv::get(&dir, &tree, &key, encoding, options),
        Command::Put {
            dir,
            tree,
            key,
            value,
            stdin: _,
        } => commands::kv::put(&dir, &tree, &key, value.as_deref(), encoding, options),
        Command::Del(args) => commands::kv::del(&args, encoding, quiet, options),
        Command::Scan(args) => commands::kv::scan(&args, encoding, options),
        Command::Dump { dir, tree, output } => {
            commands::dump::run(&dir, tree.as_deref(), output.as_deref(), quiet, options)
        }
        Command::Load { dir, file, batch } => {
            commands::load::run(&dir, file.as_deref(), batch, quiet, options)
        }
        Command::Compact { dir } => commands::compact::run(&dir, quiet, options),
    }
}
