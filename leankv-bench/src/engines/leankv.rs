//! leankv itself under each of its buffer-management policies: the engine, its ablations (paper
//! Fig. 7: hash-table translation, LRU, pessimistic latches, all three) and the baselines that
//! keep every page in memory (`inmem`) or in an mmapped file (`mmap`).

use crate::diskstats::Disk;
use crate::engine::{DurabilityLevel, Engine, IoCounters, Operations, Setup, Table, Visit};
use anyhow::{Context, Result};
use leankv::ablations::{Db, Policy, Tree};
use leankv::{Options, WriteBatch};
use std::cell::{RefCell, RefMut};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What one commit holds in a leankv transaction (see [`Engine::transaction`]).
pub const TRANSACTION_UNIT: &str =
    "transaction: each transaction is one leankv Transaction, applied as it runs and committed \
     atomically (all or none after a crash; not isolated from concurrent transactions)";

/// The commit unit without the write-ahead log.
const UNLOGGED_UNIT: &str = "operation: without the write-ahead log a crash loses everything \
     since the last flush, so transactions run operation by operation (there is no atomicity \
     to buy; vmcache's TPC-C logs nothing either)";

/// How long an eventual commit may wait for its sync: leankv's default, set here so that the
/// settings can name it.
const EVENTUAL_SYNC_DELAY: Duration = Duration::from_millis(10);

/// leankv's options for `setup`: `--durability off` is the engine without its log.
pub fn options(setup: &Setup) -> Options {
    let options = Options::default()
        .pool_size(setup.pool_bytes)
        .page_size(setup.page_size)
        .cooling_fraction(setup.cooling_fraction)
        .direct_io(setup.direct_io)
        .scan_prefetch(setup.scan_prefetch);
    match setup.durability.leankv() {
        None => options.write_ahead_log(false),
        Some(durability) => {
            let options = options
                .durability(durability)
                .eventual_sync_delay(EVENTUAL_SYNC_DELAY);
            match setup.checkpoint_every {
                Some(bytes) => options.checkpoint_every(bytes),
                None => options,
            }
        }
    }
}

/// What the settings say about logging under `level`.
fn durability_settings(level: DurabilityLevel) -> String {
    match level {
        DurabilityLevel::Off => "no WAL (flush on close)".into(),
        DurabilityLevel::None => "WAL, durability none (synced when its buffer fills, at \
                                  checkpoints and on flush)"
            .into(),
        DurabilityLevel::Eventual => format!(
            "WAL, durability eventual (synced within {} ms)",
            EVENTUAL_SYNC_DELAY.as_millis()
        ),
        DurabilityLevel::Immediate => {
            "WAL, durability immediate (fdatasync before a commit returns, group commit)".into()
        }
    }
}

/// leankv under buffer-management policy `P`.
pub struct LeanEngine<P: Policy> {
    db: Db<P>,
    trees: Vec<Tree<P>>,
    settings: String,
    /// Whether the database runs with its write-ahead log.
    logged: bool,
    /// The device under the page file (`None` for the in-memory ones).
    disk: Option<Disk>,
}

impl<P: Policy> LeanEngine<P> {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Self> {
        let db = Db::<P>::open_with_policy(dir, options(setup))
            .with_context(|| format!("opening {} in {}", P::NAME, dir.display()))?;
        let mut logging = durability_settings(setup.durability);
        if let (Some(bytes), Some(_)) = (setup.checkpoint_every, setup.durability.leankv()) {
            logging += &format!(", checkpoint every {} MiB of log", bytes >> 20);
        }
        let disk = Disk::under(dir);
        Self::with_db(
            db,
            setup,
            logging,
            setup.durability.leankv().is_some(),
            disk,
        )
    }

    /// The policies that never evict keep their pages in the pool alone (for `Mmap` a
    /// mapped file in `dir`, sized for all data whatever the budget); the `MemoryStorage`
    /// behind them only holds the superblock. Nothing they hold survives the process, so they
    /// run without a log whatever the durability asked for.
    pub fn open_in_memory(dir: &Path, setup: &Setup) -> Result<Self> {
        let storage = Arc::new(leankv::testing::MemoryStorage::new());
        let mut options = options(setup)
            .write_ahead_log(false)
            .background_writer(false);
        if P::POOL_IN_FILE {
            let mapping = (setup.data_bytes as usize * 2).max(setup.pool_bytes);
            options = options.pool_size(mapping);
        }
        let db = Db::<P>::open_with_storage_and_policy(dir, options, storage)
            .with_context(|| format!("opening {}", P::NAME))?;
        let logging = format!(
            "no WAL, nothing durable (in-memory baseline: --durability {} does not apply)",
            setup.durability.name()
        );
        Self::with_db(db, setup, logging, false, None)
    }

