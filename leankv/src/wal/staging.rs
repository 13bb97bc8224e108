//! Staging: an open batch's leaf records kept by its thread and appended at its commit, with
//! the commit record, as one frame instead of one per change (TPC-C logs ~17 records per
//! transaction; with two threads, the log's shared cache lines moving between the cores at
//! every append cost more than encoding the records).
//!
//! A batch (a `WriteBatch` or a transaction) holds the batch gate, so no checkpoint begins while
//! it is open, and takes a slot ([`Log::stage_batch`]), released before the gate. Its leaf
//! records are encoded into the slot's buffer. Each page changed keeps a *mark* in its frame
//! header: the slot and the number of the publication its record goes into. Its LSN field says
//! only that it was described since the checkpoint began: the checkpoint's start + 1, at most
//! the record's end once it has one (the log's end lies beyond it), and kept after that (a
//! resolved end may be a later publication's, see `BufferManager::wal_lsn`). A tree's key
//! count changes as the record is staged: exact at any checkpoint record all the same, since
//! none lies inside an open batch.
//!
//! Publishing appends a slot's records to the log as one frame, a group (see `group`), stamped
//! with its position. Each page's records must reach the log in the order of its changes, and
//! the WAL rule must hold, so a slot is published:
//! * at its batch's commit, carrying the commit (one frame), or when its buffer grows past
//!   [`STAGING_LIMIT`] (long batches; also when the batch ends in any other way);
//! * before its thread appends any other record (the thread's own order);
//! * before another thread logs a change to a page the slot marked and has not published
//!   ([`Log::settle`]: the order of one page's changes across threads);
//! * before a page it marked is written ([`Log::resolve`] gives the end of the publication
//!   that holds the page's record, up to which write-back makes the log durable).
//!
//! Lock order: page latches, the page-id lock, a slot's mutex, the log's mutex (taken by a
//! publication only to open a chunk). A slot's mutex is held only to encode into its buffer or
//! to publish it, never while waiting for a latch.

use super::group;
use super::record::{FillImage, LeafChange, FRAME_ALIGN, MAX_GROUP_PAYLOAD, MAX_PAGE};
use super::{Inner, Log};
use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard, RwLockReadGuard};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Slots per log: a batch that finds none free logs its records directly.
const SLOTS: usize = 64;
/// A slot is published once this many bytes are staged, bounding its memory.
const STAGING_LIMIT: usize = 256 << 10;
const _: () = assert!(STAGING_LIMIT + 2 * MAX_PAGE <= MAX_GROUP_PAYLOAD);
/// Ends of a slot's latest publications kept to resolve marks (an older mark resolves to the
/// oldest kept, a later end: still correct, only a longer wait).
const RECENT: u64 = 16;
/// A mark holds the slot index + 1 above this many bits of publication number.
const MARK_SHIFT: u32 = 48;

/// The LSN a page takes when a record of it is staged under image threshold `redo_ptr`: past
/// the threshold, and never a record's end (frames are aligned), so that
/// [`is_record_end`] tells it apart, on disk too, where a page keeps it.
fn stand_in_lsn(redo_ptr: u64) -> u64 {
    debug_assert!(is_record_end(redo_ptr));
    redo_ptr + 1
}

/// Whether a page's LSN is its last record's end, not a staged record's stand-in (whose
/// record may lie anywhere after it).
pub(super) fn is_record_end(page_lsn: u64) -> bool {
    page_lsn.is_multiple_of(FRAME_ALIGN as u64)
}

/// The slots of one log.
pub(super) struct Slots {
    slots: Box<[Slot]>,
    /// Taken twice by every batch: on cache lines of its own, away from `slots`' address,
    /// which every staged record reads.
    free: CachePadded<Mutex<Vec<u16>>>,
}

impl Slots {
    pub(super) fn new() -> Slots {
        Slots {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            free: CachePadded::new(Mutex::new((0..SLOTS as u16).rev().collect())),
        }
    }
}

/// On cache lines of their own: other threads read `published` whenever they change a page
/// the slot marked, and sharing its line with the mutex made every staged record's lock miss
/// (TPC-C, 2 threads: the slot's lock took a third of `append_leaf`).
#[derive(Default)]
struct Slot {
    /// Publications completed (changes only under `staging`'s mutex): a mark whose number is
    /// at or below it is in the log.
    published: CachePadded<AtomicU64>,
    staging: CachePadded<Mutex<Staging>>,
}

