//! LMDB through heed (feature `lmdb`): it has no cache of its own (the OS page cache holds its
//! mapped file; cap it with a memory cgroup), commits without sync.

use crate::engine::{Engine, Setup, Table, Visit};
use anyhow::Result;
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use std::ops::Bound;
use std::path::Path;

/// Each table is a named LMDB database in one environment.
pub struct Lmdb {
    env: Env,
    tables: Vec<Database<Bytes, Bytes>>,
}

impl Lmdb {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Lmdb> {
        std::fs::create_dir_all(dir)?;
        // SAFETY (heed's contract): this process opens the environment once and no other
        // process uses the directory during the run.
        let env = unsafe {
            EnvOpenOptions::new()
                .map_size(256 << 30)
                .max_dbs(setup.tables.len() as u32)
                .flags(EnvFlags::NO_SYNC | EnvFlags::NO_READ_AHEAD)
                .open(dir)?
        };
        let mut txn = env.write_txn()?;
        let tables = setup
            .tables
            .iter()
            .map(|name| env.create_database(&mut txn, Some(name)))
            .collect::<heed::Result<_>>()?;
        txn.commit()?;
        Ok(Lmdb { env, tables })
    }
}

impl Engine for Lmdb {
    fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        let txn = self.env.read_txn()?;
        Ok(match self.tables[table].get(&txn, key)? {
            Some(found) => {
                value.extend_from_slice(found);
                true
            }
            None => false,
        })
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

    fn flush(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }

    fn settings(&self) -> String {
        "mmap (OS page cache; cap with a memory cgroup), NO_SYNC commits, \
         NO_READ_AHEAD, one write transaction per put or update"
            .into()
    }
}
