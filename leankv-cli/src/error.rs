//! Exit statuses and the one error type of the tool: every failure carries the status it ends
//! the process with and a message for standard error.

use std::fmt;
use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// What was asked for is not there: `get` or `del` of a missing key, a tree the database does
/// not have.
pub const NOT_FOUND: u8 = 1;
/// The command line is wrong (clap's own status for usage errors; also a bad hex argument, a
/// pool too small for the database, `compact` run from inside the database directory).
pub const USAGE: u8 = 2;
/// The database is damaged: `check` found problems, or a command met a corrupt page or
/// superblock.
pub const DAMAGED: u8 = 3;
/// Anything else failed: I/O, no database in the directory, not a leankv database, a
/// malformed or cut-off `load` input, a key or value over the limits, a `compact` copy that
/// did not verify or whose owner could not be kept.
pub const FAILURE: u8 = 4;
/// Another process has the database open (its lock is held); retry when it is done.
pub const IN_USE: u8 = 5;

/// The exit statuses as `--help` and the README list them.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  not found: `get`/`del` of a missing key, a tree the database does not have
  2  usage error (bad arguments, bad hex, a pool too small for the database,
     `compact` run from inside DIR)
  3  the database is damaged: `check` found problems, or a corrupt page was met
  4  failure: I/O error, no database in DIR, not a leankv database, malformed
     or cut-off `load` input, key or value too large, a `compact` copy that did
     not verify or whose owner could not be kept
  5  the database is in use: another process has it open";

/// A failure: the status to exit with and what to tell the user.
#[derive(Debug)]
pub struct CliError {
    /// The exit status (one of the constants above).
    pub code: u8,
    /// The message, printed to standard error after "leankv: ".
    pub message: String,
}

/// The result type of the commands.
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// A failure with status `code`.
    pub fn new(code: u8, message: impl Into<String>) -> CliError {
        CliError {
            code,
            message: message.into(),
        }
    }

    /// Something asked for is missing (status 1).
    pub fn not_found(message: impl Into<String>) -> CliError {
        CliError::new(NOT_FOUND, message)
    }

    /// A wrong argument (status 2).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(USAGE, message)
    }

    /// A general failure (status 4).
    pub fn failure(message: impl Into<String>) -> CliError {
        CliError::new(FAILURE, message)
    }

    /// An I/O error while doing `what`, on `path` (status 4).
    pub fn io(what: &str, path: &std::path::Path, error: std::io::Error) -> CliError {
        CliError::failure(format!("{what} {}: {error}", path.display()))
    }

    /// Prefixes the message with what was being done.
    pub fn context(mut self, what: impl fmt::Display) -> CliError {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The process's exit status.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<leankv::Error> for CliError {
    fn from(error: leankv::Error) -> CliError {
        let code = match &error {
            leankv::Error::Corruption { .. } => DAMAGED,
            leankv::Error::AlreadyOpen { .. } => IN_USE,
            // The only option the tool takes from the user is the pool size (`--pool-size`
            // too small for the database's page size).
            leankv::Error::InvalidOptions(_) => USAGE,
            _ => FAILURE,
        };
        CliError::new(code, error.to_string())
    }
}

/// Turns an error writing the output into a `CliError`. A closed pipe (`leankv scan ... |
/// head`) is not worth a message: it ends the command quietly with status 0 (the database is
/// still closed cleanly on the way out).
pub fn output_error(error: std::io::Error) -> CliError {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::new(OK, String::new())
    } else {
        CliError::failure(format!("writing the output: {error}"))
    }
}
