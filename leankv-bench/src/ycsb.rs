//! YCSB-style runs: load a key space, then run an operation mix for a duration on T threads,
//! measuring throughput, latency percentiles (of every 8th operation) and page I/O.

use crate::diskstats::DiskReads;
use crate::engine::{scan_count, Engine, IoCounters, ReadPath, Table};
use crate::harness::{self, Clock};
use crate::report::{new_histogram, Latency};
use crate::workload::{fill_value, key, Distribution, LoadOrder, Mix, Op, Sampler};
use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Pairs per `put_batch` call while loading.
const LOAD_BATCH: usize = 10_000;
/// Operations between two looks at the clock.
const CLOCK_INTERVAL: u64 = 64;
/// One operation in this many is timed for the latency percentiles. Timing every one (two
/// clock reads and a histogram update, ~50 ns) would cost an in-memory lookup of ~1 µs about
/// 5%, which the peers' own harnesses (vmcache's) do not pay; every 8th still gives hundreds
/// of thousands of samples a second.
const LATENCY_SAMPLE: u64 = 8;
/// The one table YCSB runs use.
pub const TABLE: Table = 0;
/// The tables to open for YCSB runs.
pub const TABLES: &[&str] = &["ycsb"];
/// Longest scan, in records (YCSB E draws the length uniformly from 1 to this).
pub const MAX_SCAN_LENGTH: usize = 100;

/// Inserts records `0..records` in `order`, with a progress bar. Returns the load rate in
/// records per second.
pub fn load(engine: &dyn Engine, records: u64, value_size: usize, order: LoadOrder) -> Result<f64> {
    let bar = ProgressBar::new(records).with_style(
        ProgressStyle::with_template(
            "  loading {bar:40} {pos}/{len} records, {per_sec}, eta {eta}",
        )
        .expect("valid template"),
    );
    let started = Instant::now();
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    let put = |batch: &mut Vec<(Vec<u8>, Vec<u8>)>| -> Result<()> {
        engine.put_batch(TABLE, batch)?;
        bar.inc(batch.len() as u64);
        batch.clear();
        Ok(())
    };
    for index in order.indexes(records) {
        let mut value = vec![0; value_size];
        fill_value(&mut value, index, 0);
        batch.push((key(index).to_vec(), value));
        if batch.len() == LOAD_BATCH {
            put(&mut batch)?;
        }
    }
    if !batch.is_empty() {
        put(&mut batch)?;
    }
    engine.flush()?;
    bar.finish_and_clear();
    Ok(records as f64 / started.elapsed().as_secs_f64())
}

/// What one measured run does.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Records present (indexes `0..records`); reads and updates draw from these.
    pub records: u64,
    pub value_size: usize,
    pub threads: usize,
    pub distribution: Distribution,
    pub mix: Mix,
    pub duration: Duration,
    /// The call reads go through.
    pub reads: ReadPath,
    /// Keys per read call: above 1, each read of the mix looks up this many keys with one
    /// [`get_many`](crate::engine::Operations::get_many) call (counted as that many reads;
    /// its latency is the call's).
    pub read_batch: usize,
    /// Operations per second over all threads, as YCSB's `-target` (`None`: as fast as they
    /// go): each thread paces its share evenly, sleeping until its next operation is due.
    pub target: Option<f64>,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub ops: u64,
    pub elapsed: Duration,
    pub ops_by_kind: Vec<(Op, u64)>,
    pub latency: Latency,
    pub io: IoCounters,
    /// How much each of the engine's counters grew during the run.
    pub counters: Vec<(&'static str, u64)>,
    pub peak_rss_bytes: u64,
    /// What the device under the data did during the run.
    pub device: Option<DiskReads>,
}

impl Measurement {
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    pub fn per_second(&self, count: u64) -> f64 {
        count as f64 / self.elapsed.as_secs_f64()
    }
}

