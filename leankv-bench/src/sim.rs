//! Replacement-policy simulation (the paper's hit-rate table, §VI): record the page-access
//! trace of real Zipf lookups on leankv (`policy::Traced`), then replay it through Random,
//! FIFO, leankv's cooling strategy at several cooling percentages, LRU, 2Q and OPT with the
//! same number of frames, and print each hit rate.

use crate::harness::{self, Environment, Record};
use crate::report;
use crate::workload::{key, Distribution, Sampler};
use anyhow::{ensure, Result};
use clap::Args;
use leankv::ablations::Traced;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct SimArgs {
    /// Records to load (8-byte keys).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    #[arg(long, default_value_t = 120)]
    value_size: usize,
    /// Lookups traced after loading.
    #[arg(long, default_value_t = 1_000_000)]
    lookups: u64,
    /// Zipf exponent of the lookups.
    #[arg(long, default_value_t = 1.0)]
    theta: f64,
    /// Frames as a fraction of the pages the data occupies (the paper: 1 GB of 5 GB = 0.2).
    #[arg(long, default_value_t = 0.2)]
    pool_fraction: f64,
    /// JSON-lines file the result is appended to (under bench-output/, ignored by git; the
    /// published results are bench/results/results.jsonl).
    #[arg(long, default_value = "bench-output/results.jsonl")]
    results: PathBuf,
}

/// A replacement policy over page ids with a fixed number of frames.
pub trait Replacement {
    fn name(&self) -> String;
    /// Records an access; true on a hit.
    fn access(&mut self, page: u64, position: usize) -> bool;
}

/// Evicts a uniformly random resident page.
pub struct Random {
    capacity: usize,
    resident: Vec<u64>,
    slot: FxHashMap<u64, usize>,
    rng: fastrand::Rng,
}

impl Random {
    pub fn new(capacity: usize) -> Random {
        Random {
            capacity,
            resident: Vec::new(),
            slot: FxHashMap::default(),
            rng: fastrand::Rng::with_seed(11),
        }
    }
}

impl Replacement for Random {
    fn name(&self) -> String {
        "Random".into()
    }

    fn access(&mut self, page: u64, _: usize) -> bool {
        if self.slot.contains_key(&page) {
            return true;
        }
        if self.resident.len() == self.capacity {
            let victim_slot = self.rng.usize(..self.resident.len());
            let victim = self.resident[victim_slot];
            self.slot.remove(&victim);
            self.resident[victim_slot] = page;
            self.slot.insert(page, victim_slot);
        } else {
            self.slot.insert(page, self.resident.len());
            self.resident.push(page);
        }
        false
    }
}

/// Evicts the page loaded longest ago.
pub struct Fifo {
    capacity: usize,
    queue: VecDeque<u64>,
    resident: FxHashSet<u64>,
}

impl Fifo {
    pub fn new(capacity: usize) -> Fifo {
        Fifo {
            capacity,
            queue: VecDeque::new(),
            resident: FxHashSet::default(),
        }
    }
}

impl Replacement for Fifo {
    fn name(&self) -> String {
        "FIFO".into()
    }

    fn access(&mut self, page: u64, _: usize) -> bool {
        if self.resident.contains(&page) {
            return true;
        }
        if self.queue.len() == self.capacity {
            let victim = self.queue.pop_front().expect("full queue");
            self.resident.remove(&victim);
        }
        self.queue.push_back(page);
        self.resident.insert(page);
        false
    }
}

/// An LRU order over pages: access stamps in an ordered set.
#[derive(Default)]
struct RecencyList {
    stamp_of: FxHashMap<u64, u64>,
    by_stamp: BTreeSet<(u64, u64)>,
    clock: u64,
}

impl RecencyList {
    fn len(&self) -> usize {
        self.stamp_of.len()
    }

    fn contains(&self, page: u64) -> bool {
        self.stamp_of.contains_key(&page)
    }

    /// Inserts `page` or moves it to the most recent end.
    fn touch(&mut self, page: u64) {
        self.clock += 1;
        if let Some(old) = self.stamp_of.insert(page, self.clock) {
            self.by_stamp.remove(&(old, page));
        }
        self.by_stamp.insert((self.clock, page));
    }

    fn remove(&mut self, page: u64) -> bool {
        match self.stamp_of.remove(&page) {
            Some(stamp) => self.by_stamp.remove(&(stamp, page)),
            None => false,
        }
    }

    fn pop_oldest(&mut self) -> Option<u64> {
        let (_, page) = self.by_stamp.pop_first()?;
        self.stamp_of.remove(&page);
        Some(page)
    }
}

