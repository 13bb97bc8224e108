//! Peer engines behind cargo features (`lmdb`, `redb`, `rocksdb`, or `peers` for all), driven
//! through the same [`Engine`] interface as leankv. Settings follow DESIGN.md §5: no
//! compression, the same memory budget (block cache for RocksDB, cache size for redb; LMDB
//! has none of its own and must be capped by a memory cgroup), durability stated.

#[cfg(any(feature = "lmdb", feature = "redb", feature = "rocksdb"))]
use crate::engine::Engine;
use crate::engine::{EngineKind, Setup};
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;

/// Opens peer `kind` in `dir`, or says which feature builds it.
pub fn open(kind: EngineKind, dir: &Path, setup: &Setup) -> Result<Arc<dyn crate::engine::Engine>> {
    let _ = (dir, setup);
    match kind {
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Ok(Arc::new(rocks::Rocks::open(dir, setup)?)),
        #[cfg(feature = "lmdb")]
        EngineKind::Lmdb => Ok(Arc::new(lmdb::Lmdb::open(dir, setup)?)),
        #[cfg(feature = "redb")]
        EngineKind::Redb => Ok(Arc::new(redb_engine::Redb::open(dir, setup)?)),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => crate::engine::not_built(kind, "rocksdb"),
        #[cfg(not(feature = "lmdb"))]
        EngineKind::Lmdb => crate::engine::not_built(kind, "lmdb"),
        #[cfg(not(feature = "redb"))]
        EngineKind::Redb => crate::engine::not_built(kind, "redb"),
        _ => unreachable!("{} is not a peer engine", kind.name()),
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;
    use crate::engine::Table;
    use rocksdb::{
        BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
        Direction, IteratorMode, DB,
    };
    use std::hash::BuildHasher;
    use std::sync::Mutex;

    /// Stripes of the lock table that makes `update` (a get and a put) atomic per key.
    const UPDATE_STRIPES: usize = 256;

    /// Table 0 is RocksDB's default column family, the others are named column families.
    pub struct Rocks {
        db: DB,
        tables: &'static [&'static str],
        update_locks: Vec<Mutex<()>>,
        settings: String,
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
            let families = setup.tables[1..]
                .iter()
                .map(|name| ColumnFamilyDescriptor::new(*name, options.clone()));
            let db = DB::open_cf_descriptors(&options, dir, families)?;
            let settings = format!(
                "block cache {} MiB + memtables {} MiB (shared by all column families), 16 KiB \
                 blocks, bloom 10 bits, no compression, direct reads {}, WAL on without fsync \
                 per write, updates as get + put under a striped lock",
                (setup.pool_bytes - memtables) >> 20,
                memtables >> 20,
                setup.direct_io
            );
            Ok(Rocks {
                db,
                tables: setup.tables,
                update_locks: (0..UPDATE_STRIPES).map(|_| Mutex::new(())).collect(),
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

    impl Engine for Rocks {
        fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            Ok(match self.db.get_pinned_cf(self.family(table), key)? {
                Some(found) => {
                    value.extend_from_slice(&found);
                    true
                }
                None => false,
            })
        }

        fn put(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put_cf(self.family(table), key, value)?)
        }

        fn update(
            &self,
            table: Table,
            key: &[u8],
            modify: &mut dyn FnMut(&mut [u8]),
        ) -> Result<bool> {
            let stripe = rustc_hash::FxBuildHasher.hash_one((table, key)) as usize % UPDATE_STRIPES;
            let _locked = self.update_locks[stripe]
                .lock()
                .expect("no panics while held");
            let family = self.family(table);
            let Some(mut value) = self.db.get_cf(family, key)? else {
                return Ok(false);
            };
            modify(&mut value);
            self.db.put_cf(family, key, value)?;
            Ok(true)
        }

        fn delete(&self, table: Table, key: &[u8]) -> Result<bool> {
            // RocksDB's delete does not say whether the key existed; callers rely on it.
            let family = self.family(table);
            let existed = self.db.get_pinned_cf(family, key)?.is_some();
            if existed {
                self.db.delete_cf(family, key)?;
            }
            Ok(existed)
        }

        fn scan(
            &self,
            table: Table,
            start: &[u8],
            end: Option<&[u8]>,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<()> {
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
}

#[cfg(feature = "lmdb")]
mod lmdb {
    use super::*;
    use crate::engine::Table;
    use heed::types::Bytes;
    use heed::{Database, Env, EnvFlags, EnvOpenOptions};
    use std::ops::Bound;

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
        fn update(
            &self,
            table: Table,
            key: &[u8],
            modify: &mut dyn FnMut(&mut [u8]),
        ) -> Result<bool> {
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

        fn scan(
            &self,
            table: Table,
            start: &[u8],
            end: Option<&[u8]>,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<()> {
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
}

#[cfg(feature = "redb")]
mod redb_engine {
    use super::*;
    use crate::engine::Table;
    use redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// One commit in this many is durable (see `write_txn`).
    const DURABLE_EVERY: u64 = 1000;

    pub struct Redb {
        db: Database,
        tables: &'static [&'static str],
        commits: AtomicU64,
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
            let settings = format!(
                "cache {} MiB, one transaction per put or update, durable every \
                 {DURABLE_EVERY} commits and per load batch, else Durability::None",
                setup.pool_bytes >> 20
            );
            Ok(Redb {
                db,
                tables: setup.tables,
                commits: AtomicU64::new(0),
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
            if !self
                .commits
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(DURABLE_EVERY)
            {
                txn.set_durability(Durability::None);
            }
            Ok(txn)
        }
    }

    impl Engine for Redb {
        fn get(&self, table: Table, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            let txn = self.db.begin_read()?;
            let table = txn.open_table(self.definition(table))?;
            Ok(match table.get(key)? {
                Some(found) => {
                    value.extend_from_slice(found.value());
                    true
                }
                None => false,
            })
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

        fn update(
            &self,
            table: Table,
            key: &[u8],
            modify: &mut dyn FnMut(&mut [u8]),
        ) -> Result<bool> {
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

        fn scan(
            &self,
            table: Table,
            start: &[u8],
            end: Option<&[u8]>,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<()> {
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

        fn flush(&self) -> Result<()> {
            let txn = self.db.begin_write()?;
            Ok(txn.commit()?)
        }

        fn settings(&self) -> String {
            self.settings.clone()
        }
    }
}
