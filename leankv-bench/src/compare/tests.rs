//! The comparison's options and records; runs taking turns are tested in `turns`.

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
    // Taking turns, one build pairs its durabilities; each run gets its own directory.
    let turns = |turn: &str, builds: &[&str], benchmark: &[&str]| {
        let mut args = vec!["--interleave".to_string(), turn.to_string()];
        for build in builds {
            args.extend(["--build".to_string(), build.to_string()]);
        }
        args.push("--".to_string());
        args.extend(benchmark.iter().map(|arg| arg.to_string()));
        args
    };
    fn as_strs(args: &[String]) -> Vec<&str> {
        args.iter().map(String::as_str).collect()
    }
    let one = turns("0.2", &[&a], &["tpcc", "--durability", "off,eventual"]);
    let one = parse(&as_strs(&one)).unwrap();
    assert_eq!(one.interleave, Some(Duration::from_millis(200)));
    let refused_turns = |turn: &str, builds: &[&str], benchmark: &[&str], why: &str| {
        refused(&as_strs(&turns(turn, builds, benchmark)), why);
    };
    refused_turns("0.2", &[&a], &["tpcc"], "at least two");
    refused_turns("0.2", &[&a, &b], &["ycsb", "--dir", "x"], "--dir");
    refused_turns("20", &[&a, &b], &["ycsb"], "outside");
    refused_turns("x", &[&a, &b], &["ycsb"], "seconds");
    // Without turns, `--dir` stays the benchmark's own.
    parse(&["--build", &a, "--build", &b, "--", "ycsb", "--dir", "x"]).unwrap();
}

#[test]
fn each_durability_of_the_list_is_a_run_of_its_own() {
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (rest, list) = durabilities(&args(&[
        "tpcc",
        "--durability",
        "off,eventual",
        "--threads",
        "2",
    ]));
    assert_eq!(rest, args(&["tpcc", "--threads", "2"]));
    assert_eq!(
        list,
        [Some("off".to_string()), Some("eventual".to_string())]
    );
    let (rest, list) = durabilities(&args(&["ycsb", "--durability=none"]));
    assert_eq!(
        (rest, list),
        (args(&["ycsb"]), vec![Some("none".to_string())])
    );
    let (rest, list) = durabilities(&args(&["ycsb", "--threads", "1"]));
    assert_eq!(
        (rest, list),
        (args(&["ycsb", "--threads", "1"]), vec![None])
    );
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