    fn with_db(
        db: Db<P>,
        setup: &Setup,
        logging: String,
        logged: bool,
        disk: Option<Disk>,
    ) -> Result<Self> {
        let trees = setup
            .tables
            .iter()
            .map(|name| db.open_tree(name))
            .collect::<leankv::Result<_>>()?;
        let stats = db.stats();
        let settings = format!(
            "pool {} MiB, {} KiB pages, cooling {:.0}%, scan read-ahead {} leaves, I/O {:?}, \
             {logging}",
            setup.pool_bytes >> 20,
            stats.page_size >> 10,
            setup.cooling_fraction * 100.0,
            setup.scan_prefetch,
            stats.io_mode,
        );
        Ok(LeanEngine {
            db,
            trees,
            settings,
            logged,
            disk,
        })
    }
}

impl<P: Policy> Operations for LeanEngine<P> {
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        Ok(self.trees[table]
            .get_with(key, |found| value.extend_from_slice(found))?
            .is_some())
    }

    fn get_many(
        &self,
        table: Table,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize> {
        let mut count = 0;
        self.trees[table].get_many_with(keys, |index, value| {
            if let Some(value) = value {
                count += 1;
                found(index, value);
            }
        })?;
        Ok(count)
    }

    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        let value = self.trees[table].get(key)?;
        if let Some(value) = &value {
            consume(value);
        }
        Ok(value.is_some())
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.trees[table].insert(key, value)?)
    }

    /// One atomic batch: with the log, one commit (and at most one sync) per call.
    fn put_batch(&self, table: Table, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let tree = &self.trees[table];
        let mut batch = WriteBatch::<P>::default();
        for (key, value) in pairs {
            batch.insert(tree, key, value);
        }
        Ok(self.db.write(batch)?)
    }

    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        Ok(self.trees[table].update_in_place(key, modify)?.is_some())
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        Ok(self.trees[table].remove(key)?)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(self.trees[table].scan::<&[u8], _>((Bound::Included(start), end), visit)?)
    }
}

impl<P: Policy> Engine for LeanEngine<P> {
    fn io(&self) -> IoCounters {
        let stats = self.db.stats();
        IoCounters {
            page_reads: stats.page_reads,
            page_writes: stats.page_writes,
        }
    }

    /// Pages allocated so far (the page file's high-water mark, whether or not it is written).
    fn data_bytes(&self) -> Option<u64> {
        let stats = self.db.stats();
        Some(stats.page_count * stats.page_size as u64)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.db.stats().counters().to_vec()
    }

    /// Runs `body` as one leankv transaction (`Db::transaction`): its writes are applied as
    /// it makes them and committed when it returns (undone if it fails), and its reads see
    /// them. Without the log, runs `body` operation by operation (see [`UNLOGGED_UNIT`]).
    fn transaction(&self, body: &mut dyn FnMut(&dyn Operations) -> Result<()>) -> Result<()> {
        if !self.logged {
            return body(self);
        }
        self.db.transaction(|txn| {
            body(&Transaction {
                engine: self,
                txn: RefCell::new(txn),
            })
        })
    }

    fn transaction_unit(&self) -> &'static str {
        if self.logged {
            TRANSACTION_UNIT
        } else {
            UNLOGGED_UNIT
        }
    }

    fn flush(&self) -> Result<()> {
        if !P::EVICTS {
            return Ok(()); // nothing to make durable: its storage is memory
        }
        Ok(self.db.flush()?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn disk(&self) -> Option<Disk> {
        self.disk
    }
}

/// A transaction's view of a [`LeanEngine`]: writes go through the open leankv transaction,
/// reads and scans to the trees (which hold its writes already). Used by the one worker
/// thread that runs the transaction.
struct Transaction<'t, 'db, P: Policy> {
    engine: &'t LeanEngine<P>,
    txn: RefCell<&'t mut leankv::Transaction<'db, P>>,
}

impl<'t, 'db, P: Policy> Transaction<'t, 'db, P> {
    fn txn(&self) -> RefMut<'_, &'t mut leankv::Transaction<'db, P>> {
        self.txn.borrow_mut()
    }
}