#[derive(Default)]
struct Staging {
    /// The group of records staged (see `group`), at position 0; beyond `len`, what an
    /// encoding that panicked left (never published, cut at the next).
    bytes: Vec<u8>,
    /// The end of the last whole record in `bytes` (0: nothing staged).
    len: usize,
    /// The batch whose records `bytes` holds (while `len` is not 0).
    batch: u64,
    /// The end LSN of publication `n` at `ends[n % RECENT]`.
    ends: [u64; RECENT as usize],
    /// Where page images are assembled (see `FrameWriter::scratch`).
    scratch: Vec<u8>,
}

thread_local! {
    /// The slots this thread holds: the log (its `Inner`'s address) and the slot's index.
    /// An entry goes before its slot is published for the last time and freed.
    static HELD: RefCell<Vec<(usize, u16)>> = const { RefCell::new(Vec::new()) };
}

/// A slot held by a batch's thread (see [`Log::stage_batch`]); dropping it publishes what is
/// still staged and frees the slot.
pub(crate) struct StagingSlot<'a> {
    log: &'a Log,
    index: u16,
}

impl Drop for StagingSlot<'_> {
    fn drop(&mut self) {
        let entry = (self.log.address(), self.index);
        // `try_with`: a slot dropped while the thread's locals are torn down finds none.
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&e| e == entry) {
                held.swap_remove(at);
            }
        });
        // A batch ends by its commit, which published everything; if it ended otherwise (a
        // failed log, a bug), what it staged is still published: marks must resolve.
        let slot = &self.log.inner.slots.slots[usize::from(self.index)];
        let mut staging = slot.staging.lock();
        if staging.len != 0 {
            self.log.inner.publish(slot, &mut staging);
        }
        drop(staging);
        self.log.inner.slots.free.lock().push(self.index);
    }
}

/// What became of a leaf record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Logged {
    /// Appended; its end LSN.
    Appended(u64),
    /// Staged: the page's mark and the LSN its page takes for now (see the module notes).
    Staged { mark: u64, page_lsn: u64 },
}

