//! The buffer manager (paper §III–IV): pool, swips, replacement, I/O, epochs, background writer.
//!
//! Data structures built on it (the B+-tree) reach pages through swips. A swizzled swip costs
//! one branch; an unswizzled one makes the operation return [`Restart::Swizzle`], and
//! [`BufferManager::run`], the retry loop every operation runs in, then brings the page in
//! (from the cooling stage, or from disk through the in-flight table), swizzles the swip and
//! starts the operation over. No I/O happens while a latch is held or inside an epoch.
//!
//! Replacement: while free frames last, nothing is tracked. When they run out, the thread that
//! needs a frame unswizzles random hot pages (children before parents, through the
//! per-structure child iterator) until the cooling fraction of the pool is cooling, then takes
//! frames from the old end of the cooling FIFO, writing dirty ones first. A frame is reused only
//! once no thread can still read it (epochs). The background writer writes dirty cooling pages
//! ahead of eviction.
//!
//! Rules for callers: allocate pages only inside `run` (an empty free list is answered with
//! `Restart::NeedFrames`); write page bytes only under the frame's exclusive latch and mark the
//! frame dirty before releasing it; keep each page owned by exactly one swip and maintain the
//! parent link of every swizzled child (`Frame::set_parent`).
//!
//! The rooms: this file is the facade (configuration, the manager's state, accessors,
//! shutdown); [`access`] holds the retry loop and swip reading, [`fault_in`] bringing pages in,
//! [`prefetch`] read-ahead, [`eviction`] replacement, [`write_back`] writing pages (with the
//! thread in [`writer`]), [`allocation`] page allocation, deletion and tree roots. Each
//! implements its part of [`BufferManager`] and shares this module's imports. Below them:
//! [`frame`] (frame headers and states), [`pool`] (their memory), [`page`] (bounds-checked page
//! access), [`swip`], [`cooling`] (the cooling FIFO and in-flight reads), [`epoch`],
//! [`page_ids`] (allocation of page ids and the free list), [`translation`] and [`lru`] (for
//! the ablations), [`policy`], [`stats`].

mod access;
mod allocation;
mod blob;
mod cooling;
mod epoch;
mod eviction;
mod fault_in;
mod frame;
mod logging;
mod lru;
mod page;
mod page_ids;
pub mod policy;
mod pool;
mod prefetch;
mod read_ring;
mod ring_reads;
mod stats;
mod swip;
mod translation;
mod write_back;
mod writer;

pub(crate) use blob::NewBlob;
pub(crate) use frame::{Frame, FrameId, FrameState, FRAME_HEADER_AREA};
pub(crate) use logging::BlobChange;
pub(crate) use page::{PageMut, PageView};
pub(crate) use page_ids::{load_free_list, save_free_list};
pub(crate) use stats::{Counter, COUNTER_COUNT};
pub(crate) use swip::{Swip, SwipTarget};
pub(crate) use write_back::FlushPages;

use crate::error::{Error, Result};
use crate::io::page::{self as page_format, PageType, PAGE_HEADER_SIZE};
use crate::io::{AlignedBuf, IoMode, Storage};
use crate::sync::{Attempt, Event, ExclusiveGuard, LatchMode, Restart};
use cooling::{CoolingStage, InFlightRead};
use epoch::Epochs;
use frame::NO_PAGE;
use lru::LruList;
use page_ids::PageIds;
use parking_lot::Mutex;
use policy::Policy;
use pool::Pool;
use prefetch::Prefetcher;
pub(crate) use prefetch::ReadAhead;
use ring_reads::RingReads;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use translation::TranslationTable;
use writer::BackgroundWriter;

