//! RocksDB (feature `rocksdb`): no compression, the memory budget split between the block cache
//! and the memtables, direct reads as configured, the WAL as `--durability` says.

use crate::engine::{DurabilityLevel, Engine, Operations, Setup, Table, Visit};
use anyhow::Result;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Direction,
    IteratorMode, WriteOptions, DB,
};
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Mutex;

/// Stripes of the lock table that makes `update` (a get and a put) atomic per key.
const UPDATE_STRIPES: usize = 256;

/// Table 0 is RocksDB's default column family, the others are named column families.
pub struct Rocks {
    db: DB,
    tables: &'static [&'static str],
    update_locks: Vec<Mutex<()>>,
    /// Every write's options: the durability level.
    write_options: WriteOptions,
    settings: String,
}

/// RocksDB's write options closest to `level`, and what the settings say about them.
fn write_options_for(level: DurabilityLevel) -> (WriteOptions, &'static str) {
    let mut options = WriteOptions::default();
    let described = match level {
        DurabilityLevel::Off => {
            options.disable_wal(true);
            "WAL off (memtables reach disk on flush)"
        }
        DurabilityLevel::None | DurabilityLevel::Eventual => {
            "WAL on without fsync per write (RocksDB has no timed WAL sync: eventual = none)"
        }
        DurabilityLevel::Immediate => {
            options.set_sync(true);
            "WAL synced before each write returns (sync writes, group commit)"
        }
    };
    (options, described)
}

impl Rocks {
    pub fn open(dir: &Path, setup: &Setup) -> Result<Rocks> {
        let mut options = rocksdb::Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_compression_type(DBCompressionType::None);
        options.increase_parallelism(2);
        // Memtables live outside the block cache: give them a quarter of the budget, so
        // that both together stay within it (a memory cgroup enforces it).
        let memtables = setup.pool_bytes / 4;
        options.set_db_write_buffer_size(memtables);
        let mut table = BlockBasedOptions::default();
        let cache = Cache::new_lru_cache(setup.pool_bytes - memtables)?;
        table.set_block_cache(&cache);
        table.set_block_size(16 << 10);
        table.set_bloom_filter(10.0, false);
        options.set_block_based_table_factory(&table);
        options.set_use_direct_reads(setup.direct_io);
        // The default family is named explicitly: opened without any named family, RocksDB
        // gives out no handle for it.
        let families = std::iter::once(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .chain(setup.tables[1..].iter().copied())
            .map(|name| ColumnFamilyDescriptor::new(name, options.clone()));
        let db = DB::open_cf_descriptors(&options, dir, families)?;
        let (write_options, durability) = write_options_for(setup.durability);
        let settings = format!(
            "block cache {} MiB + memtables {} MiB (shared by all column families), 16 KiB \
             blocks, bloom 10 bits, no compression, direct reads {}, durability {}: {durability}, \
             updates as get + put under a striped lock",
            (setup.pool_bytes - memtables) >> 20,
            memtables >> 20,
            setup.direct_io,
            setup.durability.name(),
        );
        Ok(Rocks {
            db,
            tables: setup.tables,
            update_locks: (0..UPDATE_STRIPES).map(|_| Mutex::new(())).collect(),
            write_options,
            settings,
        })
    }

    fn family(&self, table: Table) -> &ColumnFamily {
        let name = if table == 0 {
            rocksdb::DEFAULT_COLUMN_FAMILY_NAME
        } else {
            self.tables[table]
        };
        self.db
            .cf_handle(name)
            .expect("every table's column family is opened with the database")
    }
}

impl Operations for Rocks {
    fn natural_read(
        &self,
        table: Table,
        key: &[u8],
        consume: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        let found = self.db.get_pinned_cf(self.family(table), key)?;
        if let Some(value) = &found {
            consume(value);
        }
        Ok(found.is_some())
    }

    fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self
            .db
            .put_cf_opt(self.family(table), key, value, &self.write_options)?)
    }

    fn update(&self, table: Table, key: &[u8], modify: &mut dyn FnMut(&mut [u8])) -> Result<bool> {
        let stripe = rustc_hash::FxBuildHasher.hash_one((table, key)) as usize % UPDATE_STRIPES;
        let _locked = self.update_locks[stripe]
            .lock()
            .expect("no panics while held");
        let family = self.family(table);
        let Some(mut value) = self.db.get_cf(family, key)? else {
            return Ok(false);
        };
        modify(&mut value);
        self.db
            .put_cf_opt(family, key, value, &self.write_options)?;
        Ok(true)
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
        // RocksDB's delete does not say whether the key existed; callers rely on it.
        let family = self.family(table);
        let existed = self.db.get_pinned_cf(family, key)?.is_some();
        if existed {
            self.db.delete_cf_opt(family, key, &self.write_options)?;
        }
        Ok(existed)
    }

    fn scan(&self, table: Table, start: &[u8], end: Option<&[u8]>, visit: Visit) -> Result<()> {
        let mut options = rocksdb::ReadOptions::default();
        if let Some(end) = end {
            options.set_iterate_upper_bound(end.to_vec());
        }
        let mode = IteratorMode::From(start, Direction::Forward);
        for item in self.db.iterator_cf_opt(self.family(table), options, mode) {
            let (key, value) = item?;
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }
}

impl Engine for Rocks {
    fn transaction(&self, body: &mut dyn FnMut(&dyn Operations) -> Result<()>) -> Result<()> {
        body(self)
    }

    /// Also compacts everything, so that runs after a load measure a settled tree rather
    /// than background compaction (as db_bench's `compact` step does).
    fn flush(&self) -> Result<()> {
        for table in 0..self.tables.len() {
            let family = self.family(table);
            self.db.flush_cf(family)?;
            self.db.compact_range_cf::<&[u8], &[u8]>(family, None, None);
        }
        Ok(())
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }
}
