//! `recovery`'s arguments, the child's command line and reports, and the log-size sampling.

use super::*;
use crate::{Cli, Command as Cmd};
use clap::Parser;

fn parse(args: &[&str]) -> Result<RecoveryArgs, clap::Error> {
    let cli = Cli::try_parse_from(["leankv-bench", "recovery"].iter().chain(args))?;
    match cli.command {
        Some(Cmd::Recovery(args)) => Ok(args),
        _ => unreachable!("`recovery` parses to itself"),
    }
}

#[test]
fn arguments_parse_with_their_defaults_and_are_checked() {
    let args = parse(&[]).unwrap();
    assert_eq!((args.seconds, args.warehouses, args.threads), (60, 5, 2));
    assert_eq!(args.durability, DurabilityLevel::Eventual);
    assert_eq!((args.checkpoint_every, args.check), (None, false));
    args.validate().unwrap();
    let args = parse(&[
        "--seconds=10",
        "--warehouses=1",
        "--threads=1",
        "--durability=immediate",
        "--checkpoint-every=256M",
        "--pool=2x",
        "--check",
    ])
    .unwrap();
    assert_eq!(args.checkpoint_every, Some(256 << 20));
    assert_eq!(args.pool, PoolSize::OfData(2.0));
    assert_eq!(args.durability, DurabilityLevel::Immediate);
    assert!(args.check);
    args.validate().unwrap();
    for size in ["0", "512K", "lots"] {
        let error = parse(&["--checkpoint-every", size]).err().unwrap();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
    }
    let refused = |args: &[&str]| parse(args).unwrap().validate().unwrap_err().to_string();
    assert!(refused(&["--durability", "off"]).contains("nothing to recover"));
    assert!(refused(&["--threads", "3", "--warehouses", "2"]).contains("warehouse"));
    assert!(refused(&["--seconds", "0"]).contains("positive"));
}

#[test]
fn the_child_command_line_parses_back() {
    let child = ChildArgs {
        dir: "some dir/x".into(),
        warehouses: 3,
        threads: 2,
        durability: DurabilityLevel::None,
        pool_bytes: 96 << 20,
        checkpoint_every: Some(8 << 20),
        direct_io: false,
        seconds: 7,
    };
    for child in [
        child.clone(),
        ChildArgs {
            checkpoint_every: None,
            ..child
        },
    ] {
        let mut line = vec!["leankv-bench".into(), "recovery-child".into()];
        line.extend(child.to_args());
        match Cli::try_parse_from(line).unwrap().command {
            Some(Cmd::RecoveryChild(parsed)) => assert_eq!(parsed, child),
            _ => panic!("`recovery-child` parses to itself"),
        }
    }
}

#[test]
fn progress_lines_are_read_and_others_ignored() {
    let mut reported = Reported::default();
    reported.read("ready pool 64 MiB, WAL");
    reported.read("progress 120 4096");
    reported.read("something else");
    assert_eq!(reported.ready.as_ref().unwrap().1, "pool 64 MiB, WAL");
    assert_eq!(reported.transactions, Some(120));
    assert_eq!(reported.log_bytes_written, Some(4096));
}

#[test]
fn log_size_adds_both_files_and_their_blocks() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(LogSize::of(dir.path()).bytes, 0);
    std::fs::write(dir.path().join(LOG_FILES[0]), vec![1; 10_000]).unwrap();
    std::fs::write(dir.path().join(LOG_FILES[1]), vec![1; 5_000]).unwrap();
    std::fs::write(dir.path().join("leankv.pages"), vec![1; 50_000]).unwrap();
    let size = LogSize::of(dir.path());
    assert_eq!(size.bytes, 15_000);
    assert!(size.allocated_bytes >= 15_000, "{size:?}");
}