/// Calls `visit(offset)` with the byte offset of every child swip on `page`, stopping early
/// when `visit` returns `false`.
pub(crate) type ChildIterator = fn(page: PageView<'_>, visit: &mut dyn FnMut(usize) -> bool);

/// Checks a page image; the error says what is wrong.
pub(crate) type PageCheck = fn(page: PageView<'_>) -> Result<(), String>;

/// Checks that `child` is what the swip at byte `offset` of `parent` may refer to.
pub(crate) type ChildCheck =
    fn(parent: PageView<'_>, offset: usize, child: PageView<'_>) -> Result<(), String>;

/// The free bytes in a page as (start, length), which page images in the log leave out.
pub(crate) type FreeGap = fn(page: PageView<'_>) -> (usize, usize);

/// What the buffer manager needs to know about the contents of one page type. Each
/// buffer-managed structure registers one per page type it uses.
///
/// Pages on disk are untrusted: `check` runs on every image read (after its checksum), and
/// `check_child` whenever a page becomes hot under a parent, so that a page that is
/// well-formed on its own but does not belong where it is referenced (a stale or misdirected
/// page) is reported instead of followed.
#[derive(Clone, Copy)]
pub(crate) struct PageKind {
    pub(crate) page_type: PageType,
    /// Where its child swips are (`None`: it has none).
    pub(crate) children: Option<ChildIterator>,
    /// The structural check of an image read from disk.
    pub(crate) check: Option<PageCheck>,
    /// The check of a page about to be swizzled under a page of this type.
    pub(crate) check_child: Option<ChildCheck>,
    /// Where its free bytes are (`None`: log whole images).
    pub(crate) free_gap: Option<FreeGap>,
}

/// How the buffer manager is set up (derived from `crate::Options` by `Db`).
#[derive(Debug, Clone)]
pub(crate) struct BufferConfig {
    pub(crate) page_size: usize,
    pub(crate) frames: u32,
    pub(crate) cooling_fraction: f64,
    pub(crate) prefault: bool,
    pub(crate) background_writer: bool,
    /// File holding the frames instead of anonymous memory (the `Mmap` baseline).
    pub(crate) pool_file: Option<std::path::PathBuf>,
    /// Most leaves a scan reads ahead (0: no prefetching).
    pub(crate) prefetch_depth: usize,
    /// The log generation of this open: large values' ids start from it (see `blob`).
    pub(crate) generation: u32,
}

/// The buffer manager. Shared through `Arc`; all methods take `&self`. `P` chooses the
/// techniques (see [`policy`]); everything specific to an ablation is behind a `P::` constant.
pub(crate) struct BufferManager<P: Policy> {
    pool: Pool,
    storage: Arc<dyn Storage>,
    epochs: Arc<Epochs>,
    cooling: Mutex<CoolingStage>,
    /// Held by the one thread that refills the cooling stage (see `evict_batch`).
    cooling_refill: Mutex<()>,
    free_frames: Mutex<Vec<FrameId>>,
    /// Pages deleted while an image of theirs was being written, with their frames: their ids
    /// are handed out again only once that write has landed (see `delete_page`).
    deleted_while_writing: Mutex<Vec<(FrameId, u64)>>,
    /// Frames `fresh..frames` have never been used (and cost no memory unless populated ahead:
    /// see `BufferManager::populate_ahead`).
    fresh: AtomicU32,
    page_ids: Mutex<PageIds>,
    blob_ids: blob::BlobIds,
    kinds: [Option<PageKind>; PageType::COUNT],
    cooling_target: usize,
    /// Notified whenever a page write ends (its frame's `writing` claim is released).
    writes_finished: Event,
    eviction_batch: usize,
    closed: AtomicBool,
    writer: Mutex<Option<BackgroundWriter>>,
    prefetcher: Mutex<Option<Prefetcher>>,
    /// Read-ahead through io_uring, where the storage lends its file and the kernel allows
    /// it; else the prefetcher's threads read.
    ring_reads: Option<RingReads>,
    prefetch_depth: usize,
    /// Resident hot pages by page id (only without swizzling).
    translation: TranslationTable,
    /// Hot frames in access order (only with LRU replacement).
    lru: Mutex<LruList>,
    /// Page ids in access order (only for tracing policies).
    trace: Mutex<Vec<u64>>,
    /// The write-ahead log (`None`: the log-free mode).
    log: Option<Arc<crate::wal::Log>>,
    policy: PhantomData<P>,
}

impl<P: Policy> BufferManager<P> {
    /// Sets up the pool over `storage`, whose pages `1..page_count` exist (`free_pages` of them
    /// unused), for pages of the given kinds.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        config: &BufferConfig,
        kinds: &[PageKind],
        page_count: u64,
        free_pages: Vec<u64>,
        log: Option<Arc<crate::wal::Log>>,
    ) -> Result<Arc<BufferManager<P>>> {
        let pool = Pool::new(
            config.frames,
            config.page_size,
            config.prefault,
            config.pool_file.as_deref(),
        )
        .map_err(|e| Error::io("allocating the buffer pool", e))?;
        let mut kinds_by_type = [None; PageType::COUNT];
        for &kind in kinds {
            kinds_by_type[kind.page_type as usize] = Some(kind);
        }
        let frames = config.frames as usize;
        let eviction_batch = (frames / 64).clamp(1, 64);
        // LRU picks its victims itself: the cooling stage only stages their eviction.
        let cooling_fraction = if P::LEAN_EVICTION {
            config.cooling_fraction
        } else {
            0.0
        };
        let cooling_target = ((frames as f64 * cooling_fraction) as usize)
            .max(eviction_batch * 2)
            .min(frames / 2);
        // Prefetched pages wait in the cooling stage: more than half of it would evict them
        // before the scan arrives.
        let prefetch_depth = if P::EVICTS {
            config.prefetch_depth.min(cooling_target / 2)
        } else {
            0
        };
        let ring_reads = (prefetch_depth > 0)
            .then(|| storage.file_for_batched_reads())
            .flatten()
            .and_then(RingReads::new);
        let manager = Arc::new(BufferManager {
            pool,
            storage,
            epochs: Epochs::new(),
            cooling: Mutex::new(CoolingStage::default()),
            cooling_refill: Mutex::new(()),
            free_frames: Mutex::new(Vec::new()),
            deleted_while_writing: Mutex::new(Vec::new()),
            fresh: AtomicU32::new(0),
            page_ids: Mutex::new(PageIds::new(page_count, free_pages, log.is_some())),
            blob_ids: blob::BlobIds::new(config.generation),
            kinds: kinds_by_type,
            cooling_target,
            writes_finished: Event::default(),
            eviction_batch,
            closed: AtomicBool::new(false),
            writer: Mutex::new(None),
            prefetcher: Mutex::new(None),
            ring_reads,
            prefetch_depth,
            translation: if P::SWIZZLING {
                TranslationTable::unused()
            } else {
                TranslationTable::new()
            },
            lru: Mutex::new(LruList::new(if P::LEAN_EVICTION {
                0
            } else {
                config.frames
            })),
            trace: Mutex::new(Vec::new()),
            log,
            policy: PhantomData,
        });
        if config.background_writer && P::EVICTS {
            let writer = BackgroundWriter::start(&manager)
                .map_err(|e| Error::io("starting the background writer", e))?;
            *manager.writer.lock() = Some(writer);
        }
        if manager.prefetch_depth > 0 && manager.ring_reads.is_none() {
            let prefetcher = Prefetcher::start(&manager, manager.prefetch_depth)
                .map_err(|e| Error::io("starting the prefetch threads", e))?;
            *manager.prefetcher.lock() = Some(prefetcher);
        }
        Ok(manager)
    }

    pub(crate) fn page_size(&self) -> usize {
        self.pool.page_size()
    }

    pub(crate) fn frame_count(&self) -> u32 {
        self.pool.frame_count()
    }

    pub(crate) fn frame(&self, id: FrameId) -> &Frame {
        self.pool.frame(id)
    }

    pub(crate) fn page(&self, id: FrameId) -> PageView<'_> {
        self.pool.page(id)
    }

    /// Starts loading frame `id`'s latch and the first `len` bytes of its page into the
    /// cache, for a reader that will come back to it after other work.
    #[inline]
    pub(crate) fn load_into_cache(&self, id: FrameId, len: usize) {
        self.pool.load_into_cache(id, len);
    }

    pub(crate) fn page_mut<'a>(
        &'a self,
        id: FrameId,
        guard: &'a mut ExclusiveGuard<'_>,
    ) -> PageMut<'a> {
        self.pool.page_mut(id, guard)
    }

    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub(crate) fn io_mode(&self) -> IoMode {
        self.storage.mode()
    }

    /// Sums the per-thread counters.
    pub(crate) fn counters(&self) -> [u64; COUNTER_COUNT] {
        self.epochs.counter_totals()
    }

    pub(crate) fn count(&self, counter: Counter, amount: u64) {
        self.epochs.local_slot().count(counter, amount);
    }

    /// Frames holding a page (hot or cooling).
    pub(crate) fn frames_in_use(&self) -> usize {
        let touched = self.fresh.load(Ordering::Acquire);
        (0..touched)
            .filter(|&id| self.frame(id).state() != FrameState::Free)
            .count()
    }

    /// Stops the background writer and the prefetch threads and waits for them (also when
    /// an open fails halfway: no thread may outlive it).
    pub(crate) fn stop_threads(&self) {
        // Dropped outside their mutexes.
        let prefetcher = self.prefetcher.lock().take();
        let writer = self.writer.lock().take();
        drop((prefetcher, writer));
    }

    /// `Error::Closed` once [`Self::shut_down`] began: for answers that need no page access
    /// (which [`Self::run`] checks itself).
    pub(crate) fn check_open(&self) -> Result<()> {
        match self.closed.load(Ordering::Relaxed) {
            true => Err(Error::Closed),
            false => Ok(()),
        }
    }

    /// Stops new operations, waits for running ones, stops the background writer and writes
    /// every dirty page. Later operations return `Error::Closed`.
    pub(crate) fn shut_down(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        while !self.epochs.all_idle() {
            std::thread::yield_now();
        }
        self.stop_threads();
        if !P::EVICTS {
            return Ok(()); // the in-memory baselines keep nothing (they never reopen)
        }
        self.flush(FlushPages::All)
    }

    /// Returns once every operation that was running when it was called has ended (an epoch
    /// grace period), so that a flag set before the call is seen by every operation that
    /// checks it inside from then on. Outside any operation.
    pub(crate) fn wait_for_running_operations(&self) {
        debug_assert!(!self.epochs.is_pinned());
        let started = self.epochs.epoch_after_unlink();
        self.epochs.advance();
        while self.epochs.reclaim_bound() <= started {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests;
