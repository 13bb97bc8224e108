//! LMDB through heed (feature `lmdb`): it has no cache of its own (the OS page cache holds its
//! mapped file; cap it with a memory cgroup), commits synced or not as `--durability` says.

use crate::engine::{DurabilityLevel, Engine, Operations, Setup, Table, Visit};
use anyhow::Result;
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use std::ops::Bound;
use std::path::Path;

/// Each table is a named LMDB database in one environment.
pub struct Lmdb {
    env: Env,
    tables: Vec<Database<Bytes, Bytes>>,
    settings: String,
}

/// LMDB's flags closest to `level`, and what the settings say about them. LMDB has no log (its
/// copy-on-write pages need none) and no timed sync, so only `immediate` differs.
fn sync_flags(level: DurabilityLevel) -> (EnvFlags, &'static str) {
    match level {
        DurabilityLevel::Immediate => (
            EnvFlags::empty(),
            "synced commits (fdatasync per commit, no group commit)",
        ),
        DurabilityLevel::Off | DurabilityLevel::None | DurabilityLevel::Eventual => (
            EnvFlags::NO_SYNC,
            "NO_SYNC commits (synced on flush; LMDB has no log to turn off and no timed sync)",
        ),
    }
}

impl Lmdb {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Lmdb> {
        std::fs::create_dir_all(dir)?;
        let (sync, durability) = sync_flags(setup.durability);
        // SAFETY (heed's contract): this process opens the environment once and no other
        // process uses the directory during the run.
        let env = unsafe {
            EnvOpenOptions::new()
                .map_size(256 << 30)
                .max_dbs(setup.tables.len() as u32)
                .flags(sync | EnvFlags::NO_READ_AHEAD)
                .open(dir)?
        };
        let mut txn = env.write_txn()?;
        let tables = setup
            .tables
            .iter()
            .map(|name| env.create_database(&mut txn, Some(name)))
            .collect::<heed::Result<_>>()?;
        txn.commit()?;
        let settings = format!(
            "mmap (OS page cache; cap with a memory cgroup), durability {}: {durability}, \
             NO_READ_AHEAD, one write transaction per put or update",
            setup.durability.name()
        );
        Ok(Lmdb {
            env,
            tables,
            settings,
        })
    }
}

/// Closes the environment. heed keeps every environment it opened in a global map until told
/// to close it, and refuses to open one path again with other flags (as a run whose durability
/// differs from its load's does) while it is there.
impl Drop for Lmdb {
    fn drop(&mut self) {
        // Takes the map's reference; the environment closes when `self.env` drops next.
        drop(self.env.clone().prepare_for_closing());
    }
}

impl Operations for Lmdb {
    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        let txn = self.env.read_txn()?;
        let found = self.tables[table].get(&txn, key)?;
        if let Some(value) = found {
            consume(value);
        }
        Ok(found.is_some())
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        self.tables[table].put(&mut txn, key, value)?;
        Ok(txn.commit()?)
    }

    fn put_batch(&self, table: Table, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        for (key, value) in pairs {
            self.tables[table].put(&mut txn, key, value)?;
        }
        Ok(txn.commit()?)
    }

    /// One write transaction: LMDB serializes writers, so the update is atomic.
    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        let mut txn = self.env.write_txn()?;
        let Some(mut value) = self.tables[table].get(&txn, key)?.map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        modify(&mut value);
        self.tables[table].put(&mut txn, key, &value)?;
        txn.commit()?;
        Ok(true)
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        let mut txn = self.env.write_txn()?;
        let existed = self.tables[table].delete(&mut txn, key)?;
        txn.commit()?;
        Ok(existed)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        let txn = self.env.read_txn()?;
        // LMDB rejects empty keys, also as bounds.
        let lower = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(start)
        };
        let range = (lower, end.map_or(Bound::Unbounded, Bound::Excluded));
        for item in self.tables[table].range(&txn, &range)? {
            let (key, value) = item?;
            if !visit(key, value) {
                break;
            }
        }
        Ok(())
    }
}

impl Engine for Lmdb {
    fn transaction(&self, body: &mut dyn FnMut(&dyn Operations) -> Result<()>) -> Result<()> {
        body(self)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run reopens its load's environment with the run's durability (other flags).
    #[test]
    fn reopens_with_another_durability() {
        let dir = tempfile::tempdir().unwrap();
        let setup = Setup::for_tests;
        let loaded = Lmdb::open(dir.path(), &setup(DurabilityLevel::Off)).unwrap();
        loaded.put(0, b"key", b"value").unwrap();
        drop(loaded);
        let engine = Lmdb::open(dir.path(), &setup(DurabilityLevel::Immediate)).unwrap();
        let mut value = Vec::new();
        assert!(engine.get(0, b"key", &mut value).unwrap());
        assert!(engine.settings().contains("durability immediate"));
    }
}
