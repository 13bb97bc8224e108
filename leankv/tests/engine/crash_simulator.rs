//! The crash simulator keeps its promises: synced bytes survive every recovery, unsynced ones
//! may be lost or kept, torn writes tear at sector boundaries only, no recovered byte was never
//! written, the storages of one domain die together, and the engine reopens on what a closed
//! database left behind.

use leankv::testing::{CrashSimulator, Recovery, Storage, SECTOR_SIZE};
use leankv::{Db, Options};
use std::collections::BTreeSet;

const SEEDS: u64 = 200;

fn fill(byte: u8, len: usize) -> Vec<u8> {
    vec![byte; len]
}

#[test]
fn synced_data_survives_every_seed_and_unsynced_data_may_be_lost_or_kept() {
    let sim = CrashSimulator::new();
    let file = sim.storage("pages");
    file.write_at(&fill(1, 4096), 0).unwrap();
    file.write_at(&fill(2, 4096), 4096).unwrap();
    file.sync().unwrap();
    file.write_at(&fill(3, 4096), 8192).unwrap(); // beyond the durable length
    file.write_at(&fill(4, 1024), 4096).unwrap(); // over synced bytes
    assert_eq!(file.unsynced_ops(), 2);
    let mut lost_tail = false;
    let mut kept_tail = false;
    for seed in 0..SEEDS {
        let recovered = sim.recover(seed);
        let image = recovered.image("pages");
        assert!(image.len() >= 8192, "seed {seed}: shorter than durable");
        assert!(image[..4096].iter().all(|&b| b == 1), "seed {seed}");
        assert!(image[5120..8192].iter().all(|&b| b == 2), "seed {seed}");
        assert!(
            image[4096..5120].iter().all(|&b| b == 2 || b == 4),
            "seed {seed}"
        );
        match image.len() {
            8192 => lost_tail = true,
            12288 => {
                assert!(
                    image[8192..].iter().all(|&b| b == 3 || b == 0),
                    "seed {seed}"
                );
                kept_tail |= image[8192..].iter().all(|&b| b == 3);
            }
            len => panic!("seed {seed}: length {len}"),
        }
    }
    assert!(
        lost_tail && kept_tail,
        "seeds never dropped or never kept the unsynced write"
    );

    let kept = sim.recover_with(Recovery::KeepUnsynced);
    let image = kept.image("pages");
    assert_eq!(image.len(), 12288);
    assert!(image[4096..5120].iter().all(|&b| b == 4));
    assert!(image[8192..].iter().all(|&b| b == 3));
    assert_eq!(kept.report().writes_dropped, 0);

    let lost = sim.recover_with(Recovery::LoseUnsynced);
    assert_eq!(lost.image("pages"), [fill(1, 4096), fill(2, 4096)].concat());
    assert_eq!(lost.report().bytes_dropped, 4096 + 1024);
    assert_eq!(sim.stats().crashes, 1);
    assert_eq!((sim.stats().writes, sim.stats().syncs), (4, 1));
}

#[test]
fn recovery_is_a_function_of_the_seed() {
    let sim = CrashSimulator::new();
    let file = sim.storage("log");
    for i in 0..16u8 {
        file.write_at(&fill(i + 1, 700), u64::from(i) * 300)
            .unwrap();
    }
    let images: Vec<Vec<u8>> = (0..20)
        .map(|s| sim.recover(s).image("log").to_vec())
        .collect();
    for (seed, image) in images.iter().enumerate() {
        assert_eq!(&sim.recover(seed as u64).image("log"), image, "seed {seed}");
    }
    let distinct: BTreeSet<&Vec<u8>> = images.iter().collect();
    assert!(distinct.len() > 10, "seeds barely vary the outcome");
}

#[test]
fn unsynced_writes_land_in_any_order() {
    let sim = CrashSimulator::new().max_torn_writes(0);
    let file = sim.storage("pages");
    file.write_at(&fill(1, 1024), 0).unwrap();
    file.write_at(&fill(2, 1024), 0).unwrap(); // overwrites the first
    let mut reordered = false;
    let mut in_order = false;
    for seed in 0..SEEDS {
        let recovered = sim.recover(seed);
        let image = recovered.image("pages");
        if recovered.report().writes_kept == 2 && image.len() == 1024 {
            reordered |= image.iter().all(|&b| b == 1);
            in_order |= image.iter().all(|&b| b == 2);
        }
    }
    assert!(
        reordered && in_order,
        "both orders must occur when both writes land"
    );
}

