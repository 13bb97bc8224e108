//! TPC-C (the paper's main workload, Fig. 1 and 7–9) over the key-value interface: nine
//! relations and two secondary indexes as tables (`schema`), the specification's loader
//! (`load`, with the generators of `random`), the five transactions (`txn`) in the standard
//! mix without think times, and the consistency conditions (`check`).
//!
//! Each run starts from a freshly loaded database: engines with files load once into
//! `<dir>/tpcc-<format>-<W>w` and every run works on a copy; the in-memory baselines load per
//! run. A monitor samples throughput, page I/O, bytes written and the data size every second,
//! so runs whose data outgrows the pool (Fig. 9) show where and how throughput changes.

pub mod check;
mod driver;
pub mod load;
pub mod random;
mod results;
pub mod schema;
mod setup;
#[cfg(test)]
mod tests;
pub mod txn;

pub(crate) use driver::run_workers;
use driver::RunShape;
pub use results::{paired, summary, table, TpccRecord};
pub use setup::Config;
pub(crate) use setup::{copy_dir, ensure_loaded};

use crate::engine::{EngineKind, PoolSize};
use crate::harness::Environment;
use crate::report;
use crate::stats::round_order;
use anyhow::{bail, Context, Result};

/// Runs `config`, appending each run to the results file; fails if a check fails.
pub fn run(config: &Config) -> Result<Vec<TpccRecord>> {
    if config.warehouses == 0 || config.threads.contains(&0) {
        bail!("warehouses and threads must be positive");
    }
    if config.durabilities.is_empty() {
        bail!("no durability to run");
    }
    let most_threads = config.threads.iter().copied().max().unwrap_or(1);
    if config.affinity && most_threads > config.warehouses as usize {
        bail!(
            "with warehouse affinity every worker needs a warehouse of its own: {} threads, \
             {} warehouses (add warehouses or pass --affinity false)",
            most_threads,
            config.warehouses
        );
    }
    if config.check && !config.affinity && most_threads > 1 {
        bail!("--check needs warehouse affinity or one thread (see `txn`)");
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let environment = Environment::probe(&config.data_dir);
    let reference_bytes = if config
        .pools
        .iter()
        .any(|p| matches!(p, PoolSize::OfData(_)))
    {
        report::data_disk_usage(&ensure_loaded(config, EngineKind::Leankv)?)
    } else {
        0
    };
    let mut records = Vec::new();
    // The engines and durabilities innermost: the runs compared with each other follow each
    // other, so that the machine's drift between them is least (in reverse in even rounds:
    // `round_order`). Engines that never log run with the first durability only.
    for round in 1..=config.repeat.max(1) {
        for &pool in &config.pools {
            for &threads in &config.threads {
                for (index, durability) in round_order(&config.durabilities, round) {
                    for (_, kind) in round_order(&config.engines, round) {
                        if !kind.runs_at_durability(index) {
                            continue;
                        }
                        let shape = RunShape {
                            kind,
                            durability,
                            pool_bytes: pool.bytes(reference_bytes).max(64 << 20),
                            threads,
                            round,
                        };
                        let record = driver::run_one(config, shape, &environment)?;
                        report::append(&config.results, &record)?;
                        let failed = record.check == "failed";
                        records.push(record);
                        if failed {
                            bail!("the consistency check failed (violations above)");
                        }
                    }
                }
            }
        }
    }
    println!("{}", table(&records).render());
    for unit in records
        .iter()
        .map(|record| {
            format!(
                "{}: durability {}, commit per {}",
                record.engine,
                record.durability.name(),
                record.commit_unit
            )
        })
        .collect::<std::collections::BTreeSet<_>>()
    {
        println!("{unit}");
    }
    if config.repeat > 1 {
        println!(
            "\nmedians over {} rounds:\n{}",
            config.repeat,
            summary(&records).render()
        );
    }
    if let Some(paired) = paired(&records) {
        println!("\npaired by round:\n{}", paired.render());
    }
    Ok(records)
}
