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

mod cooling;
mod epoch;
mod lru;
mod page;
mod page_ids;
pub mod policy;
mod pool;
mod prefetch;
mod stats;
mod swip;
mod translation;
mod writer;

pub(crate) use page::{PageMut, PageView};
pub(crate) use page_ids::{load_free_list, save_free_list};
pub(crate) use pool::{Frame, FrameId, FrameState, FRAME_HEADER_AREA};
pub(crate) use stats::{Counter, COUNTER_COUNT};
pub(crate) use swip::{Swip, SwipTarget};

use crate::error::{Error, Result};
use crate::io::page::{self as page_format, PageType};
use crate::io::{AlignedBuf, IoMode, Storage};
use crate::sync::{Attempt, Event, ExclusiveGuard, LatchMode, Restart};
use cooling::{CoolingStage, InFlightRead};
use epoch::Epochs;
use lru::LruList;
use page_ids::PageIds;
use parking_lot::Mutex;
use policy::Policy;
use pool::{Pool, NO_PAGE};
use prefetch::Prefetcher;
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
}

/// Longest chain of swizzled pages followed when choosing a page to unswizzle; a bound so that
/// even a corrupt parent cycle cannot loop forever.
const MAX_DEPTH: usize = 64;
/// Failed validations before an operation switches to pessimistic latching.
const OPTIMISTIC_ATTEMPTS: u32 = 16;
/// Rounds of eviction a thread tries before declaring the pool exhausted.
const MAX_EVICTION_ROUNDS: u32 = 100_000;
/// Longest sleep of a thread waiting for another thread's page write (it is woken when a
/// write ends; the bound only limits what a missed wake-up could cost).
const WRITE_WAIT: Duration = Duration::from_millis(1);
/// Most I/O threads that serve prefetch reads (each has one read outstanding).
const MAX_PREFETCH_THREADS: usize = 16;
/// Longest run of consecutive pages one prefetch read covers.
const MAX_PREFETCH_RUN: usize = 32;

/// What one round of [`BufferManager::evict_batch`] achieved.
enum Eviction {
    /// Frames were freed or a dirty page written: try again at once.
    Progress,
    /// The pages to free are being written by other threads; `seen` is the count of finished
    /// writes taken before looking.
    WritesPending { seen: u64 },
    /// Nothing could be done now (contended latches, pages too young, nothing to cool).
    Stalled,
}