#[test]
fn a_torn_write_leaves_each_sector_wholly_old_or_wholly_new() {
    // Aligned and unaligned writes: sectors are absolute, [k * 512, (k + 1) * 512).
    for (offset, len) in [
        (0usize, 8 * SECTOR_SIZE),
        (100, 1300),
        (1000, 2 * SECTOR_SIZE),
    ] {
        let sim = CrashSimulator::new();
        let file = sim.storage("pages");
        file.write_at(&fill(0xAA, 8 * SECTOR_SIZE), 0).unwrap();
        file.sync().unwrap();
        file.write_at(&fill(0xBB, len), offset as u64).unwrap();
        sim.crash();
        let mut torn_seen = false;
        for seed in 0..SEEDS {
            let recovered = sim.recover(seed);
            let image = recovered.image("pages");
            let report = recovered.report();
            assert_eq!(image.len(), 8 * SECTOR_SIZE);
            let mut old_bytes = 0;
            for (k, sector) in image.chunks(SECTOR_SIZE).enumerate() {
                let written = |i: usize| (offset..offset + len).contains(&(k * SECTOR_SIZE + i));
                let inside: Vec<u8> = (0..sector.len())
                    .filter(|&i| written(i))
                    .map(|i| sector[i])
                    .collect();
                let outside = (0..sector.len())
                    .filter(|&i| !written(i))
                    .map(|i| sector[i]);
                assert!(
                    outside.into_iter().all(|b| b == 0xAA),
                    "seed {seed}: untouched bytes"
                );
                let old = inside.iter().all(|&b| b == 0xAA);
                let new = inside.iter().all(|&b| b == 0xBB);
                assert!(old || new, "seed {seed}: sector {k} is mixed");
                old_bytes += if old { inside.len() } else { 0 };
            }
            if report.torn_writes == 1 {
                assert_eq!(report.bytes_torn as usize, old_bytes, "seed {seed}");
                torn_seen |= old_bytes > 0 && old_bytes < len;
            } else if report.writes_kept == 1 {
                assert_eq!(old_bytes, 0, "seed {seed}: untorn write came out partial");
            } else {
                assert_eq!(old_bytes, len, "seed {seed}: dropped write left bytes");
            }
        }
        assert!(torn_seen, "no seed tore the write at {offset}+{len}");
        let none = CrashSimulator::new().max_torn_writes(0);
        let file = none.storage("pages");
        file.write_at(&fill(0xBB, len), offset as u64).unwrap();
        for seed in 0..50 {
            assert_eq!(none.recover(seed).report().torn_writes, 0);
        }
    }
}

