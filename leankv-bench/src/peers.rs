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
    use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Direction, IteratorMode, DB};

    pub struct Rocks {
        db: DB,
        settings: String,
    }

    impl Rocks {
        pub fn open(dir: &Path, setup: &Setup) -> Result<Rocks> {
            let mut options = rocksdb::Options::default();
            options.create_if_missing(true);
            options.set_compression_type(DBCompressionType::None);
            options.increase_parallelism(2);
            let mut table = BlockBasedOptions::default();
            let cache = Cache::new_lru_cache(setup.pool_bytes)?;
            table.set_block_cache(&cache);
            table.set_block_size(16 << 10);
            table.set_bloom_filter(10.0, false);
            options.set_block_based_table_factory(&table);
            options.set_use_direct_reads(setup.direct_io);
            let db = DB::open(&options, dir)?;
            let settings = format!(
                "block cache {} MiB, 16 KiB blocks, bloom 10 bits, no compression, \
                 direct reads {}, WAL on without fsync per write",
                setup.pool_bytes >> 20,
                setup.direct_io
            );
            Ok(Rocks { db, settings })
        }
    }

    impl Engine for Rocks {
        fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            Ok(match self.db.get_pinned(key)? {
                Some(found) => {
                    value.extend_from_slice(&found);
                    true
                }
                None => false,
            })
        }

        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put(key, value)?)
        }

        fn scan(&self, start: &[u8], count: usize) -> Result<usize> {
            let mut seen = 0;
            for item in self
                .db
                .iterator(IteratorMode::From(start, Direction::Forward))
                .take(count)
            {
                item?;
                seen += 1;
            }
            Ok(seen)
        }

        /// Also compacts everything, so that runs after a load measure a settled tree rather
        /// than background compaction (as db_bench's `compact` step does).
        fn flush(&self) -> Result<()> {
            self.db.flush()?;
            self.db.compact_range::<&[u8], &[u8]>(None, None);
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
    use heed::types::Bytes;
    use heed::{Database, Env, EnvFlags, EnvOpenOptions};
    use std::ops::Bound;

    pub struct Lmdb {
        env: Env,
        table: Database<Bytes, Bytes>,
    }

    impl Lmdb {
        pub fn open(dir: &Path, _setup: &Setup) -> Result<Lmdb> {
            std::fs::create_dir_all(dir)?;
            // SAFETY (heed's contract): this process opens the environment once and no other
            // process uses the directory during the run.
            let env = unsafe {
                EnvOpenOptions::new()
                    .map_size(256 << 30)
                    .max_dbs(1)
                    .flags(EnvFlags::NO_SYNC | EnvFlags::NO_READ_AHEAD)
                    .open(dir)?
            };
            let mut txn = env.write_txn()?;
            let table = env.create_database(&mut txn, Some("ycsb"))?;
            txn.commit()?;
            Ok(Lmdb { env, table })
        }
    }

    impl Engine for Lmdb {
        fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            let txn = self.env.read_txn()?;
            Ok(match self.table.get(&txn, key)? {
                Some(found) => {
                    value.extend_from_slice(found);
                    true
                }
                None => false,
            })
        }

        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            let mut txn = self.env.write_txn()?;
            self.table.put(&mut txn, key, value)?;
            Ok(txn.commit()?)
        }

        fn put_batch(&self, pairs: &[([u8; 8], Vec<u8>)]) -> Result<()> {
            let mut txn = self.env.write_txn()?;
            for (key, value) in pairs {
                self.table.put(&mut txn, key, value)?;
            }
            Ok(txn.commit()?)
        }

        fn scan(&self, start: &[u8], count: usize) -> Result<usize> {
            let txn = self.env.read_txn()?;
            // LMDB rejects empty keys, also as bounds.
            let lower = if start.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Included(start)
            };
            let range = (lower, Bound::Unbounded);
            let mut seen = 0;
            for item in self.table.range(&txn, &range)?.take(count) {
                item?;
                seen += 1;
            }
            Ok(seen)
        }

        fn flush(&self) -> Result<()> {
            Ok(self.env.force_sync()?)
        }

        fn settings(&self) -> String {
            "mmap (OS page cache; cap with a memory cgroup), NO_SYNC commits, \
             NO_READ_AHEAD, one write transaction per put"
                .into()
        }
    }
}

#[cfg(feature = "redb")]
mod redb_engine {
    use super::*;
    use redb::{Database, Durability, TableDefinition};
    use std::sync::atomic::{AtomicU64, Ordering};

    const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("ycsb");
    /// One commit in this many is durable (see `put`).
    const DURABLE_EVERY: u64 = 1000;

    pub struct Redb {
        db: Database,
        commits: AtomicU64,
        settings: String,
    }

    impl Redb {
        pub fn open(dir: &Path, setup: &Setup) -> Result<Redb> {
            std::fs::create_dir_all(dir)?;
            let db = redb::Builder::new()
                .set_cache_size(setup.pool_bytes)
                .create(dir.join("data.redb"))?;
            let txn = db.begin_write()?;
            txn.open_table(TABLE)?;
            txn.commit()?;
            let settings = format!(
                "cache {} MiB, one transaction per put, durable every {DURABLE_EVERY} commits \
                 and per load batch, else Durability::None",
                setup.pool_bytes >> 20
            );
            Ok(Redb {
                db,
                commits: AtomicU64::new(0),
                settings,
            })
        }
    }

    impl Engine for Redb {
        fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            let txn = self.db.begin_read()?;
            let table = txn.open_table(TABLE)?;
            Ok(match table.get(key)? {
                Some(found) => {
                    value.extend_from_slice(found.value());
                    true
                }
                None => false,
            })
        }

        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            let mut txn = self.db.begin_write()?;
            // Pages freed by non-durable commits are reused only after a durable one, so
            // without these the file grows without bound (tens of GB per million updates).
            let commits = self.commits.fetch_add(1, Ordering::Relaxed);
            if commits % DURABLE_EVERY != 0 {
                txn.set_durability(Durability::None);
            }
            txn.open_table(TABLE)?.insert(key, value)?;
            Ok(txn.commit()?)
        }

        fn put_batch(&self, pairs: &[([u8; 8], Vec<u8>)]) -> Result<()> {
            let txn = self.db.begin_write()?;
            {
                let mut table = txn.open_table(TABLE)?;
                for (key, value) in pairs {
                    table.insert(&key[..], &value[..])?;
                }
            }
            Ok(txn.commit()?)
        }

        fn scan(&self, start: &[u8], count: usize) -> Result<usize> {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(TABLE)?;
            let mut seen = 0;
            for item in table.range(start..)?.take(count) {
                item?;
                seen += 1;
            }
            Ok(seen)
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