/// Evicts the least recently used page.
pub struct Lru {
    capacity: usize,
    list: RecencyList,
}

impl Lru {
    pub fn new(capacity: usize) -> Lru {
        Lru {
            capacity,
            list: RecencyList::default(),
        }
    }
}

impl Replacement for Lru {
    fn name(&self) -> String {
        "LRU".into()
    }

    fn access(&mut self, page: u64, _: usize) -> bool {
        let hit = self.list.contains(page);
        if !hit && self.list.len() == self.capacity {
            self.list.pop_oldest();
        }
        self.list.touch(page);
        hit
    }
}

/// 2Q (Johnson & Shasha 1994, full version): new pages enter a FIFO (`A1in`, a quarter of
/// the frames); pages evicted from it are remembered (`A1out`, half the frames' worth of ids);
/// a page re-referenced while remembered enters the LRU main queue (`Am`).
pub struct TwoQ {
    capacity: usize,
    a1_in_target: usize,
    a1_out_limit: usize,
    a1_in: VecDeque<u64>,
    a1_in_set: FxHashSet<u64>,
    a1_out: VecDeque<u64>,
    a1_out_set: FxHashSet<u64>,
    main: RecencyList,
}

impl TwoQ {
    pub fn new(capacity: usize) -> TwoQ {
        TwoQ {
            capacity,
            a1_in_target: (capacity / 4).max(1),
            a1_out_limit: (capacity / 2).max(1),
            a1_in: VecDeque::new(),
            a1_in_set: FxHashSet::default(),
            a1_out: VecDeque::new(),
            a1_out_set: FxHashSet::default(),
            main: RecencyList::default(),
        }
    }

    /// Frees one frame.
    fn reclaim(&mut self) {
        if self.a1_in.len() > self.a1_in_target || self.main.len() == 0 {
            if let Some(page) = self.a1_in.pop_front() {
                self.a1_in_set.remove(&page);
                self.a1_out.push_back(page);
                self.a1_out_set.insert(page);
                if self.a1_out.len() > self.a1_out_limit {
                    let forgotten = self.a1_out.pop_front().expect("non-empty");
                    self.a1_out_set.remove(&forgotten);
                }
                return;
            }
        }
        self.main.pop_oldest();
    }
}

impl Replacement for TwoQ {
    fn name(&self) -> String {
        "2Q".into()
    }

    fn access(&mut self, page: u64, _: usize) -> bool {
        if self.main.contains(page) {
            self.main.touch(page);
            return true;
        }
        if self.a1_in_set.contains(&page) {
            return true;
        }
        if self.a1_in.len() + self.main.len() == self.capacity {
            self.reclaim();
        }
        if self.a1_out_set.remove(&page) {
            self.a1_out.retain(|&p| p != page);
            self.main.touch(page);
        } else {
            self.a1_in.push_back(page);
            self.a1_in_set.insert(page);
        }
        false
    }
}

/// leankv's strategy: hot pages carry no bookkeeping; when frames run out, random hot pages
/// are moved to a cooling FIFO until it holds `cooling_fraction` of the frames; a cooling
/// page accessed again is hot again (a hit); the oldest cooling page is evicted.
pub struct Cooling {
    capacity: usize,
    cooling_target: usize,
    hot: Vec<u64>,
    hot_slot: FxHashMap<u64, usize>,
    cooling: RecencyList,
    rng: fastrand::Rng,
    percent: f64,
}

impl Cooling {
    pub fn new(capacity: usize, cooling_fraction: f64) -> Cooling {
        Cooling {
            capacity,
            cooling_target: ((capacity as f64 * cooling_fraction) as usize).max(1),
            hot: Vec::new(),
            hot_slot: FxHashMap::default(),
            cooling: RecencyList::default(),
            rng: fastrand::Rng::with_seed(12),
            percent: cooling_fraction * 100.0,
        }
    }

    fn make_hot(&mut self, page: u64) {
        self.hot_slot.insert(page, self.hot.len());
        self.hot.push(page);
    }

    fn cool_random_page(&mut self) {
        let slot = self.rng.usize(..self.hot.len());
        let page = self.hot.swap_remove(slot);
        self.hot_slot.remove(&page);
        if let Some(&moved) = self.hot.get(slot) {
            self.hot_slot.insert(moved, slot);
        }
        self.cooling.touch(page);
    }
}

impl Replacement for Cooling {
    fn name(&self) -> String {
        format!("leankv cooling {}%", self.percent)
    }

