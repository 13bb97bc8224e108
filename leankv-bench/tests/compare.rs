//! `leankv-bench compare` end to end: two builds (here the same binary under two names) run
//! alternately, or at once taking turns, their records land in the results file, and their
//! rates pair up by round.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_leankv-bench");

/// Runs `leankv-bench compare` with `args` (its output under `dir`); returns its stdout once
/// it succeeded.
fn compare(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(BENCH)
        .arg("compare")
        .arg("--output-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The runs in the order they were reported: `round r/R, NAME`.
fn round_order(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|line| line.starts_with("round "))
        .map(|line| line.split(':').next().unwrap())
        .collect()
}

#[test]
fn two_builds_alternate_by_round_and_pair_up() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (format!("a={BENCH}"), format!("b={BENCH}"));
    let stdout = compare(
        dir.path(),
        &[
            "--rounds",
            "2",
            "--label",
            "t",
            "--build",
            &a,
            "--build",
            &b,
            "--",
            "ycsb",
            "--records",
            "5000",
            "--duration",
            "1",
            "--pool",
            "2x",
            "--durability",
            "off",
            "--direct-io",
            "false",
        ],
    );
    // Round 1 runs the builds as listed, round 2 in reverse.
    assert_eq!(
        round_order(&stdout),
        [
            "round 1/2, a",
            "round 1/2, b",
            "round 2/2, b",
            "round 2/2, a"
        ]
    );
    let paired = stdout
        .lines()
        .find(|line| line.contains("b: leankv off / a: leankv off"))
        .unwrap_or_else(|| panic!("no paired row in {stdout}"));
    let columns: Vec<&str> = paired.split_whitespace().collect();
    assert!(columns.contains(&"2"), "two rounds: {paired}");
    assert!(stdout.contains("every run: ycsb, threads 1"), "{stdout}");
    let results = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    let labels: Vec<String> = results
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["label"].to_string())
        .collect();
    assert_eq!(labels, ["\"t-a\"", "\"t-b\"", "\"t-b\"", "\"t-a\""]);
    // Each run's output is kept.
    assert!(dir.path().join("compare/t-b-2.log").is_file());
}

#[test]
fn a_failing_build_stops_the_comparison_with_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BENCH)
        .args(["compare", "--rounds", "1"])
        .args([
            "--build",
            &format!("a={BENCH}"),
            "--build",
            "broken=/bin/false",
        ])
        .arg("--output-dir")
        .arg(dir.path())
        .args(["--", "ycsb", "--records", "2000", "--duration", "1"])
        .args(["--durability", "off", "--direct-io", "false"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("build broken failed"), "{stderr}");
}

#[test]
fn durabilities_of_one_build_take_turns_and_pair_up() {
    let dir = tempfile::tempdir().unwrap();
    let a = format!("a={BENCH}");
    let stdout = compare(
        dir.path(),
        &[
            "--rounds",
            "2",
            "--label",
            "t",
            "--interleave",
            "0.05",
            "--build",
            &a,
            "--",
            "ycsb",
            "--records",
            "5000",
            "--duration",
            "1",
            "--durability",
            "off,none",
            "--direct-io",
            "false",
        ],
    );
    // Both durabilities ran in each round, first turns in reverse in round 2.
    assert_eq!(
        round_order(&stdout),
        [
            "round 1/2, a off",
            "round 1/2, a none",
            "round 2/2, a none",
            "round 2/2, a off"
        ]
    );
    let paired = stdout
        .lines()
        .find(|line| line.contains("a: leankv none / a: leankv off"))
        .unwrap_or_else(|| panic!("no paired row in {stdout}"));
    assert!(paired.split_whitespace().any(|c| c == "2"), "{paired}");
    assert!(stdout.contains("took turns"), "{stdout}");
    // Every run's records reached the shared results file; each run kept its own loads.
    let results = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    assert_eq!(results.lines().count(), 4, "{results}");
    assert!(dir.path().join("data-turn-0").is_dir());
    assert!(dir.path().join("data-turn-1").is_dir());
}
