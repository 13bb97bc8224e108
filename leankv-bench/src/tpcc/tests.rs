//! The driver end to end, the transactions against the consistency checks.

use super::random::{NurandConstants, TpccRandom};
use super::schema::*;
use super::setup::{constants, load_setup, Config, SEED};
use super::txn::{Kind, Outcome, Worker};
use super::*;
use crate::engine::{DurabilityLevel, EngineKind, PoolSize, Setup};
use crate::engines;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn config(dir: &Path) -> Config {
    Config {
        label: "test".into(),
        engines: vec![EngineKind::Leankv],
        warehouses: 2,
        threads: vec![2],
        duration: Duration::from_secs(1),
        warmup: Duration::ZERO,
        affinity: true,
        pools: vec![PoolSize::Bytes(48 << 20)],
        repeat: 1,
        cooling_fraction: 0.1,
        check: true,
        direct_io: false,
        memory_cap: false,
        durabilities: vec![DurabilityLevel::Immediate],
        checkpoint_every: None,
        data_dir: dir.join("data"),
        results: dir.join("results.jsonl"),
        page_size: leankv::DEFAULT_PAGE_SIZE,
    }
}

/// A few hundred transactions of each kind on two warehouses, with a pool a sixth of the
/// data so that pages are evicted and read back, then the consistency checks; then
/// damage that each check must notice.
#[test]
fn every_transaction_keeps_the_database_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let setup = Setup {
        pool_bytes: 48 << 20,
        ..load_setup(&config)
    };
    let engine = engines::open(EngineKind::Leankv, dir.path(), &setup).unwrap();
    let engine = engine.as_ref();
    load::load(engine, 2, 2, constants(), SEED).unwrap();
    assert!(check::violations(engine, 2).unwrap().is_empty());
    let run_constants = NurandConstants::for_run(constants(), &mut fastrand::Rng::new());
    let mut worker = Worker::new(engine, TpccRandom::new(5, run_constants), 2, 1);
    let mut rolled_back = 0;
    for kind in Kind::ALL {
        for n in 0..300 {
            let outcome = worker.run(kind, 1 + n % 2).unwrap();
            rolled_back += u32::from(outcome == Outcome::RolledBack);
        }
    }
    assert!(
        rolled_back < 20,
        "{rolled_back} rollbacks, expected about 3"
    );
    let counters: BTreeMap<_, _> = engine.counters().into_iter().collect();
    assert!(
        counters["evictions"] > 0 && counters["page_reads"] > 0,
        "{counters:?}"
    );
    let violations = check::violations(engine, 2).unwrap();
    assert!(violations.is_empty(), "{violations:?}");

    // Delivery removed the oldest new orders and stamped their lines.
    let mut buffer = Vec::new();
    assert!(!engine
        .get(
            NEW_ORDER,
            &order_key(1, 1, load::FIRST_UNDELIVERED),
            &mut buffer
        )
        .unwrap());
    assert!(engine
        .get(
            ORDER_LINE,
            &order_line_key(1, 1, load::FIRST_UNDELIVERED, 1),
            &mut buffer
        )
        .unwrap());
    assert_ne!(OrderLine::decode(&buffer).unwrap().delivery_date, 0);

    // Condition 1: a payment that reached the district but not the warehouse.
    engine
        .update(DISTRICT, &district_key(2, 3), &mut |bytes| {
            let mut district = District::decode(bytes).unwrap();
            district.ytd += 1;
            district.encode_into(bytes);
        })
        .unwrap();
    // Condition 4: a lost order line.
    assert!(engine
        .delete(ORDER_LINE, &order_line_key(1, 4, 17, 1))
        .unwrap());
    // Conditions 2 and 3: an undelivered order lost from NEW-ORDER, inside the range.
    let mut new_orders = Vec::new();
    engine
        .scan(NEW_ORDER, &district_key(1, 5), None, &mut |key, _| {
            new_orders.push(key.to_vec());
            new_orders.len() < 2
        })
        .unwrap();
    assert!(engine.delete(NEW_ORDER, &new_orders[1]).unwrap());
    let violations = check::violations(engine, 2).unwrap().join("\n");
    assert!(
        violations.contains("condition 1, warehouse 2"),
        "{violations}"
    );
    assert!(
        violations.contains("condition 4, district 1/4"),
        "{violations}"
    );
    assert!(
        violations.contains("condition 3, district 1/5"),
        "{violations}"
    );
}