/// Random writes, extends and syncs on two files, then a crash; every recovery is checked
/// against a model of the bytes each offset may hold.
#[test]
fn recovered_bytes_were_always_durable_or_written_before() {
    for scenario in 0..20u64 {
        let mut rng = fastrand::Rng::with_seed(scenario);
        let sim = CrashSimulator::new().max_torn_writes(1 + scenario as usize % 3);
        let names = ["pages", "log"];
        let files = names.map(|name| sim.storage(name));
        // Per file: durable bytes, and the unsynced writes (offset, bytes) and extends.
        let mut durable: [Vec<u8>; 2] = Default::default();
        let mut latest: [Vec<u8>; 2] = Default::default();
        let mut unsynced: [Vec<(usize, Vec<u8>)>; 2] = Default::default();
        let mut grown_in_flight = [0usize; 2];
        let mut next_value = 1u8;
        sim.crash_after(rng.u64(10..60));
        loop {
            let f = rng.usize(0..2);
            let outcome = match rng.u8(0..10) {
                0..=6 => {
                    let offset = rng.usize(0..6000);
                    let bytes = fill(next_value, rng.usize(1..2000));
                    next_value = next_value.wrapping_add(1).max(1);
                    let result = files[f].write_at(&bytes, offset as u64);
                    // Issued either way: the one at the crash point is in flight.
                    unsynced[f].push((offset, bytes.clone()));
                    if result.is_ok() {
                        let end = offset + bytes.len();
                        if latest[f].len() < end {
                            latest[f].resize(end, 0);
                        }
                        latest[f][offset..end].copy_from_slice(&bytes);
                    }
                    result
                }
                7 => {
                    let len = rng.usize(0..8000);
                    let result = files[f].extend_to(len as u64);
                    if result.is_ok() && latest[f].len() < len {
                        latest[f].resize(len, 0);
                    } else if result.is_err() {
                        grown_in_flight[f] = len; // issued at the crash point
                    }
                    result
                }
                _ => {
                    let result = files[f].sync();
                    if result.is_ok() {
                        durable[f] = latest[f].clone();
                        unsynced[f].clear();
                    }
                    result
                }
            };
            if outcome.is_err() {
                break;
            }
        }
        assert!(sim.is_crashed());
        for f in files.iter() {
            assert!(f.len().is_err() && f.write_at(&[1], 0).is_err() && f.sync().is_err());
        }
        let max_len: [usize; 2] = std::array::from_fn(|f| {
            let ends = unsynced[f].iter().map(|(o, b)| o + b.len());
            ends.chain([latest[f].len(), grown_in_flight[f]])
                .max()
                .unwrap_or(0)
        });
        let mut dropped_some = false;
        for seed in 0..100 {
            let recovered = sim.recover(seed);
            for (f, name) in names.iter().enumerate() {
                let image = recovered.image(name);
                let ctx = format!("scenario {scenario} seed {seed} file {name}");
                assert!(
                    image.len() >= durable[f].len(),
                    "{ctx}: shorter than durable"
                );
                assert!(image.len() <= max_len[f], "{ctx}: longer than ever written");
                for (at, &byte) in image.iter().enumerate() {
                    let base = durable[f].get(at).copied().unwrap_or(0);
                    let written = unsynced[f]
                        .iter()
                        .any(|(o, b)| (*o..o + b.len()).contains(&at) && b[at - o] == byte);
                    assert!(
                        byte == base || written,
                        "{ctx}: byte {byte} at {at} from nowhere"
                    );
                }
                dropped_some |= recovered.files[f].report.writes_dropped > 0;
            }
        }
        assert!(
            dropped_some || unsynced.iter().all(Vec::is_empty),
            "scenario {scenario}"
        );
        // Keeping everything gives the latest state plus the write in flight, if any.
        let kept = sim.recover_with(Recovery::KeepUnsynced);
        for (f, name) in names.iter().enumerate() {
            let mut expected = durable[f].clone();
            for (offset, bytes) in &unsynced[f] {
                let end = offset + bytes.len();
                if expected.len() < end {
                    expected.resize(end, 0);
                }
                expected[*offset..end].copy_from_slice(bytes);
            }
            // Extends are not in `unsynced`: pad to the latest length.
            let len = latest[f].len().max(grown_in_flight[f]);
            if expected.len() < len {
                expected.resize(len, 0);
            }
            assert_eq!(
                kept.image(name),
                expected,
                "scenario {scenario} file {name}"
            );
            let lost = sim.recover_with(Recovery::LoseUnsynced);
            assert_eq!(
                lost.image(name),
                durable[f],
                "scenario {scenario} file {name}"
            );
        }
    }
}

#[test]
fn storages_of_one_domain_crash_at_the_same_instant() {
    let sim = CrashSimulator::new();
    let pages = sim.storage("pages");
    let log = sim.storage("log");
    pages.write_at(&fill(1, 512), 0).unwrap();
    log.write_at(&fill(2, 512), 0).unwrap();
    sim.crash_after(3); // counts across both files
    log.sync().unwrap();
    pages.extend_to(4096).unwrap();
    log.write_at(&fill(3, 512), 512).unwrap();
    assert!(!sim.is_crashed());
    let error = pages.write_at(&fill(4, 512), 512).unwrap_err(); // the crash point
    assert!(error.to_string().contains("crash"), "{error}");
    assert!(sim.is_crashed());
    assert!(log.write_at(&fill(5, 512), 1024).is_err());
    assert!(log.sync().is_err());
    assert!(log.read_at(&mut [0; 512], 0).is_err());
    assert!(pages.read_at(&mut [0; 512], 0).is_err());
    assert!(pages.len().is_err() && log.extend_to(1 << 20).is_err());
    // A handle opened after the crash is dead too.
    assert!(sim.storage("log").len().is_err());
    let stats = sim.stats();
    assert_eq!((stats.writes, stats.extends, stats.syncs), (3, 1, 1));
    assert_eq!((stats.crashes, stats.refused), (1, 8));
    // Frozen: the log's synced write survives; nothing after the crash point exists.
    for seed in 0..SEEDS {
        let recovered = sim.recover(seed);
        let log = recovered.image("log");
        assert_eq!(&log[..512], &fill(2, 512)[..], "seed {seed}");
        assert!(log.len() == 512 || log.len() == 1024, "seed {seed}");
        assert!(log[512..].iter().all(|&b| b == 3 || b == 0), "seed {seed}");
        let pages = recovered.image("pages");
        assert!(pages.iter().all(|&b| b <= 1 || b == 4), "seed {seed}"); // 4 was in flight
    }
    // A restarted domain starts from a recovery, durable, and can crash again.
    let restarted = sim.recover_with(Recovery::KeepUnsynced).restart();
    let log = restarted.storage("log");
    assert_eq!(log.len().unwrap(), 1024);
    restarted.crash_after(0);
    assert!(log.sync().is_err());
    assert_eq!(restarted.recover(7).image("log").len(), 1024);
    assert_eq!(restarted.stats().crashes, 2);
}

