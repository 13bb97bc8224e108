//! `leankv-bench compare`: the same benchmark run by two or more builds of `leankv-bench`, one
//! after another in every round (in reverse order in even rounds), with their rates paired by
//! round: what a code change is worth, with its 95% confidence interval, from one sitting.
//!
//! Why a command: on a shared virtual machine the rate of a 15-s run moves by ±10% from one
//! minute to the next, so a change worth a few percent shows only in pairs of runs taken side
//! by side, many rounds over, with the order alternating (see `stats::round_order`). Each
//! build runs as a child process with the benchmark's own options, so the builds may be any two
//! commits whose `ycsb` or `tpcc` take those options.

use crate::report;
use crate::stats::{paired_table, round_order, Observation};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

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

impl CompareArgs {
    fn validate(&self) -> Result<()> {
        if self.builds.len() < 2 {
            bail!("--build: a comparison needs at least two builds");
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
            if OWNED_OPTIONS.contains(&option) {
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
        for (_, build) in round_order(&args.builds.iter().collect::<Vec<_>>(), round) {
            let run_label = format!("{label}-{}", build.name);
            let log = logs.join(format!("{run_label}-{round}.log"));
            let records = run_build(build, args, &run_label, &results, &log)?;
            let found: Vec<(Vec<String>, Observation)> = records
                .iter()
                .map(|record| observation(record, &build.name, round))
                .collect::<Result<_>>()?;
            let rates: Vec<String> = found
                .iter()
                .map(|(_, o)| format!("{} {:.0}", o.setting, o.rate))
                .collect();
            println!(
                "round {round}/{rounds}, {}: {}",
                build.name,
                rates.join(", ")
            );
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
    println!(
        "records appended to {} (label {label}-<build>)",
        results.display()
    );
    Ok(())
}

/// Runs `build` once with the benchmark's options; returns the records it appended to
/// `results`. Its output goes to `log`, whose end is shown if it fails.
fn run_build(
    build: &Build,
    args: &CompareArgs,
    label: &str,
    results: &Path,
    log: &Path,
) -> Result<Vec<Value>> {
    // Only what this run appends is read, not the whole (shared, growing) results file.
    let before = std::fs::metadata(results).map_or(0, |m| m.len());
    let output =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let status = Command::new(&build.path)
        .args(&args.benchmark)
        .arg("--output-dir")
        .arg(&args.output_dir)
        .arg("--results")
        .arg(results)
        .args(["--label", label])
        .stdout(output.try_clone()?)
        .stderr(output)
        .status()
        .with_context(|| format!("starting {}", build.path.display()))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(10)..];
        bail!(
            "build {} failed ({status}); the end of {}:\n{}",
            build.name,
            log.display(),
            tail.join("\n")
        );
    }
    let appended =
        read_appended(results, before).with_context(|| format!("reading {}", results.display()))?;
    if appended.is_empty() {
        bail!(
            "build {} recorded no run in {}",
            build.name,
            results.display()
        );
    }
    Ok(appended)
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
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        compare: CompareArgs,
    }

    fn parse(args: &[&str]) -> std::result::Result<CompareArgs, String> {
        let cli = Cli::try_parse_from(["compare"].iter().chain(args)).map_err(|e| e.to_string())?;
        cli.compare.validate().map_err(|e| e.to_string())?;
        Ok(cli.compare)
    }

    #[test]
    fn builds_and_the_benchmark_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("bench");
        std::fs::write(&exe, "").unwrap();
        let a = format!("a={}", exe.display());
        let b = format!("b={}", exe.display());
        let args = parse(&["--build", &a, "--build", &b, "--", "ycsb", "--threads", "2"]).unwrap();
        assert_eq!(args.builds[1].name, "b");
        assert_eq!(args.benchmark, vec!["ycsb", "--threads", "2"]);
        assert_eq!(args.rounds, 5);
        let refused = |args: &[&str], why: &str| {
            let error = parse(args).err().expect("refused");
            assert!(error.contains(why), "{error}");
        };
        refused(&["--build", &a, "--", "ycsb"], "at least two");
        refused(&["--build", &a, "--build", &a, "--", "ycsb"], "twice");
        refused(
            &["--build", &a, "--build", "b=/no/such/file", "--", "ycsb"],
            "not a file",
        );
        refused(&["--build", &a, "--build", "b", "--", "ycsb"], "NAME=PATH");
        refused(
            &["--build", &a, "--build", &b, "--", "scan"],
            "not \"scan\"",
        );
        refused(
            &["--build", &a, "--build", &b, "--", "ycsb", "--repeat", "3"],
            "--repeat",
        );
        refused(
            &["--build", &a, "--build", &b, "--", "tpcc", "--label=x"],
            "--label",
        );
        refused(&["--build", &a, "--build", &b], "required");
    }

    #[test]
    fn a_record_becomes_an_observation_of_its_build_shape_and_durability() {
        let ycsb: Value = serde_json::json!({
            "benchmark": "ycsb", "engine": "leankv", "durability": "eventual", "threads": 2,
            "mix": "ycsb-a", "pool_bytes": 1 << 20, "ops_per_s": 1000.5, "round": 1,
        });
        let (shape, seen) = observation(&ycsb, "new", 3).unwrap();
        assert_eq!(seen.engine, "new: leankv");
        assert_eq!(seen.setting, "eventual");
        assert_eq!(
            shape,
            ["ycsb", "threads 2", "mix ycsb-a", "pool_bytes 1048576"]
        );
        assert_eq!((seen.round, seen.rate), (3, 1000.5));
        let tpcc: Value = serde_json::json!({
            "benchmark": "tpcc", "engine": "leankv", "durability": "off", "threads": 1,
            "warehouses": 5, "tps": 20.0,
        });
        let (shape, _) = observation(&tpcc, "a", 1).unwrap();
        assert_eq!(shape, ["tpcc", "threads 1", "warehouses 5"]);
        // Named by what differs; what all share is given apart.
        let mut one_thread = ycsb.clone();
        one_thread["threads"] = 1.into();
        let seen = [(&ycsb, "a"), (&one_thread, "a"), (&ycsb, "b")]
            .map(|(record, build)| observation(record, build, 1).unwrap());
        let (common, named) = name_shapes(seen.to_vec());
        assert_eq!(common, ["ycsb", "mix ycsb-a", "pool_bytes 1048576"]);
        let shapes: Vec<&str> = named.iter().map(|o| o.shape.as_str()).collect();
        assert_eq!(shapes, ["threads 2", "threads 1", "threads 2"]);
        let (_, alike) = name_shapes(vec![seen[0].clone()]);
        assert_eq!(alike[0].shape, "-");
        let rateless = serde_json::json!({"benchmark": "ycsb", "engine": "x", "durability": "off"});
        let error = observation(&rateless, "a", 1).unwrap_err().to_string();
        assert!(error.contains("without a rate"), "{error}");
    }
}