/// Runs `spec` against `engine`. New records (inserts) take indexes from `next_insert`,
/// shared across runs so that every insert adds a new key.
pub fn run(engine: &dyn Engine, spec: &RunSpec, next_insert: &AtomicU64) -> Result<Measurement> {
    let sampler = Sampler::new(spec.distribution, spec.records);
    let timed = harness::run_timed(
        engine,
        spec.threads,
        spec.duration,
        |thread, clock| worker(engine, spec, &sampler, next_insert, thread as u64, clock),
        |_| None::<()>,
    )?;
    let mut histogram = new_histogram();
    let mut counts = [0u64; Op::ALL.len()];
    for (worker_histogram, worker_counts) in &timed.workers {
        histogram.add(worker_histogram)?;
        for (total, count) in counts.iter_mut().zip(worker_counts) {
            *total += count;
        }
    }
    Ok(Measurement {
        ops: counts.iter().sum(),
        elapsed: timed.elapsed,
        ops_by_kind: Op::ALL.iter().copied().zip(counts).collect(),
        latency: Latency::of(&histogram),
        io: timed.io,
        counters: timed.counters,
        peak_rss_bytes: timed.peak_rss_bytes,
        device: timed.device,
    })
}

/// One worker thread: operations until the deadline (or until another worker failed).
fn worker(
    engine: &dyn Engine,
    spec: &RunSpec,
    sampler: &Sampler,
    next_insert: &AtomicU64,
    thread: u64,
    clock: &Clock<'_>,
) -> Result<(Histogram<u64>, [u64; Op::ALL.len()])> {
    let mut rng = fastrand::Rng::with_seed(clock.seed(thread as usize));
    let mut histogram = new_histogram();
    let mut counts = [0u64; Op::ALL.len()];
    let mut value = vec![0u8; spec.value_size];
    let mut read_buffer = Vec::with_capacity(spec.value_size);
    let mut batch_keys = Vec::with_capacity(spec.read_batch);
    let mut version = thread << 48;
    let mut seen = 0u64;
    let pace = spec.target.map(|target| {
        (
            Instant::now(),
            Duration::from_secs_f64(spec.threads as f64 / target),
        )
    });
    for n in 0.. {
        if let Some((start, interval)) = pace {
            let due = start + interval.mul_f64(n as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if !clock.running() {
                break;
            }
        } else if n % CLOCK_INTERVAL == 0 && !clock.running() {
            break;
        }
        let op = spec.mix.next(&mut rng);
        let started = (n % LATENCY_SAMPLE == 0).then(Instant::now);
        match op {
            Op::Read if spec.read_batch > 1 => {
                batch_keys.clear();
                batch_keys.extend((0..spec.read_batch).map(|_| key(sampler.next(&mut rng))));
                let keys: Vec<&[u8]> = batch_keys.iter().map(|key| &key[..]).collect();
                let found =
                    engine.get_many(TABLE, &keys, &mut |_, value| fold(&mut seen, value))?;
                if found != keys.len() {
                    bail!("{} records of a batch are missing", keys.len() - found);
                }
                counts[op as usize] += spec.read_batch as u64 - 1;
            }
            Op::Read => {
                let index = sampler.next(&mut rng);
                if !read(engine, spec.reads, &key(index), &mut read_buffer, &mut seen)? {
                    bail!("record {index} is missing");
                }
            }
            Op::Update => {
                let index = sampler.next(&mut rng);
                version += 1;
                fill_value(&mut value, index, version);
                engine.put(TABLE, &key(index), &value)?;
            }
            Op::Insert => {
                let index = next_insert.fetch_add(1, Ordering::Relaxed);
                fill_value(&mut value, index, 0);
                engine.put(TABLE, &key(index), &value)?;
            }
            Op::Scan => {
                let index = sampler.next(&mut rng);
                let length = rng.usize(1..=MAX_SCAN_LENGTH);
                scan_count(engine, TABLE, &key(index), length)?;
            }
            Op::ReadModifyWrite => {
                let index = sampler.next(&mut rng);
                if !read(engine, spec.reads, &key(index), &mut read_buffer, &mut seen)? {
                    bail!("record {index} is missing");
                }
                version += 1;
                fill_value(&mut value, index, version);
                engine.put(TABLE, &key(index), &value)?;
            }
        }
        if let Some(started) = started {
            histogram.saturating_record((started.elapsed().as_nanos() as u64).max(1));
        }
        counts[op as usize] += 1;
    }
    std::hint::black_box(seen);
    Ok((histogram, counts))
}

/// Reads record `key` through `path` and folds its value into `seen`, so that either path
/// touches the value and no read can be optimized away.
fn read(
    engine: &dyn Engine,
    path: ReadPath,
    key: &[u8],
    buffer: &mut Vec<u8>,
    seen: &mut u64,
) -> Result<bool> {
    match path {
        ReadPath::Copy => {
            let found = engine.get(TABLE, key, buffer)?;
            if found {
                fold(seen, buffer);
            }
            Ok(found)
        }
        ReadPath::Natural => engine.natural_read(TABLE, key, &mut |value| fold(seen, value)),
    }
}

/// Folds a value read into `seen`, so that the reads cannot be optimized away.
fn fold(seen: &mut u64, value: &[u8]) {
    let first = value.first().copied().unwrap_or(0);
    *seen = seen.wrapping_add(value.len() as u64 + u64::from(first));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DurabilityLevel, EngineKind, Setup};
    use crate::engines::open;

    fn setup() -> Setup {
        Setup {
            tables: TABLES,
            scan_prefetch: leankv::DEFAULT_SCAN_PREFETCH,
            ..Setup::for_tests(DurabilityLevel::default())
        }
    }

    #[test]
    fn load_then_run_every_preset_on_leankv_and_a_baseline() {
        for kind in [EngineKind::Leankv, EngineKind::Traditional] {
            let dir = tempfile::tempdir().unwrap();
            let engine = open(kind, dir.path(), &setup()).unwrap();
            load(engine.as_ref(), 5_000, 100, LoadOrder::Index).unwrap();
            let mut value = Vec::new();
            assert!(engine.get(TABLE, &key(4_999), &mut value).unwrap());
            assert_eq!(value.len(), 100);
            assert_eq!(
                scan_count(engine.as_ref(), TABLE, &[], usize::MAX).unwrap(),
                5_000
            );
            let next_insert = AtomicU64::new(5_000);
            for letter in ['a', 'b', 'c', 'd', 'e', 'f'] {
                let spec = RunSpec {
                    records: 5_000,
                    value_size: 100,
                    threads: 2,
                    distribution: Distribution::Zipf(0.99),
                    mix: Mix::preset(letter).unwrap(),
                    duration: Duration::from_millis(100),
                    reads: ReadPath::Copy,
                    // Reads in batches on every other mix.
                    read_batch: if (letter as u8).is_multiple_of(2) {
                        4
                    } else {
                        1
                    },
                    target: None,
                };
                let measured = run(engine.as_ref(), &spec, &next_insert).unwrap();
                assert!(measured.ops > 0, "{letter}");
                for (op, count) in &measured.ops_by_kind {
                    assert_eq!(*count > 0, spec.mix.fraction(*op) > 0.0, "{letter} {op:?}");
                }
            }
            let inserted = next_insert.load(Ordering::Relaxed);
            assert!(inserted > 5_000);
            assert_eq!(
                scan_count(engine.as_ref(), TABLE, &[], usize::MAX).unwrap() as u64,
                inserted
            );
        }
    }

    #[test]
    fn both_read_paths_see_the_loaded_values_and_nothing_else() {
        let kinds = [
            EngineKind::Leankv,
            EngineKind::Inmem,
            #[cfg(feature = "lmdb")]
            EngineKind::Lmdb,
            #[cfg(feature = "redb")]
            EngineKind::Redb,
        ];
        for kind in kinds {
            let dir = tempfile::tempdir().unwrap();
            let engine = open(kind, dir.path(), &setup()).unwrap();
            load(engine.as_ref(), 1_000, 100, LoadOrder::Key).unwrap();
            for index in [0, 517, 999] {
                let mut expected = vec![0; 100];
                fill_value(&mut expected, index, 0);
                let (mut copied, mut seen) = (Vec::new(), 0);
                assert!(read(
                    engine.as_ref(),
                    ReadPath::Copy,
                    &key(index),
                    &mut copied,
                    &mut seen
                )
                .unwrap());
                assert_eq!(copied, expected, "{kind:?}");
                let mut lent = Vec::new();
                let found = engine
                    .natural_read(TABLE, &key(index), &mut |value| {
                        lent.extend_from_slice(value)
                    })
                    .unwrap();
                assert!(found && lent == expected, "{kind:?}");
            }
            let absent = engine
                .natural_read(TABLE, &key(5_000), &mut |_| panic!("{kind:?} lent a value"))
                .unwrap();
            assert!(!absent, "{kind:?}");
            // Many keys at once: each found value handed over once, under its own index.
            let indexes = [999, 5_000, 0, 517, 0];
            let keys: Vec<[u8; 8]> = indexes.iter().map(|&index| key(index)).collect();
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            let mut seen = vec![None; keys.len()];
            let found = engine
                .get_many(TABLE, &keys, &mut |position, value| {
                    assert!(seen[position].replace(value.to_vec()).is_none(), "{kind:?}");
                })
                .unwrap();
            assert_eq!(found, 4, "{kind:?}");
            for (position, &index) in indexes.iter().enumerate() {
                let expected = (index < 1_000).then(|| {
                    let mut value = vec![0; 100];
                    fill_value(&mut value, index, 0);
                    value
                });
                assert_eq!(seen[position], expected, "{kind:?} {index}");
            }
        }
    }

    #[test]
    fn a_load_in_key_order_holds_every_record_in_fuller_leaves() {
        let mut pages = Vec::new();
        for order in [LoadOrder::Index, LoadOrder::Key] {
            let dir = tempfile::tempdir().unwrap();
            let engine = open(EngineKind::Leankv, dir.path(), &setup()).unwrap();
            load(engine.as_ref(), 20_000, 120, order).unwrap();
            assert_eq!(
                scan_count(engine.as_ref(), TABLE, &[], usize::MAX).unwrap(),
                20_000
            );
            let mut value = Vec::new();
            for index in [0, 7_777, 19_999] {
                assert!(
                    engine.get(TABLE, &key(index), &mut value).unwrap(),
                    "{order:?}"
                );
            }
            pages.push(engine.data_bytes().unwrap());
        }
        // Random inserts leave split leaves about two-thirds full; ascending ones fill them.
        assert!(
            pages[1] * 10 < pages[0] * 8,
            "index order {} B, key order {} B",
            pages[0],
            pages[1]
        );
    }

    #[test]
    fn a_paced_run_starts_no_operation_before_it_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(EngineKind::Leankv, dir.path(), &setup()).unwrap();
        load(engine.as_ref(), 1_000, 10, LoadOrder::Index).unwrap();
        let spec = RunSpec {
            records: 1_000,
            value_size: 10,
            threads: 2,
            distribution: Distribution::Uniform,
            mix: Mix::preset('a').unwrap(),
            duration: Duration::from_millis(300),
            reads: ReadPath::Copy,
            read_batch: 1,
            target: Some(100.0),
        };
        let measured = run(engine.as_ref(), &spec, &AtomicU64::new(1_000)).unwrap();
        // Each thread's n-th operation starts no earlier than n / 50 s after its start, and
        // none starts after the deadline: at most 0.3 * 50 + 1 per thread, however fast the
        // machine (unpaced, they would run thousands). No lower bound: a thread the machine
        // starts only after the deadline runs none, and tests assert no progress.
        assert!(measured.ops <= 32, "{} operations", measured.ops);
    }

    #[test]
    fn a_missing_record_fails_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(EngineKind::Leankv, dir.path(), &setup()).unwrap();
        load(engine.as_ref(), 100, 10, LoadOrder::Index).unwrap();
        for (reads, read_batch) in [(ReadPath::Natural, 1), (ReadPath::Copy, 8)] {
            let spec = RunSpec {
                records: 200, // half of these were never loaded
                value_size: 10,
                threads: 1,
                distribution: Distribution::Uniform,
                mix: Mix::preset('c').unwrap(),
                duration: Duration::from_secs(5),
                reads,
                read_batch,
                target: None,
            };
            let error = run(engine.as_ref(), &spec, &AtomicU64::new(200)).unwrap_err();
            assert!(error.to_string().contains("missing"), "{error}");
        }
    }
}