/// The driver end to end: two workers with affinity for a second, time series, checks,
/// and the record in the results file.
#[test]
fn a_short_run_records_its_time_series_and_passes_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let records = run(&config).unwrap();
    let record = &records[0];
    assert_eq!(record.check, "passed");
    assert!(record.transactions > 0 && record.committed["new_order"] > 0);
    assert!(!record.series.is_empty() && record.series.iter().all(|s| s.second > 0.0));
    assert!(record.data_bytes_end > record.data_bytes_start);
    // Immediate durability: every commit waited for a log sync, and the record says that each
    // transaction was one atomic commit.
    assert!(record.engine_settings.contains("durability immediate"));
    assert!(record.log_syncs_per_s.unwrap() > 0.0 && record.log_mib_written_per_s.unwrap() > 0.0);
    assert!(
        record.commit_unit.starts_with("transaction"),
        "{}",
        record.commit_unit
    );
    assert_eq!(report::read_records(&config.results).unwrap().len(), 1);
    // Rounds reuse the load and start from the loaded state again.
    let again = run(&Config {
        repeat: 2,
        ..config
    })
    .unwrap();
    assert_eq!(again.len(), 2);
    assert_eq!((again[0].round, again[1].round), (1, 2));
    assert!(again
        .iter()
        .all(|r| r.data_bytes_start == record.data_bytes_start));
    let medians = summary(&again).render();
    assert!(
        medians.contains("leankv") && medians.contains("1.00"),
        "{medians}"
    );
    assert!(paired(&again).is_none(), "one engine at one durability");
}

#[test]
fn durabilities_alternate_within_each_round_and_pair_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        engines: vec![EngineKind::Leankv, EngineKind::Inmem],
        durabilities: vec![DurabilityLevel::Off, DurabilityLevel::None],
        repeat: 2,
        duration: Duration::from_millis(300),
        pools: vec![PoolSize::OfData(2.0)],
        ..config(dir.path())
    };
    let records = run(&config).unwrap();
    // Per round: leankv and inmem at off, then leankv alone at none (inmem never logs); in
    // reverse in round 2.
    let order: Vec<(&str, &str, usize)> = records
        .iter()
        .map(|r| (r.engine, r.durability.name(), r.round))
        .collect();
    assert_eq!(
        order,
        [
            ("leankv", "off", 1),
            ("inmem", "off", 1),
            ("leankv", "none", 1),
            ("leankv", "none", 2),
            ("inmem", "off", 2),
            ("leankv", "off", 2),
        ]
    );
    assert!(records[2].log_mib_written_per_s.unwrap() > 0.0);
    assert!(records[0].engine_settings.contains("no WAL"));
    let rendered = paired(&records).unwrap().render();
    let rows: Vec<&str> = rendered.lines().skip(2).collect();
    assert_eq!(rows.len(), 2, "{rendered}");
    assert!(rows[0].contains("inmem off / leankv off"), "{rendered}");
    assert!(rows[1].contains("leankv none / leankv off"), "{rendered}");
    let ratio =
        |variant: usize, base: usize| format!("{:.2}", records[variant].tps / records[base].tps);
    let per_round = format!(" {} {}  ", ratio(2, 0), ratio(3, 5));
    assert!(rows[1].contains(&per_round), "{per_round}\n{rendered}");
}

#[test]
fn invalid_configurations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let too_many_threads = Config {
        threads: vec![3],
        ..config(dir.path())
    };
    let error = run(&too_many_threads).unwrap_err().to_string();
    assert!(error.contains("affinity"), "{error}");
    let unchecked = Config {
        affinity: false,
        ..config(dir.path())
    };
    assert!(run(&unchecked).unwrap_err().to_string().contains("--check"));
}
