//! The headline in one run: uniform random lookups (8-byte keys, 120-byte values) with all data
//! in the buffer pool, then with a pool a fifth of the data size, so that most lookups read
//! from the SSD. Prints throughput and I/O rates per configuration.
//!
//! `cargo run --release --example headline [records] [seconds-per-run]`
//! (defaults: 2,000,000 records, 5 seconds). This is a stop-gap until the `leankv-bench` driver
//! exists.

use leankv::{Db, Options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const VALUE_SIZE: usize = 120;

fn key(n: u64) -> [u8; 8] {
    // Scrambled so that inserts do not arrive in key order.
    n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn lookups(db: &Db, tree: &leankv::Tree, records: u64, threads: usize, seconds: u64) -> (f64, f64) {
    let reads_before = db.stats().page_reads;
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (stop, done) = (&stop, &done);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(thread as u64 + 1);
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        let found = tree
                            .get_with(key(rng.u64(..records)), |value| value.len())
                            .expect("lookup");
                        assert_eq!(found, Some(VALUE_SIZE));
                    }
                    count += 256;
                }
                done.fetch_add(count, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = start.elapsed().as_secs_f64();
    let reads = db.stats().page_reads - reads_before;
    (
        done.load(Ordering::Relaxed) as f64 / elapsed,
        reads as f64 / elapsed,
    )
}

fn main() -> leankv::Result<()> {
    let mut args = std::env::args().skip(1);
    let records: u64 = args
        .next()
        .map_or(2_000_000, |a| a.parse().expect("records"));
    let seconds: u64 = args.next().map_or(5, |a| a.parse().expect("seconds"));
    let dir = tempfile::tempdir().expect("temporary directory");

    let db = Db::open(dir.path(), Options::default().pool_size(4 << 30))?;
    let tree = db.open_tree("ycsb")?;
    let start = Instant::now();
    let value = [0xAB; VALUE_SIZE];
    for n in 0..records {
        tree.insert(key(n), value)?;
    }
    let load_seconds = start.elapsed().as_secs_f64();
    let data_bytes = db.stats().frames_in_use * db.stats().page_size;
    println!(
        "loaded {records} records in {load_seconds:.1} s ({:.0} inserts/s), {} MiB of pages, I/O mode {}",
        records as f64 / load_seconds,
        data_bytes >> 20,
        db.stats().io_mode
    );
    println!(
        "{:<34} {:>7} {:>14} {:>14}",
        "configuration", "threads", "lookups/s", "page reads/s"
    );
    for threads in [1, 2] {
        let (throughput, reads) = lookups(&db, &tree, records, threads, seconds);
        println!(
            "{:<34} {threads:>7} {throughput:>14.0} {reads:>14.0}",
            "in memory (pool > data)"
        );
    }
    drop(tree);
    db.close()?;

    let pool = data_bytes / 5;
    let db = Db::open(dir.path(), Options::default().pool_size(pool))?;
    let tree = db.open_tree("ycsb")?;
    lookups(&db, &tree, records, 2, 2); // warm up: fill the pool
    for threads in [1, 2] {
        let (throughput, reads) = lookups(&db, &tree, records, threads, seconds);
        let label = format!("beyond memory (pool {} MiB)", pool >> 20);
        println!("{label:<34} {threads:>7} {throughput:>14.0} {reads:>14.0}");
    }
    let stats = db.stats();
    println!(
        "evictions {}, cooling hits {}, page writes {}",
        stats.evictions, stats.cooling_hits, stats.page_writes
    );
    db.close()
}
