//! Child processes that take turns on the machine: one runs while the others are stopped
//! (`SIGSTOP`), each for a slice of time in rotation, until all have exited.
//!
//! Why: on a shared virtual machine the rate of a run moves by ±10% from one minute to the
//! next, so runs one after another pair poorly even round by round. Runs taking turns of a
//! fraction of a second see the same minutes: two identical builds of `leankv-bench` read
//! 0.998-1.014 in four 30-s trials in turns of 0.2 s on the 2-vCPU guest of bench/README
//! `s56-*`, where 15-s runs in sequence scattered by ±10%. Each run gets 1/N of the machine,
//! all its threads stopped and continued together; what one leaves running while stopped
//! (the kernel's write-back of its dirty pages, a device's pending requests) falls into the
//! others' turns, so runs that write much more than the others are favoured slightly.

use anyhow::{Context, Result};
use rustix::process::{kill_process, Pid, Signal};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How often the running child is checked for its exit within its turn.
const POLL: Duration = Duration::from_millis(5);

/// The children and what became of them; continues every child still alive when dropped (on
/// an error too), since a child left stopped would never exit.
struct Turns {
    children: Vec<Child>,
    exited: Vec<Option<ExitStatus>>,
}

impl Turns {
    fn signal(&self, index: usize, signal: Signal) -> Result<()> {
        kill_process(Pid::from_child(&self.children[index]), signal)
            .with_context(|| format!("signalling child {}", self.children[index].id()))
    }

    /// Whether child `index` has exited (noting its status).
    fn exited(&mut self, index: usize) -> Result<bool> {
        if self.exited[index].is_none() {
            self.exited[index] = self.children[index].try_wait()?;
        }
        Ok(self.exited[index].is_some())
    }

    /// The next child after `current` in rotation that has not exited (`current` itself if it
    /// is the only one); `None` once all have.
    fn next_alive(&mut self, current: usize) -> Result<Option<usize>> {
        let count = self.children.len();
        for step in 1..=count {
            let index = (current + step) % count;
            if !self.exited(index)? {
                return Ok(Some(index));
            }
        }
        Ok(None)
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        for (child, exited) in self.children.iter().zip(&self.exited) {
            if exited.is_none() {
                let _ = kill_process(Pid::from_child(child), Signal::CONT);
            }
        }
    }
}

/// Starts `commands` and runs them in turns of `slice` each, in the order given, until all
/// have exited; returns their exit statuses in that order.
pub fn run_in_turns(commands: Vec<Command>, slice: Duration) -> Result<Vec<ExitStatus>> {
    let mut turns = Turns {
        children: Vec::with_capacity(commands.len()),
        exited: vec![None; commands.len()],
    };
    for (index, mut command) in commands.into_iter().enumerate() {
        let child = command
            .spawn()
            .with_context(|| format!("starting {:?}", command.get_program()))?;
        turns.children.push(child);
        if index > 0 {
            turns.signal(index, Signal::STOP)?;
        }
    }
    let mut current = 0;
    loop {
        let turn_ends = Instant::now() + slice;
        loop {
            let now = Instant::now();
            if now >= turn_ends || turns.exited(current)? {
                break;
            }
            std::thread::sleep(POLL.min(turn_ends - now));
        }
        let Some(next) = turns.next_alive(current)? else {
            break;
        };
        if next != current {
            if !turns.exited(current)? {
                turns.signal(current, Signal::STOP)?;
            }
            turns.signal(next, Signal::CONT)?;
            current = next;
        }
    }
    Ok(turns
        .exited
        .iter()
        .map(|status| status.expect("every child exited"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell that counts to `n` and exits with `code`.
    fn counter(n: u32, code: i32) -> Command {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done; exit {code}"),
        ]);
        command
    }

    #[test]
    fn every_child_runs_to_its_end_in_turns_and_none_is_left_stopped() {
        let commands = vec![counter(20_000, 3), counter(2_000, 0), counter(5_000, 7)];
        let statuses = run_in_turns(commands, Duration::from_millis(2)).unwrap();
        let codes: Vec<Option<i32>> = statuses.iter().map(ExitStatus::code).collect();
        assert_eq!(codes, [Some(3), Some(0), Some(7)]);
    }

    #[test]
    fn a_child_that_cannot_start_is_an_error() {
        let mut sleeper = Command::new("sleep");
        sleeper.arg("0.1");
        let commands = vec![sleeper, Command::new("/no/such/program")];
        let error = run_in_turns(commands, Duration::from_millis(10)).unwrap_err();
        assert!(
            format!("{error:#}").contains("/no/such/program"),
            "{error:#}"
        );
    }
}