#[test]
fn the_engine_reopens_on_what_a_closed_database_left_behind() {
    const KEYS: u32 = 3_000;
    let options = || {
        Options::default()
            .page_size(4096)
            .pool_size(64 * 4096)
            .background_writer(false)
    };
    let key = |n: u32| format!("key-{n:08}");
    let value = |n: u32| format!("value-{n}-").repeat(1 + n as usize % 5);
    let dir = tempfile::tempdir().unwrap();
    let sim = CrashSimulator::new();
    let storage = sim.storage("pages");
    let db = Db::open_with_storage(dir.path(), options(), storage.clone()).unwrap();
    let tree = db.open_tree("t").unwrap();
    for n in 0..KEYS {
        tree.insert(key(n), value(n)).unwrap();
    }
    drop(tree);
    db.close().unwrap();
    assert_eq!(storage.unsynced_ops(), 0, "close left unsynced writes");
    let stats = sim.stats();
    eprintln!("engine I/O until close: {stats:?}");
    assert!(stats.writes > 0 && stats.syncs > 0);
    for seed in [0, 1, 2, 3, 99] {
        let recovered = sim.recover(seed);
        assert_eq!(recovered.report().writes_dropped, 0);
        let pages = recovered.storage("pages");
        if seed == 99 {
            // As a crash between the clean superblock and the close's shrink leaves the page
            // file: longer than its pages (blocks a real page file allocated ahead).
            pages.extend_to(pages.len().unwrap() + (1 << 20)).unwrap();
        }
        let db = Db::open_with_storage(dir.path(), options(), pages).unwrap();
        let tree = db.open_tree("t").unwrap();
        for n in (0..KEYS).step_by(7).chain([KEYS - 1]) {
            assert_eq!(
                tree.get(key(n)).unwrap(),
                Some(value(n).into_bytes()),
                "seed {seed}"
            );
        }
        assert_eq!(tree.iter().count(), KEYS as usize, "seed {seed}");
        drop(tree);
        assert!(db.check_integrity().unwrap().is_ok(), "seed {seed}");
        db.close().unwrap();
    }
}

#[test]
fn the_engine_sees_the_crash_as_errors_and_reopens_as_of_its_last_sync() {
    // The log-free mode: `crash_recovery.rs` tests the crashes the log recovers.
    let options = || {
        Options::default()
            .page_size(4096)
            .pool_size(32 * 4096)
            .write_ahead_log(false)
    };
    let dir = tempfile::tempdir().unwrap();
    let sim = CrashSimulator::new();
    let db = Db::open_with_storage(dir.path(), options(), sim.storage("pages")).unwrap();
    let tree = db.open_tree("t").unwrap();
    tree.insert(b"before", b"the crash").unwrap();
    sim.crash();
    drop(tree);
    assert!(
        db.close().is_err(),
        "closing a crashed database reported success"
    );
    // Everything since open was unsynced: the database is as open left it, and consistent,
    // but marked open: without a log leankv cannot know what the crash lost, so it says so.
    let lost = sim.recover_with(Recovery::LoseUnsynced);
    let pages = lost.storage("pages");
    match Db::open_with_storage(dir.path(), options(), pages.clone()) {
        Err(leankv::Error::NotClosedCleanly { path }) => assert_eq!(path, dir.path()),
        other => panic!("a crashed database opened without a word: {other:?}"),
    }
    let salvage = options().open_after_crash(true);
    let db = Db::open_with_storage(dir.path(), salvage, pages.clone()).unwrap();
    assert!(db.check_integrity().unwrap().is_ok());
    assert_eq!(db.open_tree("t").unwrap().get(b"before").unwrap(), None);
    db.close().unwrap();
    // A clean close clears the mark.
    Db::open_with_storage(dir.path(), options(), pages)
        .unwrap()
        .close()
        .unwrap();
}
