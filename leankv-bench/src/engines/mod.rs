//! The engines, one file each, behind the [`Engine`] interface: leankv with its ablations and
//! baselines (`leankv`), and the peers behind cargo features (`lmdb`, `redb`, `rocksdb`, or
//! `peers` for all). Peer settings follow DESIGN.md §5: no compression, the same memory budget
//! (block cache for RocksDB, cache size for redb; LMDB has none of its own and must be capped
//! by a memory cgroup), durability stated.

mod leankv;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;

pub use self::leankv::options as leankv_options;
use self::leankv::LeanEngine;
pub use self::leankv::TRANSACTION_UNIT as LEANKV_TRANSACTION_UNIT;
use crate::engine::{Engine, EngineKind, Setup};
use ::leankv::ablations::{HashTable, InMemory, Lean, Lru, Mmap, Pessimistic, Traditional};
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;

/// Runs `load` on `kind`'s loader (see [`EngineKind::loader`]) opened over `path`, unless a
/// previous load finished there (it leaves a `.loaded` marker); a partial load is removed first.
pub fn load_once(
    kind: EngineKind,
    path: &Path,
    setup: &Setup,
    load: impl FnOnce(&dyn Engine) -> Result<()>,
) -> Result<()> {
    let marker = path.join(".loaded");
    if marker.exists() {
        // A kept load that an interrupted run left unusable (leankv refuses a database a
        // killed process had open) is loaded again rather than failing every later run.
        match open(kind.loader(), path, setup) {
            Ok(engine) => {
                drop(engine);
                return Ok(());
            }
            Err(error) => tracing::warn!(
                "the kept load in {} cannot be opened ({error:#}); loading it again",
                path.display()
            ),
        }
    }
    if path.exists() {
        std::fs::remove_dir_all(path)?;
    }
    let engine = open(kind.loader(), path, setup)?;
    load(engine.as_ref())?;
    drop(engine);
    std::fs::write(&marker, "loaded\n")?;
    Ok(())
}

/// Opens engine `kind` with its files in `dir` (created if missing).
pub fn open(kind: EngineKind, dir: &Path, setup: &Setup) -> Result<Arc<dyn Engine>> {
    let engine: Arc<dyn Engine> = match kind {
        EngineKind::Leankv => Arc::new(LeanEngine::<Lean>::open(dir, setup)?),
        EngineKind::HashTable => Arc::new(LeanEngine::<HashTable>::open(dir, setup)?),
        EngineKind::Lru => Arc::new(LeanEngine::<Lru>::open(dir, setup)?),
        EngineKind::Pessimistic => Arc::new(LeanEngine::<Pessimistic>::open(dir, setup)?),
        EngineKind::Traditional => Arc::new(LeanEngine::<Traditional>::open(dir, setup)?),
        EngineKind::Inmem => Arc::new(LeanEngine::<InMemory>::open_in_memory(dir, setup)?),
        EngineKind::Mmap => Arc::new(LeanEngine::<Mmap>::open_in_memory(dir, setup)?),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Arc::new(rocksdb::Rocks::open(dir, setup)?),
        #[cfg(feature = "lmdb")]
        EngineKind::Lmdb => Arc::new(lmdb::Lmdb::open(dir, setup)?),
        #[cfg(feature = "redb")]
        EngineKind::Redb => Arc::new(redb::Redb::open(dir, setup)?),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => return not_built(kind, "rocksdb"),
        #[cfg(not(feature = "lmdb"))]
        EngineKind::Lmdb => return not_built(kind, "lmdb"),
        #[cfg(not(feature = "redb"))]
        EngineKind::Redb => return not_built(kind, "redb"),
    };
    Ok(engine)
}

/// Fails with the feature to enable for an engine left out of this build.
#[cfg(not(all(feature = "lmdb", feature = "redb", feature = "rocksdb")))]
pub fn not_built(kind: EngineKind, feature: &str) -> Result<Arc<dyn Engine>> {
    anyhow::bail!(
        "{} is not part of this build: rebuild with `--features {feature}` (or `peers`)",
        kind.name()
    )
}
