//! Progress bars for the long commands (`dump`, `load`, `compact`): drawn on standard error
//! only when it is a terminal, the work is large, and `--quiet` is not given.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Work below this many pairs (or bytes of input for `load`, divided by 100) gets no bar: it
/// ends before a bar would tell anything.
const LARGE: u64 = 50_000;

/// A bar over `total` pairs (`None`: unknown, a spinner), hidden unless it is worth drawing.
pub fn pairs(total: Option<u64>, quiet: bool, what: &str) -> ProgressBar {
    if !shown(quiet, total.is_none_or(|total| total >= LARGE)) {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {human_pos}/{human_len} pairs ({eta} left)",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg} {human_pos} pairs ({elapsed})")
                .expect("a valid template"),
        ),
    };
    bar.with_message(what.to_string())
}

/// A bar over `total` bytes of input.
pub fn bytes(total: u64, quiet: bool, what: &str) -> ProgressBar {
    if !shown(quiet, total >= LARGE * 100) {
        return ProgressBar::hidden();
    }
    ProgressBar::new(total)
        .with_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        )
        .with_message(what.to_string())
}

fn shown(quiet: bool, large: bool) -> bool {
    !quiet && large && std::io::stderr().is_terminal()
}

/// Counts work into a bar without touching it for every pair.
pub struct Ticker {
    bar: ProgressBar,
    pending: u64,
}

impl Ticker {
    /// Counts into `bar`.
    pub fn new(bar: ProgressBar) -> Ticker {
        Ticker { bar, pending: 0 }
    }

    /// `n` more done.
    pub fn add(&mut self, n: u64) {
        self.pending += n;
        if self.pending >= 4096 {
            self.bar.inc(self.pending);
            self.pending = 0;
        }
    }

    /// Removes the bar.
    pub fn finish(self) {
        self.bar.inc(self.pending);
        self.bar.finish_and_clear();
    }
}