/// Consecutive pages registered for one prefetch read, with their in-flight entries.
pub(crate) type PrefetchRun = Vec<(u64, Arc<InFlightRead>)>;

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
    /// Frames `fresh..frames` have never been used (and cost no memory yet).
    fresh: AtomicU32,
    page_ids: Mutex<PageIds>,
    kinds: [Option<PageKind>; PageType::COUNT],
    cooling_target: usize,
    /// Notified whenever a page write ends (its frame's `writing` claim is released).
    writes_finished: Event,
    eviction_batch: usize,
    closed: AtomicBool,
    writer: Mutex<Option<BackgroundWriter>>,
    prefetcher: Mutex<Option<Prefetcher>>,
    prefetch_depth: usize,
    /// Resident hot pages by page id (only without swizzling).
    translation: TranslationTable,
    /// Hot frames in access order (only with LRU replacement).
    lru: Mutex<LruList>,
    /// Page ids in access order (only for tracing policies).
    trace: Mutex<Vec<u64>>,
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
        let manager = Arc::new(BufferManager {
            pool,
            storage,
            epochs: Epochs::new(),
            cooling: Mutex::new(CoolingStage::default()),
            cooling_refill: Mutex::new(()),
            free_frames: Mutex::new(Vec::new()),
            fresh: AtomicU32::new(0),
            page_ids: Mutex::new(PageIds::new(page_count, free_pages)),
            kinds: kinds_by_type,
            cooling_target,
            writes_finished: Event::default(),
            eviction_batch,
            closed: AtomicBool::new(false),
            writer: Mutex::new(None),
            prefetcher: Mutex::new(None),
            // Prefetched pages wait in the cooling stage: more than half of it would evict
            // them before the scan arrives.
            prefetch_depth: if P::EVICTS {
                config.prefetch_depth.min(cooling_target / 2)
            } else {
                0
            },
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
            policy: PhantomData,
        });
        if config.background_writer && P::EVICTS {
            *manager.writer.lock() = Some(BackgroundWriter::start(&manager));
        }
        if manager.prefetch_depth > 0 {
            let threads = manager.prefetch_depth.min(MAX_PREFETCH_THREADS);
            *manager.prefetcher.lock() = Some(Prefetcher::start(&manager, threads));
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

    pub(crate) fn page_mut<'a>(
        &'a self,
        id: FrameId,
        guard: &'a ExclusiveGuard<'a>,
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

    /// Where the child reference `word` (read from a page) leads: a resident frame, or a page
    /// that must be brought in (`Restart::Swizzle`). `None` for a malformed word. A frame found
    /// through the translation table may be reused at any moment: confirm it with
    /// [`Self::holds`] once its version or latch is taken.
    #[inline]
    pub(crate) fn child(&self, word: u64) -> Option<SwipTarget> {
        let frames = self.frame_count();
        if !P::EVICTS {
            return Swip::decode_swizzled(word, frames).map(SwipTarget::Frame);
        }
        let target = Swip::decode(word, frames)?;
        if P::SWIZZLING {
            return Some(target);
        }
        match target {
            SwipTarget::Page(page_id) => Some(
                self.translation
                    .lookup(page_id)
                    .map_or(target, SwipTarget::Frame),
            ),
            SwipTarget::Frame(_) => None,
        }
    }

    /// Whether `frame`, reached through [`Self::child`]`(word)`, still holds that page as a
    /// hot page. Always true with swizzling: a swizzled swip is changed only under its page's
    /// latch. Without, the frame may have gone cooling or been reused since the table lookup;
    /// both happen under the frame's exclusive latch, so a later validation of the version
    /// read before this check (or the latch held during it) makes the answer stick.
    #[inline]
    pub(crate) fn holds(&self, frame: FrameId, word: u64) -> bool {
        if P::SWIZZLING {
            return true;
        }
        let header = self.frame(frame);
        header.state() == FrameState::Hot && Swip::unswizzled_word(header.page_id()) == word
    }

    /// The reference a parent stores for the resident page in `frame`.
    #[inline]
    pub(crate) fn reference(&self, frame: FrameId) -> u64 {
        if P::SWIZZLING {
            Swip::swizzled_word(frame)
        } else {
            Swip::unswizzled_word(self.frame(frame).page_id())
        }
    }

    /// Records an access to the page in `frame` (LRU replacement and tracing only; free
    /// otherwise).
    #[inline]
    pub(crate) fn touch(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().touch(frame);
        }
        if P::TRACE {
            self.trace.lock().push(self.frame(frame).page_id());
        }
    }

    /// Links a page that just became hot into the LRU list (LRU replacement only).
    fn made_hot(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().touch(frame);
        }
    }

    /// The page accesses recorded since the last call (tracing policies only).
    #[cfg(feature = "ablations")]
    pub(crate) fn take_trace(&self) -> Vec<u64> {
        std::mem::take(&mut *self.trace.lock())
    }

    /// Runs `attempt` until it succeeds, inside an epoch each time, resolving its restarts:
    /// bringing pages in, freeing frames, and after repeated conflicts switching it to
    /// pessimistic latching. This is the only loop in which buffer-managed operations run.
    pub(crate) fn run<T>(&self, mut attempt: impl FnMut(LatchMode) -> Attempt<T>) -> Result<T> {
        let mut conflicts = 0u32;
        loop {
            let outcome = {
                let guard = self.epochs.pin();
                if self.closed.load(Ordering::Relaxed) {
                    return Err(Error::Closed);
                }
                let mode = if P::OPTIMISTIC && conflicts < OPTIMISTIC_ATTEMPTS {
                    LatchMode::Optimistic
                } else {
                    LatchMode::Pessimistic
                };
                let outcome = attempt(mode);
                if matches!(outcome, Err(Restart::Conflict)) {
                    guard.slot().count(Counter::Restarts, 1);
                }
                outcome
            };
            match outcome {
                Ok(value) => return Ok(value),
                Err(Restart::Conflict) => {
                    conflicts += 1;
                    if conflicts == OPTIMISTIC_ATTEMPTS {
                        self.count(Counter::PessimisticFallbacks, 1);
                    }
                    if conflicts.is_multiple_of(4) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Err(Restart::NeedFrames) => {
                    let frame = self.obtain_frame()?;
                    self.free_frames.lock().push(frame);
                }
                Err(Restart::Swizzle {
                    frame,
                    version,
                    offset,
                    page_id,
                }) => self.resolve_swip(frame, version, offset as usize, page_id)?,
                Err(Restart::Corrupt { page_id, reason }) => {
                    return Err(Error::corruption(page_id, reason))
                }
            }
        }
    }

    /// A new, empty page of `page_type` whose swip will live in frame `parent` (`None` for a
    /// root), exclusively latched, hot and dirty. Inside `run` only.
    pub(crate) fn allocate_page(
        &self,
        page_type: PageType,
        parent: Option<FrameId>,
    ) -> Attempt<(FrameId, ExclusiveGuard<'_>)> {
        debug_assert!(self.epochs.is_pinned());
        let frame = self
            .epochs
            .reuse_retired()
            .or_else(|| self.pop_free_frame())
            .ok_or(Restart::NeedFrames)?;
        let page_id = self.page_ids.lock().allocate();
        if !self.cooling.lock().admit(page_id) {
            // Only a damaged free-page list hands out a page in use; the id stays allocated.
            self.free_frames.lock().push(frame);
            return Err(Restart::Corrupt {
                page_id,
                reason: "the free-page list holds a page in use",
            });
        }
        let header = self.frame(frame);
        // SAFETY: the frame came from the free list or this thread's retired cache and is
        // reachable from nowhere until the caller links it into a parent. Threads that probe
        // frames by number (random cooling, the writer) read only its state, which is `Free`.
        let bytes = unsafe { self.pool.page_bytes_unpublished(frame) };
        bytes.fill(0);
        page_format::init_header(bytes, page_type, page_id);
        // Not `try_lock`: random cooling and the background writer latch frames by number
        // and may briefly hold a free one while they see it is not theirs to touch.
        let guard = header.latch.lock_exclusive();
        header.set_page_id(&guard, page_id);
        header.set_parent(parent);
        header.set_dirty(true);
        header.set_state(FrameState::Hot);
        if !P::SWIZZLING && parent.is_some() {
            self.translation.shard(page_id).insert(page_id, frame);
        }
        self.made_hot(frame);
        Ok((frame, guard))
    }

    /// Deletes the page in `frame` (removed from its parent by the caller): its page id becomes
    /// free and the frame is reused once no reader can see it any more.
    pub(crate) fn delete_page(&self, frame: FrameId, guard: ExclusiveGuard<'_>) {
        let header = self.frame(frame);
        debug_assert_eq!(header.state(), FrameState::Hot);
        let page_id = header.page_id();
        self.cooling.lock().release(page_id);
        if !P::SWIZZLING {
            self.translation.shard(page_id).remove(&page_id);
        }
        if !P::LEAN_EVICTION {
            self.lru.lock().remove(frame);
        }
        header.set_page_id(&guard, NO_PAGE);
        header.set_state(FrameState::Free);
        header.set_dirty(false);
        header.set_parent(None);
        drop(guard);
        self.page_ids.lock().free(page_id);
        self.epochs.retire(frame);
    }

    /// Whether `header`'s frame still holds root `page_id` hot (caller holds its latch).
    fn holds_root(header: &Frame, page_id: u64) -> bool {
        header.state() == FrameState::Hot
            && header.page_id() == page_id
            && header.parent().is_none()
    }

    /// Marks the hot root `page_id` in `frame` as used by no one: replacement may now cool it
    /// once its children are cooled. Its tree calls [`Self::reclaim_root`] before use.
    pub(crate) fn release_root(&self, frame: FrameId, page_id: u64) {
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        if Self::holds_root(header, page_id) {
            header.set_unused_root(&guard, true);
        }
    }

    /// The frame of root `page_id` for a tree about to be used again: `frame`, where it was
    /// released, if it is still hot there, or wherever [`Self::load_root`] brings it.
    pub(crate) fn reclaim_root(
        &self,
        frame: FrameId,
        page_id: u64,
        accept: PageCheck,
    ) -> Result<FrameId> {
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        if Self::holds_root(header, page_id) {
            header.set_unused_root(&guard, false);
            return Ok(frame);
        }
        drop(guard);
        self.load_root(page_id, accept)
    }

    /// Brings in the page `page_id` for a tree root: hot, no parent, never unswizzled. Each
    /// root is loaded once per open database (the caller keeps it), so no other copy exists.
    /// `accept` checks that the page can be a root.
    pub(crate) fn load_root(&self, page_id: u64, accept: PageCheck) -> Result<FrameId> {
        for _ in 0..MAX_EVICTION_ROUNDS {
            let mut stage = self.cooling.lock();
            if let Some(frame) = stage.lookup(page_id) {
                accept(self.page(frame)).map_err(|reason| Error::corruption(page_id, reason))?;
                stage.remove(&self.pool, frame, page_id);
                drop(stage);
                let header = self.frame(frame);
                header.set_parent(None);
                header.set_state(FrameState::Hot);
                self.made_hot(frame);
                return Ok(frame);
            }
            if let Some(read) = stage.in_flight(page_id) {
                drop(stage);
                read.wait();
                continue;
            }
            if stage.is_resident(page_id) {
                return Err(Error::corruption(
                    page_id,
                    "tree root referenced from two places",
                ));
            }
            let read = stage.start_read(page_id);
            drop(stage);
            self.complete_read(page_id, &read)?;
        }
        // Read again and again, and evicted each time before it could be taken.
        Err(Error::PoolExhausted {
            frames: self.frame_count() as usize,
        })
    }

    /// Handles `Restart::Swizzle`: swizzles the swip at `offset` in frame `parent` if that
    /// frame still shows `version`, taking the page from the cooling stage, waiting for a read
    /// in flight, or reading it. If anything moved meanwhile, the restarted operation simply
    /// finds the new state.
    ///
    /// A read is only started while the parent is latched and its swip still unswizzled: a
    /// page has one swip, so it is then certainly not hot, and no second copy can be loaded.
    fn resolve_swip(
        &self,
        parent: FrameId,
        version: u64,
        offset: usize,
        page_id: u64,
    ) -> Result<()> {
        let parent_header = self.frame(parent);
        let Ok(guard) = parent_header.latch.try_upgrade(version) else {
            return Ok(());
        };
        if parent_header.state() != FrameState::Hot {
            return Ok(());
        }
        let Some(swip) = self.page(parent).swip(offset) else {
            return Ok(());
        };
        if swip.word() != Swip::unswizzled_word(page_id) {
            return Ok(());
        }
        // Without swizzling the swip stays as it is; the translation table says what is hot.
        let mut shard = (!P::SWIZZLING).then(|| self.translation.shard(page_id));
        if shard
            .as_ref()
            .is_some_and(|shard| shard.contains_key(&page_id))
        {
            return Ok(());
        }
        let mut stage = self.cooling.lock();
        if let Some(frame) = stage.lookup(page_id) {
            self.check_child(parent, offset, frame)
                .map_err(|reason| Error::corruption(page_id, reason))?;
            stage.remove(&self.pool, frame, page_id);
            drop(stage);
            let header = self.frame(frame);
            if header.cooling_epoch.load(Ordering::Relaxed) != 0 {
                self.count(Counter::CoolingHits, 1);
            }
            header.set_parent(Some(parent));
            header.set_state(FrameState::Hot);
            match shard.as_mut() {
                Some(shard) => {
                    shard.insert(page_id, frame);
                }
                None => self
                    .page_mut(parent, &guard)
                    .set_swip(offset, Swip::swizzled(frame)),
            }
            self.made_hot(frame);
            return Ok(());
        }
        if let Some(read) = stage.in_flight(page_id) {
            drop((stage, shard, guard));
            self.count(Counter::ReadWaits, 1);
            read.wait();
            return Ok(());
        }
        if stage.is_resident(page_id) {
            // Hot under another swip: two references to one page.
            return Err(Error::corruption(
                page_id,
                "page referenced from two places",
            ));
        }
        let read = stage.start_read(page_id);
        drop((stage, shard, guard));
        self.complete_read(page_id, &read)
    }

    /// Performs the read registered as `read`: loads the page into the cooling stage (where
    /// the restarted operation will swizzle it), then releases the threads waiting on it.
    fn complete_read(&self, page_id: u64, read: &InFlightRead) -> Result<()> {
        debug_assert!(!self.epochs.is_pinned(), "no I/O inside an epoch");
        let loaded = self.read_page(page_id);
        self.end_read(page_id, read, loaded.as_ref().ok().copied());
        loaded.map(drop)
    }

    /// Ends the registered read of `page_id`: the page enters the cooling stage if it was
    /// loaded into `frame`, and the threads waiting on `read` go on.
    fn end_read(&self, page_id: u64, read: &InFlightRead, frame: Option<FrameId>) {
        let mut stage = self.cooling.lock();
        stage.end_read(page_id);
        match frame {
            Some(frame) if stage.admit(page_id) => stage.push_newest(&self.pool, frame, page_id),
            Some(frame) => {
                // Allocated meanwhile through a damaged free-page list: this copy goes.
                let header = self.frame(frame);
                let guard = header.latch.lock_exclusive();
                header.set_page_id(&guard, NO_PAGE);
                header.set_state(FrameState::Free);
                drop(guard);
                self.free_frames.lock().push(frame);
            }
            None => {}
        }
        drop(stage);
        read.finish();
    }

    /// Reads page `page_id` into a free frame, verifies it and returns the frame, latched by
    /// no one and in no table yet.
    fn read_page(&self, page_id: u64) -> Result<FrameId> {
        if !self.page_ids.lock().is_allocated(page_id) {
            return Err(Error::corruption(
                page_id,
                "referenced page lies beyond the end of the page file",
            ));
        }
        let frame = self.obtain_frame()?;
        // SAFETY: the frame was just taken from the free list and is published (pushed into
        // the cooling stage) only after this slice is dead.
        let bytes = unsafe { self.pool.page_bytes_unpublished(frame) };
        let offset = page_id * self.page_size() as u64;
        let checked = match self.storage.read_at(bytes, offset) {
            Ok(()) => self.check_image(bytes, page_id),
            Err(error) => Err(Error::io("reading a page", error)),
        };
        self.take_in(frame, page_id, checked)
    }

    /// Checks an image just read for `page_id`: checksum, id and type, then its contents.
    fn check_image(&self, image: &[u8], page_id: u64) -> Result<()> {
        let page_type = page_format::verify(image, page_id)
            .map_err(|reason| Error::corruption(page_id, reason))?;
        match self.kinds[page_type as usize].and_then(|kind| kind.check) {
            Some(check) => check(PageView::from_slice(image))
                .map_err(|reason| Error::corruption(page_id, reason)),
            None => Ok(()),
        }
    }

    /// Checks that the (cooling) page in `child` may be swizzled at `offset` in `parent`.
    fn check_child(&self, parent: FrameId, offset: usize, child: FrameId) -> Result<(), String> {
        let parent_page = self.page(parent);
        let check = page_format::page_type(parent_page.all())
            .and_then(|page_type| self.kinds[page_type as usize])
            .and_then(|kind| kind.check_child);
        match check {
            Some(check) => check(parent_page, offset, self.page(child)),
            None => Ok(()),
        }
    }

    /// Makes `frame`, just filled with page `page_id` whose check ended as `checked`, a
    /// cooling page outside every table; on failure gives the frame back.
    fn take_in<T>(&self, frame: FrameId, page_id: u64, checked: Result<T>) -> Result<FrameId> {
        if let Err(error) = checked {
            self.free_frames.lock().push(frame);
            return Err(error);
        }
        self.count(Counter::PageReads, 1);
        let header = self.frame(frame);
        let guard = header.latch.lock_exclusive();
        header.set_page_id(&guard, page_id);
        header.set_parent(None);
        header.set_dirty(false);
        header.cooling_epoch.store(0, Ordering::Relaxed);
        header.set_state(FrameState::Cooling);
        Ok(frame)
    }

    /// Most leaves a scan should request ahead (0 when prefetching is off).
    pub(crate) fn prefetch_depth(&self) -> usize {
        self.prefetch_depth
    }

    /// Starts asynchronous reads of the pages `children` (swip offset, page id) of the hot
    /// node in `parent`, for those still unswizzled there and neither cooling nor being read.
    /// Outside any epoch. Best effort: if the parent is latched exclusively, nothing happens.
    ///
    /// The parent's shared latch is what makes this safe: a page is only swizzled under its
    /// parent's exclusive latch, so while the shared one is held an unswizzled swip means
    /// that the page is not hot, and registering the read cannot create a second copy.
    pub(crate) fn prefetch(&self, parent: FrameId, children: &[(usize, u64)]) {
        if self.prefetch_depth == 0 {
            return;
        }
        let header = self.frame(parent);
        let Some(shared) = header.latch.try_lock_shared() else {
            return;
        };
        if header.state() != FrameState::Hot {
            return;
        }
        let mut missing = Vec::with_capacity(children.len());
        for &(offset, page_id) in children {
            // A page id read from a page: one beyond the file is left for the scan to meet
            // (as corruption), not read ahead.
            if !self.page_ids.lock().is_allocated(page_id) {
                continue;
            }
            let unswizzled = self
                .page(parent)
                .swip(offset)
                .is_some_and(|swip| swip.word() == Swip::unswizzled_word(page_id));
            if !unswizzled {
                continue;
            }
            let shard = (!P::SWIZZLING).then(|| self.translation.shard(page_id));
            if shard
                .as_ref()
                .is_some_and(|shard| shard.contains_key(&page_id))
            {
                continue;
            }
            let stage = self.cooling.lock();
            if !stage.is_resident(page_id) && stage.in_flight(page_id).is_none() {
                missing.push(page_id);
            }
        }
        // Wait until half the window is used up, so that requests come in runs of
        // consecutive pages that one read can serve, not one page per leaf.
        if missing.is_empty() || missing.len() * 2 < children.len() {
            return;
        }
        let mut runs: Vec<PrefetchRun> = Vec::new();
        {
            // Swizzling needs the parent's exclusive latch, so none of `missing` became hot;
            // another scan may have requested some meanwhile.
            let mut stage = self.cooling.lock();
            for page_id in missing {
                if stage.is_resident(page_id) || stage.in_flight(page_id).is_some() {
                    continue;
                }
                let read = stage.start_read(page_id);
                match runs.last_mut() {
                    Some(run)
                        if run.len() < MAX_PREFETCH_RUN
                            && run.last().is_some_and(|&(last, _)| last + 1 == page_id) =>
                    {
                        run.push((page_id, read))
                    }
                    _ => runs.push(vec![(page_id, read)]),
                }
            }
        }
        drop(shared);
        match &*self.prefetcher.lock() {
            Some(prefetcher) => prefetcher.submit(runs),
            // Shut down meanwhile: registered reads must still end.
            None => {
                let mut buffer = AlignedBuf::new(0);
                for run in runs {
                    self.complete_prefetch(&run, &mut buffer);
                }
            }
        }
    }

    /// A prefetch thread's half of [`prefetch`](Self::prefetch): reads a run of consecutive
    /// pages with one I/O into `buffer` (grown as needed) and moves each verified page into a
    /// frame of the cooling stage. Pages that fail are left for the scan to read (and meet the
    /// error) itself.
    fn complete_prefetch(&self, run: &[(u64, Arc<InFlightRead>)], buffer: &mut AlignedBuf) {
        let Some(&(first, _)) = run.first() else {
            return;
        };
        let page_size = self.page_size();
        if buffer.len() < run.len() * page_size {
            *buffer = AlignedBuf::new(MAX_PREFETCH_RUN * page_size);
        }
        let bytes = &mut buffer[..run.len() * page_size];
        let read = self.storage.read_at(bytes, first * page_size as u64);
        let mut loaded = 0;
        for (index, (page_id, in_flight)) in run.iter().enumerate() {
            let page = &bytes[index * page_size..(index + 1) * page_size];
            let frame = match &read {
                Ok(()) => self.obtain_frame().ok().and_then(|frame| {
                    // SAFETY: the frame was just taken from the free list and is published
                    // (pushed into the cooling stage by `end_read`) after this slice is dead.
                    let target = unsafe { self.pool.page_bytes_unpublished(frame) };
                    target.copy_from_slice(page);
                    let checked = self.check_image(target, *page_id);
                    self.take_in(frame, *page_id, checked).ok()
                }),
                Err(_) => None,
            };
            loaded += u64::from(frame.is_some());
            self.end_read(*page_id, in_flight, frame);
        }
        self.count(Counter::PrefetchReads, loaded);
    }

    /// Hands the page in `frame`, which a scan brought in and has finished reading, straight
    /// back to the cooling stage (the scan's hint that it will not be read again soon), so
    /// that scans replace cooling pages rather than the hot working set. Only once the pool
    /// is full; outside any epoch; skipped if a latch is contended or the page has swizzled
    /// children.
    pub(crate) fn cool_scanned(&self, frame: FrameId) {
        // While never-used frames remain, nothing is replaced and a scan displaces nothing:
        // its pages stay hot like any other (a warm-up scan warms up).
        if self.fresh.load(Ordering::Acquire) < self.frame_count() {
            return;
        }
        let cooled = if P::SWIZZLING {
            self.try_unswizzle(frame, false)
        } else {
            self.try_untranslate(frame)
        };
        if cooled {
            self.count(Counter::ScanCooled, 1);
        }
    }

    fn pop_free_frame(&self) -> Option<FrameId> {
        if let Some(frame) = self.free_frames.lock().pop() {
            return Some(frame);
        }
        self.fresh
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |fresh| {
                (fresh < self.frame_count()).then_some(fresh + 1)
            })
            .ok()
    }

    /// A free frame for this thread, evicting as needed. Outside any epoch, no latches held.
    fn obtain_frame(&self) -> Result<FrameId> {
        debug_assert!(
            !self.epochs.is_pinned(),
            "eviction inside an epoch could wait on itself"
        );
        for round in 0..MAX_EVICTION_ROUNDS {
            if let Some(frame) = self.pop_free_frame() {
                return Ok(frame);
            }
            if !P::EVICTS {
                break;
            }
            match self.evict_batch()? {
                Eviction::Progress => {}
                // The frames to free are being written by others: sleep until a write ends.
                Eviction::WritesPending { seen } => {
                    self.writes_finished.wait_past(seen, WRITE_WAIT);
                }
                Eviction::Stalled if round > 8 => std::thread::yield_now(),
                Eviction::Stalled => {}
            }
        }
        Err(Error::PoolExhausted {
            frames: self.frame_count() as usize,
        })
    }

    /// One round of replacement: reclaim retired frames, keep the cooling stage filled, and
    /// free frames from its old end (writing dirty ones first).
    fn evict_batch(&self) -> Result<Eviction> {
        let bound = self.epochs.reclaim_bound();
        let reclaimed = self.epochs.reclaim_orphans(bound);
        if !reclaimed.is_empty() {
            self.free_frames.lock().extend(reclaimed);
            return Ok(Eviction::Progress);
        }
        // One refiller at a time, a few batches per call: evictors that each cooled the whole
        // deficit they saw could together cool up to one target per thread (16 threads: more
        // than the pool) when the pool first fills; TPC-C on 16 cores then fell to 0 tps.
        if let Some(_refilling) = self.cooling_refill.try_lock() {
            let cooling = self.cooling.lock().len();
            if cooling < self.cooling_target {
                self.cool_pages((self.cooling_target - cooling).min(self.eviction_batch * 4));
            }
        }
        let mut freed = Vec::with_capacity(self.eviction_batch);
        let mut dirty = Vec::new();
        let mut too_young = false;
        {
            let mut stage = self.cooling.lock();
            let bound = self.epochs.reclaim_bound();
            for frame in stage.oldest_frames(&self.pool, self.eviction_batch * 4) {
                let header = self.frame(frame);
                if header.is_dirty() {
                    dirty.push(frame);
                    continue;
                }
                if header.cooling_epoch.load(Ordering::Relaxed) >= bound {
                    too_young = true;
                    continue;
                }
                let Some(guard) = header.latch.try_lock_exclusive() else {
                    continue;
                };
                if header.is_dirty() || header.is_writing() {
                    continue;
                }
                stage.remove(&self.pool, frame, header.page_id());
                stage.release(header.page_id());
                header.set_page_id(&guard, NO_PAGE);
                header.set_parent(None);
                header.set_state(FrameState::Free);
                freed.push(frame);
                if freed.len() == self.eviction_batch {
                    break;
                }
            }
        }
        if too_young && freed.is_empty() {
            self.epochs.advance();
        }
        if !dirty.is_empty() {
            if let Some(writer) = self.writer.lock().as_ref() {
                writer.wake();
            }
        }
        if !freed.is_empty() {
            self.count(Counter::Evictions, freed.len() as u64);
            self.free_frames.lock().extend(freed);
            return Ok(Eviction::Progress);
        }
        if dirty.is_empty() {
            return Ok(Eviction::Stalled);
        }
        // Write the oldest dirty pages nobody is writing yet (several evicting threads write
        // side by side); if others write them all, wait for those writes.
        let seen = self.writes_finished.count();
        let mut written = 0;
        for &frame in &dirty {
            if written == self.eviction_batch {
                break;
            }
            if self.write_back(frame, false)? {
                written += 1;
            }
        }
        Ok(if written > 0 {
            Eviction::Progress
        } else if dirty.iter().any(|&frame| self.frame(frame).is_writing()) {
            Eviction::WritesPending { seen }
        } else {
            Eviction::Stalled
        })
    }

    /// Moves up to `wanted` hot pages into the cooling stage: random ones, or with LRU
    /// replacement the least recently used.
    fn cool_pages(&self, wanted: usize) {
        let mut cooled = 0;
        if P::LEAN_EVICTION {
            let touched = self.fresh.load(Ordering::Acquire);
            if touched == 0 {
                return;
            }
            for _ in 0..wanted * 8 {
                if cooled == wanted {
                    break;
                }
                if self.try_unswizzle(fastrand::u32(..touched), true) {
                    cooled += 1;
                }
            }
        } else {
            let victims = self.lru.lock().oldest(wanted * 8);
            for victim in victims {
                if cooled == wanted {
                    break;
                }
                if self.try_unswizzle(victim, false) {
                    cooled += 1;
                }
            }
        }
    }

    /// Tries to move the page in frame `start` from hot to cooling, or, with
    /// `follow_children`, a swizzled descendant of it if it has one (children go first). Only
    /// non-blocking latch attempts: contended candidates are simply skipped.
    fn try_unswizzle(&self, start: FrameId, follow_children: bool) -> bool {
        if !P::SWIZZLING {
            return self.try_untranslate(start);
        }
        let mut candidate = start;
        for _ in 0..MAX_DEPTH {
            let header = self.frame(candidate);
            let Some(_shared) = header.latch.try_lock_shared() else {
                return false;
            };
            if header.state() != FrameState::Hot {
                return false;
            }
            match self.swizzled_child(candidate) {
                Some(_) if !follow_children => return false,
                Some(child) => candidate = child,
                None => break,
            }
        }
        let header = self.frame(candidate);
        let Some(parent) = header.parent() else {
            return self.try_cool_unused_root(candidate);
        };
        let parent_header = self.frame(parent);
        let Some(parent_guard) = parent_header.latch.try_lock_exclusive() else {
            return false;
        };
        if parent_header.state() != FrameState::Hot {
            return false;
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot
            || header.parent() != Some(parent)
            || self.swizzled_child(candidate).is_some()
        {
            return false;
        }
        let Some(offset) = self.find_child_swip(parent, candidate) else {
            debug_assert!(false, "frame {candidate} not found in its parent {parent}");
            return false;
        };
        let page_id = header.page_id();
        let mut stage = self.cooling.lock();
        header.set_state(FrameState::Cooling);
        self.page_mut(parent, &parent_guard)
            .set_swip(offset, Swip::unswizzled(page_id));
        header
            .cooling_epoch
            .store(self.epochs.epoch_after_unlink(), Ordering::Relaxed);
        stage.push_newest(&self.pool, candidate, page_id);
        drop(stage);
        drop(guard);
        self.cooled(candidate);
        true
    }

    /// `try_unswizzle` without swizzling: the hot page in `frame` leaves the translation
    /// table for the cooling stage. Its parent holds a page id either way and is not touched.
    fn try_untranslate(&self, frame: FrameId) -> bool {
        let header = self.frame(frame);
        if header.parent().is_none() {
            return self.try_cool_unused_root(frame);
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot || header.parent().is_none() {
            return false;
        }
        let page_id = header.page_id();
        let mut shard = self.translation.shard(page_id);
        let removed = shard.remove(&page_id);
        debug_assert_eq!(removed, Some(frame), "hot page {page_id} not translated");
        let mut stage = self.cooling.lock();
        header
            .cooling_epoch
            .store(self.epochs.current(), Ordering::Relaxed);
        header.set_state(FrameState::Cooling);
        stage.push_newest(&self.pool, frame, page_id);
        drop((stage, shard, guard));
        self.cooled(frame);
        true
    }

    /// Moves the root in `frame` to the cooling stage if no handle uses its tree and none of
    /// its children is hot. Roots in use stay hot. No swip refers to a root (its tree finds
    /// it again by page id, see [`Self::reclaim_root`]), so no parent changes.
    fn try_cool_unused_root(&self, frame: FrameId) -> bool {
        let header = self.frame(frame);
        if !header.is_unused_root() {
            return false;
        }
        let Some(guard) = header.latch.try_lock_exclusive() else {
            return false;
        };
        if header.state() != FrameState::Hot
            || !header.is_unused_root()
            || header.parent().is_some()
            || self.swizzled_child(frame).is_some()
        {
            return false;
        }
        let page_id = header.page_id();
        let mut stage = self.cooling.lock();
        header
            .cooling_epoch
            .store(self.epochs.current(), Ordering::Relaxed);
        header.set_unused_root(&guard, false);
        header.set_state(FrameState::Cooling);
        stage.push_newest(&self.pool, frame, page_id);
        drop((stage, guard));
        self.cooled(frame);
        true
    }

    /// Bookkeeping after the page in `frame` went from hot to cooling.
    fn cooled(&self, frame: FrameId) {
        if !P::LEAN_EVICTION {
            self.lru.lock().remove(frame);
        }
        self.count(Counter::Unswizzles, 1);
    }

    fn child_iterator(&self, page: PageView<'_>) -> Option<ChildIterator> {
        let page_type = page_format::page_type(page.all())?;
        self.kinds[page_type as usize]?.children
    }

    /// Some swizzled child of the page in `frame` (caller holds a latch on it).
    fn swizzled_child(&self, frame: FrameId) -> Option<FrameId> {
        let page = self.page(frame);
        let iterate = self.child_iterator(page)?;
        let mut found = None;
        iterate(page, &mut |offset| {
            if let Some(SwipTarget::Frame(child)) =
                page.swip(offset).and_then(|s| s.target(self.frame_count()))
            {
                found = Some(child);
            }
            found.is_none()
        });
        found
    }

    /// Offset of the swip in `parent` that points to frame `child`.
    fn find_child_swip(&self, parent: FrameId, child: FrameId) -> Option<usize> {
        let page = self.page(parent);
        let iterate = self.child_iterator(page)?;
        let wanted = Swip::swizzled_word(child);
        let mut found = None;
        iterate(page, &mut |offset| {
            if page.swip(offset).is_some_and(|s| s.word() == wanted) {
                found = Some(offset);
            }
            found.is_none()
        });
        found
    }

    /// Writes the page in `frame` if it is dirty. A consistent copy is taken under a shared
    /// latch (`wait` decides whether to wait for it); swizzled swips in the copy are replaced
    /// by page ids; the dirty flag is cleared only if nothing changed since the copy.
    pub(crate) fn write_back(&self, frame: FrameId, wait: bool) -> Result<bool> {
        let header = self.frame(frame);
        loop {
            let seen = self.writes_finished.count();
            if header.try_start_writing() {
                break;
            }
            if !wait {
                return Ok(false);
            }
            self.writes_finished.wait_past(seen, WRITE_WAIT);
        }
        let written = self.write_back_claimed(frame, wait);
        header.finish_writing();
        self.writes_finished.notify();
        written
    }

    /// `write_back` for a caller that holds the frame's `writing` claim.
    fn write_back_claimed(&self, frame: FrameId, wait: bool) -> Result<bool> {
        let header = self.frame(frame);
        let shared = if wait {
            header.latch.lock_shared()
        } else {
            match header.latch.try_lock_shared() {
                Some(shared) => shared,
                None => return Ok(false),
            }
        };
        if header.state() == FrameState::Free || !header.is_dirty() {
            return Ok(false);
        }
        let page_id = header.page_id();
        let version = shared.version();
        let mut image = AlignedBuf::new(self.page_size());
        image.copy_from_slice(self.page(frame).all());
        self.unswizzle_image(&mut image);
        drop(shared);
        page_format::seal(&mut image, page_id);
        self.storage
            .write_at(&image, page_id * self.page_size() as u64)
            .map_err(|e| Error::io("writing a page", e))?;
        self.count(Counter::PageWrites, 1);
        if let Some(shared) = header.latch.try_lock_shared() {
            if header.page_id() == page_id && shared.version() == version {
                header.set_dirty(false);
            }
        }
        Ok(true)
    }

    /// Replaces every swizzled swip in a page image by the page id of its target, so that no
    /// frame index ever reaches the disk. The image's source frame is latched by the caller,
    /// which keeps its children in place.
    fn unswizzle_image(&self, image: &mut [u8]) {
        let Some(iterate) = self.child_iterator(PageView::from_slice(image)) else {
            return;
        };
        let mut replacements = Vec::new();
        iterate(PageView::from_slice(image), &mut |offset| {
            let word = PageView::from_slice(image).u64(offset);
            if let Some(SwipTarget::Frame(child)) = Swip::decode(word, self.frame_count()) {
                replacements.push((offset, self.frame(child).page_id()));
            }
            true
        });
        let mut page = PageMut::from_slice(image);
        for (offset, page_id) in replacements {
            page.set_u64(offset, Swip::unswizzled_word(page_id));
        }
    }

    /// Writes dirty cooling pages from the old half of the FIFO (the background writer's
    /// work). Returns how many were written.
    ///
    /// The young half is left alone: a page unswizzled moments ago is the one most likely to
    /// be touched and dirtied again (a hot page the random choice happened to hit), and
    /// writing it then is wasted. Eviction takes frames from the old end only, so the old
    /// half is all the writer has to keep clean.
    pub(crate) fn write_cooling_pages(&self, limit: usize) -> usize {
        let candidates = {
            let stage = self.cooling.lock();
            stage.oldest_frames(&self.pool, stage.len().div_ceil(2))
        };
        let mut written = 0;
        for frame in candidates {
            if written == limit {
                break;
            }
            if self.frame(frame).is_dirty() && matches!(self.write_back(frame, false), Ok(true)) {
                written += 1;
            }
        }
        self.count(Counter::BackgroundWrites, written as u64);
        written
    }

    /// Writes every dirty page and syncs the storage.
    pub(crate) fn flush(&self) -> Result<()> {
        let touched = self.fresh.load(Ordering::Acquire);
        for frame in 0..touched {
            if self.frame(frame).is_dirty() {
                self.write_back(frame, true)?;
            }
        }
        self.storage
            .sync()
            .map_err(|e| Error::io("syncing the page file", e))
    }

    /// Page count (allocation high-water mark) and a copy of the free page list.
    pub(crate) fn page_allocation(&self) -> (u64, Vec<u64>) {
        let ids = self.page_ids.lock();
        (ids.page_count(), ids.free_pages().to_vec())
    }

    /// Stops the background writer and the prefetch threads and waits for them (also when
    /// an open fails halfway: no thread may outlive it).
    pub(crate) fn stop_threads(&self) {
        // Dropped outside their mutexes.
        let prefetcher = self.prefetcher.lock().take();
        let writer = self.writer.lock().take();
        drop((prefetcher, writer));
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
        self.flush()
    }
}

#[cfg(test)]
mod tests;
