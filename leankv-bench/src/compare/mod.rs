//! `leankv-bench compare`: the same benchmark run by two or more builds of `leankv-bench`, one
//! after another in every round (in reverse order in even rounds), or all at once taking turns
//! on the machine (`--interleave`), with their rates paired by round: what a code change is
//! worth, with its 95% confidence interval, from one sitting.
//!
//! Why a command: on a shared virtual machine the rate of a 15-s run moves by ±10% from one
//! minute to the next, so a change worth a few percent shows only in pairs of runs taken side
//! by side, many rounds over, with the order alternating (see `stats::round_order`), or in runs
//! taking turns of a fraction of a second (see `turns`). Each build runs as a child process
//! with the benchmark's own options, so the builds may be any two commits whose `ycsb` or
//! `tpcc` take those options.

mod turns;

use crate::report;
use crate::stats::{paired_table, round_order, Observation};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// The benchmarks whose records the comparison knows how to pair.
const BENCHMARKS: &[&str] = &["ycsb", "tpcc"];
/// Options the comparison sets for each child itself: where and under which label its
/// records go, and one round per child run.
const OWNED_OPTIONS: &[&str] = &[
    "--output-dir",
    "--results",
    "--label",
    "--repeat",
    "--publish",
];
/// Set by the comparison too when runs take turns: each at once needs a directory of its own.
const OWNED_WHEN_INTERLEAVED: &[&str] = &["--dir"];
/// Bounds of a turn: below, signalling costs more than the turn; above, runs see different
/// seconds.
const TURN_SECONDS: std::ops::RangeInclusive<f64> = 0.01..=10.0;
/// Record fields that tell runs of different shapes apart (those a record has).
const SHAPE_FIELDS: &[&str] = &[
    "threads",
    "warehouses",
    "affinity",
    "mix",
    "distribution",
    "reads",
    "read_batch",
    "target_ops_per_s",
    "records",
    "value_size",
    "pool_bytes",
    "cooling_fraction",
];

#[derive(Args)]
pub struct CompareArgs {
    /// A build to run, as NAME=PATH (a `leankv-bench` binary, e.g. one copied from
    /// target/release before a change); the first is the baseline. Two or more.
    #[arg(long = "build", required = true, value_parser = parse_build)]
    builds: Vec<Build>,
    /// Run each round's runs at once, taking turns of this many seconds on the machine (one
    /// runs while the others are stopped; 0.2 is a good turn), so that they see the same
    /// minutes of a shared machine's swings: ratios then resolve ~1% where runs in sequence
    /// scatter by ±10%. Each durability of the benchmark's `--durability` list is a run of its
    /// own, so one build is enough to pair durabilities. Each run gets its share of the
    /// machine: the rates recorded are that share of a run alone.
    #[arg(long, value_name = "SECONDS", value_parser = parse_turn)]
    interleave: Option<Duration>,
    /// Rounds: each build runs the benchmark once per round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    rounds: u16,
    /// Label of the records (each build's runs get `<label>-<NAME>`) [default: compare-<time>].
    #[arg(long)]
    label: Option<String>,
    /// Directory the children write into (results.jsonl, kept loads under data/, and each
    /// run's output under compare/); ignored by git.
    #[arg(long, default_value = crate::OUTPUT_DIR)]
    output_dir: PathBuf,
    /// The benchmark (`ycsb` or `tpcc`) and its options, after `--`, given to every build as
    /// they are: e.g. `-- ycsb --records 2000000 --mix a --threads 1 --durability off,eventual`.
    #[arg(last = true, required = true)]
    benchmark: Vec<String>,
}

/// One build under comparison.
#[derive(Debug, Clone, PartialEq)]
struct Build {
    name: String,
    path: PathBuf,
}