impl Log {
    /// Takes a slot for a batch about to begin on this thread, which holds the batch gate
    /// (`_gate`) until its commit and releases the slot before the gate; its leaf records are
    /// staged until then (see the module notes). `None` if every slot is taken: the batch's
    /// records are then appended one by one.
    pub(crate) fn stage_batch<'a>(
        &'a self,
        _gate: &RwLockReadGuard<'_, ()>,
    ) -> Option<StagingSlot<'a>> {
        debug_assert!(
            self.held().is_none(),
            "one batch per thread and log at a time"
        );
        let index = self.inner.slots.free.lock().pop()?;
        HELD.with(|held| held.borrow_mut().push((self.address(), index)));
        Some(StagingSlot { log: self, index })
    }

    fn address(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// The slot this thread holds on this log, if any.
    fn held(&self) -> Option<u16> {
        let address = self.address();
        HELD.with(|held| {
            let held = held.borrow();
            held.iter()
                .rev()
                .find(|&&(log, _)| log == address)
                .map(|&(_, index)| index)
        })
    }

    /// Before this thread appends a record: publishes its slot if it holds one (its staged
    /// records precede what it appends now).
    pub(super) fn publish_held(&self) {
        let Some(index) = self.held() else {
            return;
        };
        let slot = &self.inner.slots.slots[usize::from(index)];
        let mut staging = slot.staging.lock();
        self.inner.publish(slot, &mut staging);
    }

    /// At batch `batch`'s commit: publishes what this thread's slot holds of it with the
    /// commit, as one frame; returns its end LSN. `None` if nothing of the batch is staged
    /// (the commit then needs a record of its own).
    pub(super) fn publish_held_with_commit(&self, batch: u64) -> Option<u64> {
        let index = self.held()?;
        let slot = &self.inner.slots.slots[usize::from(index)];
        let mut staging = slot.staging.lock();
        if staging.len == 0 || staging.batch != batch {
            // Published already, or staged by another batch (a range removal committing by
            // its own id inside a transaction): that one's records still come first.
            self.inner.publish(slot, &mut staging);
            return None;
        }
        Some(self.inner.publish_group(slot, &mut staging, true))
    }

    /// Stages a leaf record of this thread's batch if it holds a slot (see
    /// [`Log::append_leaf`]); `None` if it holds none.
    pub(super) fn stage_leaf(
        &self,
        change: LeafChange<'_>,
        page_lsn: u64,
        page_size: usize,
        fill: &mut FillImage<'_>,
    ) -> Option<Logged> {
        let index = self.held()?;
        let slot = &self.inner.slots.slots[usize::from(index)];
        let mut staging = slot.staging.lock();
        let redo_ptr = self.inner.redo_ptr.load(Ordering::Acquire);
        let Staging {
            bytes,
            len,
            batch,
            scratch,
            ..
        } = &mut *staging;
        bytes.truncate(*len);
        if *len == 0 {
            *batch = change.batch;
        }
        let image = (page_lsn <= redo_ptr).then_some((page_size, fill));
        group::add(bytes, scratch, change, image);
        *len = bytes.len();
        let publication = slot.published.load(Ordering::Relaxed) + 1;
        let mark = (u64::from(index) + 1) << MARK_SHIFT | publication;
        if staging.len >= STAGING_LIMIT {
            self.inner.publish(slot, &mut staging);
        }
        // Not the larger of this and the page's LSN: an LSN read from disk may lie beyond this
        // log's end (a log cut at recovery), and write-back would wait for it forever.
        Some(Logged::Staged {
            mark,
            page_lsn: stand_in_lsn(redo_ptr),
        })
    }

    /// Before this thread logs a change to a page marked `mark` (0: none): publishes the
    /// marking slot if another thread holds it and has not published the page's record yet.
    pub(crate) fn settle(&self, mark: u64) {
        if mark == 0 {
            return;
        }
        let (index, publication) = split_mark(mark);
        let slot = &self.inner.slots.slots[index];
        if slot.published.load(Ordering::Acquire) >= publication
            || self.held() == Some(index as u16)
        {
            return;
        }
        drop(self.publish_through(slot, publication));
    }

    /// Whether the records of the publication a page's `mark` names are in the log already
    /// (appended, maybe not yet durable), without publishing anything.
    pub(crate) fn is_published(&self, mark: u64) -> bool {
        let (index, publication) = split_mark(mark);
        self.inner.slots.slots[index]
            .published
            .load(Ordering::Acquire)
            >= publication
    }

    /// The LSN up to which the log must be durable before a page marked `mark` is written:
    /// the end of the publication that holds the page's record, published now if need be.
    pub(crate) fn resolve(&self, mark: u64) -> u64 {
        let (index, publication) = split_mark(mark);
        let slot = &self.inner.slots.slots[index];
        let staging = self.publish_through(slot, publication);
        let published = slot.published.load(Ordering::Relaxed);
        let kept = publication.max(published.saturating_sub(RECENT - 1));
        staging.ends[(kept % RECENT) as usize]
    }

    /// Publishes `slot` unless its publication `publication` is done; returns it locked.
    fn publish_through<'a>(&self, slot: &'a Slot, publication: u64) -> MutexGuard<'a, Staging> {
        let mut staging = slot.staging.lock();
        if slot.published.load(Ordering::Relaxed) < publication {
            self.inner.publish(slot, &mut staging);
        }
        staging
    }
}

/// The slot index and publication number of a mark.
fn split_mark(mark: u64) -> (usize, u64) {
    debug_assert_ne!(mark >> MARK_SHIFT, 0, "a mark names a slot");
    (
        (mark >> MARK_SHIFT) as usize - 1,
        mark & ((1 << MARK_SHIFT) - 1),
    )
}

impl Inner {
    /// Appends `slot`'s staged group (its mutex held as `staging`), stamped with its position,
    /// and completes the slot's next publication; with nothing staged, appends nothing. The
    /// group is sealed (its checksum computed) before its place is reserved.
    fn publish(&self, slot: &Slot, staging: &mut Staging) {
        if staging.len != 0 {
            self.publish_group(slot, staging, false);
        }
    }

    /// Publishes the group staged in `slot` (not empty); `commits`: with its batch's commit.
    /// Returns the group's end LSN.
    fn publish_group(&self, slot: &Slot, staging: &mut Staging, commits: bool) -> u64 {
        debug_assert_ne!(staging.len, 0);
        let Staging { bytes, len, .. } = &mut *staging;
        bytes.truncate(*len);
        group::seal(bytes, commits);
        // Its records' image decisions hold: no checkpoint began while the batch was open.
        let end = self
            .append_frames(bytes, None, || {})
            .expect("appended whatever the image threshold");
        bytes.clear();
        *len = 0;
        let publication = slot.published.load(Ordering::Relaxed) + 1;
        staging.ends[(publication % RECENT) as usize] = end;
        slot.published.store(publication, Ordering::Release);
        end
    }
}
