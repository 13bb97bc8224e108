//! The `plot` subcommand: selects records from a results file and renders one figure.

use crate::{plot, report};
use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;

#[derive(Args)]
pub struct PlotArgs {
    /// Results file to read (the published ones: bench/results/results.jsonl).
    #[arg(long, default_value = concat!("bench-output", "/results.jsonl"))]
    results: PathBuf,
    /// Records with this label (default: the label of the last record).
    #[arg(long)]
    label: Option<String>,
    /// `engines` (bars), `zipf` (throughput vs θ), `cooling` (throughput vs cooling %),
    /// `tpcc` (tps over time), `tpcc-threads` (tps over thread count) or `scan` (scan
    /// speeds over time).
    #[arg(long, default_value = "engines")]
    kind: String,
    /// Output SVG file.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "")]
    title: String,
}

pub fn bar_label(record: &Value) -> String {
    let pool = record["pool_to_data"].as_f64().unwrap_or(0.0);
    let place = if pool >= 1.0 {
        "in memory".to_string()
    } else {
        format!("pool={pool:.2}x data")
    };
    // Results from before the log have no durability.
    let durability = record["durability"]
        .as_str()
        .map_or(String::new(), |level| format!(" {level}"));
    format!(
        "{}{durability} {}T {}",
        record["engine"].as_str().unwrap_or("?"),
        record["threads"],
        place
    )
}

pub fn run(args: &PlotArgs) -> Result<()> {
    let all = report::read_records(&args.results)?;
    let Some(label) = args.label.clone().or_else(|| {
        all.last()
            .and_then(|r| r["label"].as_str().map(String::from))
    }) else {
        bail!("{} holds no records", args.results.display());
    };
    let records: Vec<Value> = all.into_iter().filter(|r| r["label"] == label).collect();
    if records.is_empty() {
        bail!("no records labelled {label:?}");
    }
    let title = if args.title.is_empty() {
        &label
    } else {
        &args.title
    };
    match args.kind.as_str() {
        "engines" => plot::engines(&records, title, bar_label, &args.out)?,
        "zipf" => plot::lines(&records, title, "theta", "Zipf θ", &args.out)?,
        "cooling" => {
            let records: Vec<Value> = records
                .iter()
                .cloned()
                .map(|mut r| {
                    let percent = r["cooling_fraction"].as_f64().unwrap_or(0.0) * 100.0;
                    r["cooling_percent"] = percent.into();
                    r
                })
                .collect();
            plot::lines(
                &records,
                title,
                "cooling_percent",
                "cooling stage, % of pool",
                &args.out,
            )?
        }
        "tpcc" => plot::tpcc_series(&records, title, &args.out)?,
        "tpcc-threads" => plot::threads(&records, title, "tps", &args.out)?,
        "scan" => plot::scan_series(&records, title, &args.out)?,
        other => {
            bail!("unknown plot kind {other:?} (engines, zipf, cooling, tpcc, tpcc-threads, scan)")
        }
    }
    println!(
        "plotted {} records into {}",
        records.len(),
        args.out.display()
    );
    Ok(())
}