fn parse_build(text: &str) -> Result<Build, String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=PATH"))?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("build name {name:?} is empty or has spaces"));
    }
    Ok(Build {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

fn parse_turn(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !TURN_SECONDS.contains(&seconds) {
        return Err(format!(
            "a turn of {seconds} s is outside {}-{} s",
            TURN_SECONDS.start(),
            TURN_SECONDS.end()
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl CompareArgs {
    fn validate(&self) -> Result<()> {
        let runs_per_round = match self.interleave {
            None => self.builds.len(),
            Some(_) => self.builds.len() * durabilities(&self.benchmark).1.len(),
        };
        if runs_per_round < 2 {
            bail!(
                "--build: a comparison needs at least two builds (with --interleave, two \
                 builds or two durabilities)"
            );
        }
        for (i, build) in self.builds.iter().enumerate() {
            if self.builds[..i].iter().any(|b| b.name == build.name) {
                bail!("--build: the name {:?} is given twice", build.name);
            }
            if !build.path.is_file() {
                bail!(
                    "--build {}: {} is not a file",
                    build.name,
                    build.path.display()
                );
            }
        }
        let Some(benchmark) = self.benchmark.first() else {
            bail!("the benchmark to run goes after `--`");
        };
        if !BENCHMARKS.contains(&benchmark.as_str()) {
            bail!("compare runs {BENCHMARKS:?}, not {benchmark:?}");
        }
        for arg in &self.benchmark[1..] {
            let option = arg
                .split_once('=')
                .map_or(arg.as_str(), |(option, _)| option);
            let owned = OWNED_OPTIONS.contains(&option)
                || (self.interleave.is_some() && OWNED_WHEN_INTERLEAVED.contains(&option));
            if owned {
                bail!("{option} is set by compare for each run (see `compare --help`)");
            }
        }
        Ok(())
    }
}

/// Runs the comparison: every build once per round, then the table of paired ratios.
pub fn run(args: &CompareArgs) -> Result<()> {
    args.validate()?;
    let label = args
        .label
        .clone()
        .unwrap_or_else(|| crate::default_label("compare"));
    let logs = args.output_dir.join("compare");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let results = args.output_dir.join("results.jsonl");
    let mut observations = Vec::new();
    let rounds = usize::from(args.rounds);
    for round in 1..=rounds {
        let found = match args.interleave {
            None => sequential_round(args, &label, round, &logs, &results)?,
            Some(turn) => interleaved_round(args, &label, round, turn, &logs, &results)?,
        };
        for (build, found) in found {
            let rates: Vec<String> = found
                .iter()
                .map(|(_, o)| format!("{} {:.0}", o.setting, o.rate))
                .collect();
            println!("round {round}/{rounds}, {build}: {}", rates.join(", "));
            observations.extend(found);
        }
    }
    let (common, observations) = name_shapes(observations);
    let table = paired_table(&observations)
        .context("no runs paired up (did every build record its runs?)")?;
    println!(
        "\npaired by round ({rounds} rounds; every run: {}):\n{}",
        common.join(", "),
        table.render()
    );
    if let Some(turn) = args.interleave {
        println!(
            "runs took turns of {:.2} s: each rate is its share of the machine",
            turn.as_secs_f64()
        );
    }
    println!(
        "records appended to {} (label {label}-<build>)",
        results.display()
    );
    Ok(())
}

/// A round's observations, by build (as it ran).
type RoundObservations = Vec<(String, Vec<(Vec<String>, Observation)>)>;

/// Runs every build once, one after another in `round`'s order.
fn sequential_round(
    args: &CompareArgs,
    label: &str,
    round: usize,
    logs: &Path,
    results: &Path,
) -> Result<RoundObservations> {
    let mut found = Vec::new();
    for (_, build) in round_order(&args.builds.iter().collect::<Vec<_>>(), round) {
        let run_label = format!("{label}-{}", build.name);
        let log = logs.join(format!("{run_label}-{round}.log"));
        // Only what this run appends is read, not the whole (shared, growing) results file.
        let before = std::fs::metadata(results).map_or(0, |m| m.len());
        let mut command = child_command(build, &args.benchmark, args, &run_label, results, &log)?;
        let status = command
            .status()
            .with_context(|| format!("starting {}", build.path.display()))?;
        check_finished(&build.name, status, &log)?;
        let records = read_appended(results, before)
            .with_context(|| format!("reading {}", results.display()))?;
        found.push((build.name.clone(), observations(&records, build, round)?));
    }
    Ok(found)
}

/// Runs every build and durability at once, taking turns of `turn` (see [`turns`]), the
/// first turn going to them in `round`'s order; each writes its records to a file of its own,
/// then appended to `results`.
fn interleaved_round(
    args: &CompareArgs,
    label: &str,
    round: usize,
    turn: Duration,
    logs: &Path,
    results: &Path,
) -> Result<RoundObservations> {
    let (benchmark, durabilities) = durabilities(&args.benchmark);
    let runs: Vec<(&Build, Option<&String>)> = (args.builds.iter())
        .flat_map(|build| durabilities.iter().map(move |d| (build, d.as_ref())))
        .collect();
    let mut commands = Vec::new();
    let mut outputs = Vec::new();
    for (slot, (build, durability)) in round_order(&runs, round) {
        let run_label = format!("{label}-{}", build.name);
        let name = match durability {
            Some(durability) => format!("{} {durability}", build.name),
            None => build.name.clone(),
        };
        let file = format!(
            "{run_label}-{}-{round}",
            durability.map_or("", String::as_str)
        );
        let (log, own_results) = (
            logs.join(format!("{file}.log")),
            logs.join(format!("{file}.jsonl")),
        );
        let _ = std::fs::remove_file(&own_results);
        let mut options = benchmark.clone();
        if let Some(durability) = durability {
            options.extend(["--durability".to_string(), durability.clone()]);
        }
        // Each run slot keeps its own loads from round to round.
        let dir = args.output_dir.join(format!("data-turn-{slot}"));
        options.extend(["--dir".to_string(), dir.display().to_string()]);
        commands.push(child_command(
            build,
            &options,
            args,
            &run_label,
            &own_results,
            &log,
        )?);
        outputs.push((name, build, log, own_results));
    }
    let statuses = turns::run_in_turns(commands, turn)?;
    let mut found = Vec::new();
    for ((name, build, log, own_results), status) in outputs.into_iter().zip(statuses) {
        check_finished(&name, status, &log)?;
        let text = std::fs::read_to_string(&own_results)
            .with_context(|| format!("reading {}", own_results.display()))?;
        append(results, &text)?;
        std::fs::remove_file(&own_results)?;
        let records = report::parse_records(&text)?;
        found.push((name, observations(&records, build, round)?));
    }
    Ok(found)
}

/// The benchmark's options without its `--durability` list, and the list's values (`[None]`
/// where it gives none: the benchmark's default).
fn durabilities(benchmark: &[String]) -> (Vec<String>, Vec<Option<String>>) {
    let mut rest = Vec::new();
    let mut list = None;
    let mut args = benchmark.iter();
    while let Some(arg) = args.next() {
        if arg == "--durability" {
            list = args.next().cloned();
        } else if let Some(value) = arg.strip_prefix("--durability=") {
            list = Some(value.to_string());
        } else {
            rest.push(arg.clone());
        }
    }
    let values = match list {
        Some(list) => list
            .split(',')
            .map(|d| Some(d.trim().to_string()))
            .collect(),
        None => vec![None],
    };
    (rest, values)
}

fn append(results: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(results)
        .with_context(|| format!("opening {}", results.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

/// `records` of `build`'s run in `round` as observations (see [`observation`]).
fn observations(
    records: &[Value],
    build: &Build,
    round: usize,
) -> Result<Vec<(Vec<String>, Observation)>> {
    if records.is_empty() {
        bail!("build {} recorded no run", build.name);
    }
    records
        .iter()
        .map(|record| observation(record, &build.name, round))
        .collect()
}

/// The command running `build` with the benchmark's `options`, its records going to
/// `results` under `label`, its output to `log`.
fn child_command(
    build: &Build,
    options: &[String],
    args: &CompareArgs,
    label: &str,
    results: &Path,
    log: &Path,
) -> Result<Command> {
    let output =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(&build.path);
    command
        .args(options)
        .arg("--output-dir")
        .arg(&args.output_dir)
        .arg("--results")
        .arg(results)
        .args(["--label", label])
        .stdout(output.try_clone()?)
        .stderr(output);
    Ok(command)
}

/// Fails if the run `name` did not succeed, showing the end of its `log`.
fn check_finished(name: &str, status: ExitStatus, log: &Path) -> Result<()> {
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(10)..];
    bail!(
        "build {name} failed ({status}); the end of {}:\n{}",
        log.display(),
        tail.join("\n")
    )
}

/// The records appended to `results` past its first `offset` bytes.
fn read_appended(results: &Path, offset: u64) -> Result<Vec<Value>> {
    let mut file = std::fs::File::open(results)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    report::parse_records(&text)
}

/// A record of `build`'s run in `round` as an observation: its engine prefixed with the
/// build and its durability as the setting; its shape, still to be named (see
/// [`name_shapes`]), as the values of its [`SHAPE_FIELDS`].
fn observation(record: &Value, build: &str, round: usize) -> Result<(Vec<String>, Observation)> {
    let field = |name: &str| {
        record
            .get(name)
            .with_context(|| format!("a record without {name:?}: {record}"))
    };
    let text = |value: &Value| {
        value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string)
    };
    let rate = ["ops_per_s", "tps"]
        .iter()
        .find_map(|name| record.get(*name).and_then(Value::as_f64))
        .with_context(|| format!("a record without a rate (ops_per_s or tps): {record}"))?;
    let mut shape = vec![text(field("benchmark")?)];
    for name in SHAPE_FIELDS {
        if let Some(value) = record.get(*name) {
            shape.push(format!("{name} {}", text(value)));
        }
    }
    let observation = Observation {
        shape: String::new(),
        engine: format!("{build}: {}", text(field("engine")?)),
        setting: text(field("durability")?),
        round,
        rate,
    };
    Ok((shape, observation))
}

/// Names each observation's shape by the parts in which shapes differ, and returns the parts
/// every shape shares apart (a table row need not repeat them).
fn name_shapes(observations: Vec<(Vec<String>, Observation)>) -> (Vec<String>, Vec<Observation>) {
    let common: Vec<String> = observations.first().map_or_else(Vec::new, |(first, _)| {
        first
            .iter()
            .filter(|part| observations.iter().all(|(shape, _)| shape.contains(part)))
            .cloned()
            .collect()
    });
    let named = observations
        .into_iter()
        .map(|(shape, observation)| {
            let own: Vec<&str> = shape
                .iter()
                .filter(|part| !common.contains(part))
                .map(String::as_str)
                .collect();
            let shape = if own.is_empty() {
                "-".to_string()
            } else {
                own.join(", ")
            };
            Observation {
                shape,
                ..observation
            }
        })
        .collect();
    (common, named)
}

#[cfg(test)]
mod tests;
