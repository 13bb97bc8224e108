//! A memory cgroup around one engine's runs, so that engines caching through the OS page cache
//! (LMDB, redb, RocksDB without direct reads) get the same memory budget as leankv's pool.
//!
//! Needs root and the memory controller (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`
//! under `/sys/fs/cgroup/memory`). Entering moves this process into a fresh group and drops the
//! clean page cache, so that pages cached before (e.g. while loading) are not free extra
//! memory; leaving moves the process back and removes the group. Memory this process already
//! maps stays charged where it was (current kernels no longer move charges), so engines that
//! map what they load in-process (the `mmap` baseline) must load inside the group.
//!
//! The cgroup files are written directly: `procfs` covers `/proc`, not the cgroup file system,
//! and the few writes here do not call for another crate.

use crate::engine::{Engine, EngineKind};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// This process inside a memory-limited cgroup until dropped.
pub struct MemoryCap {
    group: PathBuf,
    parent: PathBuf,
    pub limit_bytes: u64,
}

/// (hierarchy root, file that sets the limit, file that reports the peak).
fn hierarchy() -> Result<(PathBuf, &'static str, &'static str)> {
    let v2 = Path::new("/sys/fs/cgroup");
    if std::fs::read_to_string(v2.join("cgroup.controllers"))
        .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "memory"))
    {
        return Ok((v2.to_path_buf(), "memory.max", "memory.peak"));
    }
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if v1.join("memory.limit_in_bytes").exists() {
        return Ok((
            v1.to_path_buf(),
            "memory.limit_in_bytes",
            "memory.max_usage_in_bytes",
        ));
    }
    bail!("no cgroup memory controller found (cgroup v2 memory.max or v1 memory)")
}

impl MemoryCap {
    /// Moves this process into a new cgroup limited to `limit_bytes`.
    pub fn enter(limit_bytes: u64) -> Result<MemoryCap> {
        let (root, limit_file, _) = hierarchy()?;
        let group = root.join(format!("leankv-bench-{}", std::process::id()));
        std::fs::create_dir_all(&group)
            .with_context(|| format!("creating {} (needs root)", group.display()))?;
        std::fs::write(group.join(limit_file), limit_bytes.to_string())
            .with_context(|| format!("setting {limit_file}"))?;
        std::fs::write(group.join("cgroup.procs"), std::process::id().to_string())
            .context("joining the memory cgroup")?;
        drop_page_cache()?;
        Ok(MemoryCap {
            group,
            parent: root,
            limit_bytes,
        })
    }

    /// The group's peak memory use so far (page cache included).
    pub fn peak_bytes(&self) -> u64 {
        let peak_file = hierarchy().map_or("memory.peak", |(_, _, peak)| peak);
        std::fs::read_to_string(self.group.join(peak_file))
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.parent.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// Opens engine `kind` with `open`; with `memory_cap`, inside a memory cgroup of its pool plus
/// 10% (not for `inmem`, whose pool must hold everything anyway). Engines that load per run
/// map what they load, so they enter the cgroup before `open`; the others after it, so that
/// only the runs are capped.
pub fn open_capped(
    kind: EngineKind,
    memory_cap: bool,
    pool_bytes: usize,
    open: impl FnOnce() -> Result<Arc<dyn Engine>>,
) -> Result<(Arc<dyn Engine>, Option<MemoryCap>)> {
    let capped = memory_cap && kind != EngineKind::Inmem;
    let enter = || MemoryCap::enter(pool_bytes as u64 * 11 / 10);
    let mut cap = if capped && kind.loads_per_run() {
        Some(enter()?)
    } else {
        None
    };
    let engine = open()?;
    if capped && cap.is_none() {
        cap = Some(enter()?);
    }
    Ok((engine, cap))
}

/// Writes dirty pages and drops the clean page cache (root only).
pub fn drop_page_cache() -> Result<()> {
    std::process::Command::new("sync")
        .status()
        .context("running sync")?;
    procfs::sys::vm::drop_caches(procfs::sys::vm::DropCache::PageCache)
        .context("dropping the page cache")
}