impl<P: Policy> Operations for Transaction<'_, '_, P> {
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        self.engine.get(table, key, value)
    }

    fn get_many(
        &self,
        table: Table,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize> {
        self.engine.get_many(table, keys, found)
    }

    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        self.engine.natural_read(table, key, consume)
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.txn().insert(&self.engine.trees[table], key, value)?)
    }

    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        let tree = &self.engine.trees[table];
        Ok(self.txn().update_in_place(tree, key, modify)?.is_some())
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        Ok(self.txn().remove(&self.engine.trees[table], key)?)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        self.engine.scan(table, start, end, visit)
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{counter, DurabilityLevel, Engine, EngineKind, Setup};
    use crate::engines::open;

    fn setup(durability: DurabilityLevel) -> Setup {
        Setup::for_tests(durability)
    }

    /// (log bytes, log syncs) after `puts` single puts and one batch of 100 pairs.
    fn log_after_writes(engine: &dyn Engine, puts: u64) -> (u64, u64) {
        for n in 0..puts {
            engine.put(0, &n.to_be_bytes(), b"value").unwrap();
        }
        let pairs: Vec<_> = (puts..puts + 100)
            .map(|n| (n.to_be_bytes().to_vec(), b"batched".to_vec()))
            .collect();
        engine.put_batch(0, &pairs).unwrap();
        let mut value = Vec::new();
        assert!(engine
            .get(0, &(puts + 99).to_be_bytes(), &mut value)
            .unwrap());
        let counters = engine.counters();
        (
            counter(&counters, "log_bytes_written").unwrap(),
            counter(&counters, "log_syncs").unwrap(),
        )
    }

    #[test]
    fn durability_levels_reach_the_log_counters_and_the_settings() {
        let mut syncs_by_level = Vec::new();
        for level in [
            DurabilityLevel::Off,
            DurabilityLevel::None,
            DurabilityLevel::Immediate,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let engine = open(EngineKind::Leankv, dir.path(), &setup(level)).unwrap();
            let (bytes, syncs) = log_after_writes(engine.as_ref(), 50);
            let settings = engine.settings();
            if level == DurabilityLevel::Off {
                assert_eq!((bytes, syncs), (0, 0));
                assert!(settings.contains("no WAL"), "{settings}");
            } else {
                assert!(bytes > 0, "{level:?}");
                assert!(
                    settings.contains(&format!("durability {}", level.name())),
                    "{settings}"
                );
            }
            syncs_by_level.push(syncs);
        }
        // Immediate waits for a sync per single put (one thread: no group to share it with).
        assert!(syncs_by_level[2] >= 50, "{syncs_by_level:?}");
        assert!(syncs_by_level[1] < syncs_by_level[2], "{syncs_by_level:?}");
    }

    #[test]
    fn reads_inside_a_transaction_see_its_writes() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(
            EngineKind::Leankv,
            dir.path(),
            &setup(DurabilityLevel::Eventual),
        )
        .unwrap();
        engine.put(0, b"kept", b"before").unwrap();
        engine
            .transaction(&mut |txn| {
                txn.put(0, b"new", b"written")?;
                assert!(txn.update(0, b"kept", &mut |value| value.copy_from_slice(b"after!"))?);
                let mut value = Vec::new();
                assert!(txn.get(0, b"new", &mut value)? && value == b"written");
                let mut read = vec![None; 3];
                let keys: [&[u8]; 3] = [b"kept", b"absent", b"new"];
                let found = txn.get_many(0, &keys, &mut |index, value| {
                    read[index] = Some(value.to_vec());
                })?;
                assert_eq!(found, 2);
                assert_eq!(
                    read,
                    [Some(b"after!".to_vec()), None, Some(b"written".to_vec())]
                );
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn in_memory_baselines_never_log() {
        for kind in [EngineKind::Inmem, EngineKind::Mmap] {
            let dir = tempfile::tempdir().unwrap();
            let engine = open(kind, dir.path(), &setup(DurabilityLevel::Immediate)).unwrap();
            assert_eq!(log_after_writes(engine.as_ref(), 50), (0, 0), "{kind:?}");
            let settings = engine.settings();
            assert!(settings.contains("in-memory baseline"), "{settings}");
        }
    }
}