    fn access(&mut self, page: u64, _: usize) -> bool {
        if self.hot_slot.contains_key(&page) {
            return true;
        }
        if self.cooling.remove(page) {
            self.make_hot(page);
            return true;
        }
        if self.hot.len() + self.cooling.len() == self.capacity {
            while self.cooling.len() < self.cooling_target && !self.hot.is_empty() {
                self.cool_random_page();
            }
            self.cooling.pop_oldest();
        }
        self.make_hot(page);
        false
    }
}

/// Belady's optimal policy: evicts the page whose next use lies farthest in the future.
pub struct Opt {
    capacity: usize,
    next_use: Vec<usize>,
    resident: FxHashMap<u64, usize>,
    by_next_use: BTreeSet<(usize, u64)>,
}

impl Opt {
    /// Needs the whole trace in advance.
    pub fn new(capacity: usize, trace: &[u64]) -> Opt {
        let mut next_use = vec![usize::MAX; trace.len()];
        let mut seen: FxHashMap<u64, usize> = FxHashMap::default();
        for (position, &page) in trace.iter().enumerate().rev() {
            if let Some(&later) = seen.get(&page) {
                next_use[position] = later;
            }
            seen.insert(page, position);
        }
        Opt {
            capacity,
            next_use,
            resident: FxHashMap::default(),
            by_next_use: BTreeSet::new(),
        }
    }
}

impl Replacement for Opt {
    fn name(&self) -> String {
        "OPT".into()
    }

    fn access(&mut self, page: u64, position: usize) -> bool {
        let next = self.next_use[position];
        if let Some(previous) = self.resident.insert(page, next) {
            self.by_next_use.remove(&(previous, page));
            self.by_next_use.insert((next, page));
            return true;
        }
        if self.resident.len() > self.capacity {
            let (_, victim) = self.by_next_use.pop_last().expect("resident pages");
            self.resident.remove(&victim);
        }
        self.by_next_use.insert((next, page));
        false
    }
}

/// Hits over accesses of `policy` on `trace`.
pub fn hit_rate(policy: &mut dyn Replacement, trace: &[u64]) -> f64 {
    let hits = trace
        .iter()
        .enumerate()
        .filter(|&(position, &page)| policy.access(page, position))
        .count();
    hits as f64 / trace.len().max(1) as f64
}

/// Every policy of the table, with `capacity` frames.
pub fn policies(capacity: usize, trace: &[u64]) -> Vec<Box<dyn Replacement>> {
    vec![
        Box::new(Random::new(capacity)),
        Box::new(Fifo::new(capacity)),
        Box::new(Cooling::new(capacity, 0.05)),
        Box::new(Cooling::new(capacity, 0.10)),
        Box::new(Cooling::new(capacity, 0.20)),
        Box::new(Cooling::new(capacity, 0.50)),
        Box::new(Lru::new(capacity)),
        Box::new(TwoQ::new(capacity)),
        Box::new(Opt::new(capacity, trace)),
    ]
}

/// Records the page-access trace of `lookups` Zipf lookups on a freshly loaded leankv tree
/// (in memory, so that nothing but the lookups themselves is traced). Returns the trace and
/// the number of distinct pages the data occupies.
fn record_trace(args: &SimArgs) -> Result<(Vec<u64>, usize)> {
    let scratch = tempfile::tempdir()?;
    let storage = std::sync::Arc::new(leankv::testing::MemoryStorage::new());
    let estimate = (args.records as usize * (args.value_size + 8) * 3).max(64 << 20);
    let options = leankv::Options::default().pool_size(estimate);
    let db = leankv::ablations::Db::<Traced>::open_with_storage_and_policy(
        scratch.path(),
        options,
        storage,
    )?;
    let tree = db.open_tree("sim")?;
    let mut value = vec![0u8; args.value_size];
    for index in 0..args.records {
        crate::workload::fill_value(&mut value, index, 0);
        tree.insert(key(index), &value)?;
    }
    ensure!(
        db.stats().page_reads == 0,
        "the pool was too small to load in memory"
    );
    db.take_access_trace();
    tree.iter().try_for_each(|item| item.map(drop))?;
    let pages = db
        .take_access_trace()
        .into_iter()
        .collect::<FxHashSet<_>>()
        .len();
    let sampler = Sampler::new(Distribution::Zipf(args.theta), args.records);
    let mut rng = fastrand::Rng::with_seed(13);
    for _ in 0..args.lookups {
        tree.get(key(sampler.next(&mut rng)))?;
    }
    Ok((db.take_access_trace(), pages))
}

