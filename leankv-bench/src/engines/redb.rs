//! redb (feature `redb`): its cache sized to the memory budget, one transaction per write;
//! every commit durable under `--durability immediate`, else a durable commit every so often so
//! that freed pages get reused.

use crate::engine::{DurabilityLevel, Engine, Operations, Setup, Table, Visit};
use anyhow::Result;
use redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// One commit in this many is durable when commits are not all durable (see `write_txn`).
const DURABLE_EVERY: u64 = 1000;

pub struct Redb {
    db: Database,
    tables: &'static [&'static str],
    commits: AtomicU64,
    /// `--durability immediate`: every commit is `Durability::Immediate`.
    every_commit_durable: bool,
    settings: String,
}

type Definition = TableDefinition<'static, &'static [u8], &'static [u8]>;

impl Redb {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Redb> {
        std::fs::create_dir_all(dir)?;
        let db = redb::Builder::new()
            .set_cache_size(setup.pool_bytes)
            .create(dir.join("data.redb"))?;
        let txn = db.begin_write()?;
        for name in setup.tables {
            txn.open_table(Definition::new(name))?;
        }
        txn.commit()?;
        let every_commit_durable = setup.durability == DurabilityLevel::Immediate;
        // redb has no log to turn off and no timed sync, and its own Durability::Eventual
        // fdatasyncs every commit on Linux just as Immediate does: off, none and eventual all
        // get the periodic durable commit that page reuse needs.
        let durability = if every_commit_durable {
            "every commit Durability::Immediate (fdatasync per commit, no group commit)".into()
        } else {
            format!(
                "Durability::None, durable every {DURABLE_EVERY} commits and per load batch \
                 (redb has no log to turn off nor a timed sync; its Durability::Eventual syncs \
                 every commit on Linux)"
            )
        };
        let settings = format!(
            "cache {} MiB, one transaction per put or update, durability {}: {durability}",
            setup.pool_bytes >> 20,
            setup.durability.name(),
        );
        Ok(Redb {
            db,
            tables: setup.tables,
            commits: AtomicU64::new(0),
            every_commit_durable,
            settings,
        })
    }

    fn definition(&self, table: Table) -> Definition {
        Definition::new(self.tables[table])
    }

    /// A write transaction for one operation. Pages freed by non-durable commits are
    /// reused only after a durable one, so without the periodic durable commit the file
    /// grows without bound (tens of GB per million updates).
    fn write_txn(&self) -> Result<WriteTransaction> {
        let mut txn = self.db.begin_write()?;
        if !self.every_commit_durable
            && !self
                .commits
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(DURABLE_EVERY)
        {
            txn.set_durability(Durability::None);
        }
        Ok(txn)
    }
}

impl Operations for Redb {
    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(self.definition(table))?;
        let found = table.get(key)?;
        if let Some(value) = &found {
            consume(value.value());
        }
        Ok(found.is_some())
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        let txn = self.write_txn()?;
        txn.open_table(self.definition(table))?.insert(key, value)?;
        Ok(txn.commit()?)
    }

    fn put_batch(&self, table: Table, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(self.definition(table))?;
            for (key, value) in pairs {
                table.insert(&key[..], &value[..])?;
            }
        }
        Ok(txn.commit()?)
    }

    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        let txn = self.write_txn()?;
        {
            let mut table = txn.open_table(self.definition(table))?;
            let Some(mut value) = table.get(key)?.map(|found| found.value().to_vec()) else {
                return Ok(false);
            };
            modify(&mut value);
            table.insert(key, &value[..])?;
        }
        txn.commit()?;
        Ok(true)
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        let txn = self.write_txn()?;
        let existed = txn
            .open_table(self.definition(table))?
            .remove(key)?
            .is_some();
        txn.commit()?;
        Ok(existed)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(self.definition(table))?;
        let range = match end {
            Some(end) => table.range(start..end)?,
            None => table.range(start..)?,
        };
        for item in range {
            let (key, value) = item?;
            if !visit(key.value(), value.value()) {
                break;
            }
        }
        Ok(())
    }
}

impl Engine for Redb {
    fn transaction(&self, body: &mut dyn FnMut(&dyn Operations) -> Result<()>) -> Result<()> {
        body(self)
    }

    fn flush(&self) -> Result<()> {
        let txn = self.db.begin_write()?;
        Ok(txn.commit()?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }
}