pub fn run(args: &SimArgs) -> Result<()> {
    ensure!(
        args.pool_fraction > 0.0 && args.pool_fraction < 1.0,
        "--pool-fraction must lie in (0, 1)"
    );
    println!(
        "tracing {} Zipf({}) lookups over {} records...",
        args.lookups, args.theta, args.records
    );
    let (trace, pages) = record_trace(args)?;
    let capacity = ((pages as f64 * args.pool_fraction) as usize).max(1);
    println!(
        "{} page accesses over {pages} pages; {capacity} frames ({:.0}% of the data)",
        trace.len(),
        args.pool_fraction * 100.0
    );
    let mut table = report::Table::new(&["policy", "hit rate %"]);
    let mut rates = serde_json::Map::new();
    for mut policy in policies(capacity, &trace) {
        let rate = hit_rate(policy.as_mut(), &trace);
        table.row(vec![policy.name(), format!("{:.2}", rate * 100.0)]);
        rates.insert(policy.name(), rate.into());
    }
    println!("{}", table.render());
    let options = serde_json::json!({
        "records": args.records,
        "lookups": args.lookups,
        "theta": args.theta,
        "pool_fraction": args.pool_fraction,
    });
    let label = format!("sim-{}", harness::unix_time());
    let record = Record {
        header: Environment::probe(Path::new(".")).header("sim", &label, &options),
        run: serde_json::json!({
            "records": args.records,
            "lookups": args.lookups,
            "theta": args.theta,
            "pages": pages,
            "frames": capacity,
            "accesses": trace.len(),
            "hit_rates": rates,
        }),
    };
    report::append(&args.results, &record)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook reference string (Silberschatz et al.): with 3 frames OPT faults 7
    /// times, LRU 10 and FIFO 9; with 4 frames FIFO faults 10 (Belady's anomaly).
    const TRACE: [u64; 12] = [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5];

    fn faults(policy: &mut dyn Replacement, trace: &[u64]) -> usize {
        let hits = hit_rate(policy, trace) * trace.len() as f64;
        trace.len() - hits.round() as usize
    }

    #[test]
    fn opt_lru_and_fifo_give_the_known_answers() {
        assert_eq!(faults(&mut Opt::new(3, &TRACE), &TRACE), 7);
        assert_eq!(faults(&mut Lru::new(3), &TRACE), 10);
        assert_eq!(faults(&mut Fifo::new(3), &TRACE), 9);
        assert_eq!(faults(&mut Fifo::new(4), &TRACE), 10);
        assert_eq!(faults(&mut Opt::new(4, &TRACE), &TRACE), 6);
    }

    #[test]
    fn lru_keeps_a_looping_working_set_that_fits() {
        let trace: Vec<u64> = (0..100).map(|i| i % 4).collect();
        assert_eq!(faults(&mut Lru::new(4), &trace), 4);
        assert_eq!(
            faults(&mut Lru::new(3), &trace),
            100,
            "LRU thrashes on a loop too big"
        );
    }

    #[test]
    fn every_policy_hits_everything_once_the_data_fits() {
        let trace: Vec<u64> = (0..1000).map(|i| (i * 7) % 50).collect();
        for mut policy in policies(50, &trace) {
            assert_eq!(faults(policy.as_mut(), &trace), 50, "{}", policy.name());
        }
    }

    #[test]
    fn skewed_traces_rank_the_policies_as_expected() {
        let sampler = Sampler::new(Distribution::Zipf(1.0), 10_000);
        let mut rng = fastrand::Rng::with_seed(5);
        let trace: Vec<u64> = (0..200_000).map(|_| sampler.next(&mut rng)).collect();
        let rate = |policy: &mut dyn Replacement| hit_rate(policy, &trace);
        let opt = rate(&mut Opt::new(1000, &trace));
        let lru = rate(&mut Lru::new(1000));
        let two_q = rate(&mut TwoQ::new(1000));
        let random = rate(&mut Random::new(1000));
        let cooling = rate(&mut Cooling::new(1000, 0.1));
        assert!(
            opt > two_q && opt > lru,
            "OPT is optimal: {opt} {two_q} {lru}"
        );
        assert!(lru > random && cooling > random, "{lru} {cooling} {random}");
        assert!(cooling < opt);
    }

    #[test]
    fn a_traced_run_records_root_to_leaf_paths() {
        let args = SimArgs {
            records: 20_000,
            value_size: 100,
            lookups: 1_000,
            theta: 1.0,
            pool_fraction: 0.2,
            results: PathBuf::new(),
        };
        let (trace, pages) = record_trace(&args).unwrap();
        assert!(pages > 100, "{pages}");
        // Each lookup visits the root and one leaf at least.
        assert!(trace.len() >= 2 * 1_000, "{}", trace.len());
        let root = trace[0];
        assert_eq!(trace.iter().filter(|&&p| p == root).count(), 1_000);
    }
}
