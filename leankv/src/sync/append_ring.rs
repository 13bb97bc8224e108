//! A set of byte buffers that many threads append to without a lock: the write-ahead log's
//! chunks. One buffer at a time is *open*; an appender reserves a range of it by one
//! compare-and-swap on a single word and copies its bytes there, then adds their length to the
//! buffer's *filled* count. A controller (one, behind the caller's mutex) installs buffers,
//! *seals* the open one (closing it to reservations), and hands sealed buffers out once every
//! reserved byte is filled.
//!
//! Why: under a mutex, an appender preempted while holding it stalls every other appender
//! until it runs again (two workers and two background threads on two cores: the log's mutex
//! left a third of the CPU idle). Here a preempted appender delays only whoever consumes its
//! buffer; the others reserve past it.
//!
//! The open word: bit 63 closed, bits 43..63 a generation (which install), bits 32..43 the
//! slot, bits 0..32 the bytes reserved. A reservation succeeds only by a compare-and-swap from
//! the word it read, so it lands in the buffer and install that word names, within that
//! install's limit.
//!
//! An install may reserve the buffer's first bytes itself, so that no appender can come before
//! them (the log's checkpoint record must lie where its position says). A reservation dropped
//! unfilled (a panic) still counts as filled, so that nothing waits for it forever, but poisons
//! its buffer, whose bytes are then refused.
//!
//! Small appends may go to a thread's own *region* of the open buffer instead (see
//! `regions`): waiting for a buffer to fill closes its regions.
//!
//! Invariants: a slot's buffer and settings change only while the slot is free (the
//! controller's free list), when no reservation of it is outstanding: a slot is freed only
//! once sealed and filled (`filled == sealed`; [`RingControl::free`] waits for it), and sealing
//! stops new reservations; reserved ranges of one install are disjoint; a sealed slot's bytes
//! are read only through the [`Sealed`] token, once filled.

use super::atomic::{spin_loop, yield_now, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use super::prefetch_for_write;
use crossbeam_utils::CachePadded;
use regions::Regions;
use std::cell::UnsafeCell;
use std::sync::Arc;

mod regions;
pub(crate) use regions::{Padding, MAX_PLACE};

const CLOSED: u64 = 1 << 63;
const OFFSET_BITS: u32 = 32;
const SLOT_BITS: u32 = 11;
const GENERATION_SHIFT: u32 = OFFSET_BITS + SLOT_BITS;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const GENERATION_MASK: u64 = (1 << (63 - GENERATION_SHIFT)) - 1;
/// The most slots a ring can have (the word's slot bits).
pub(crate) const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Buffers start on this boundary (direct I/O writes them in place).
const BUFFER_ALIGNMENT: usize = 4096;
/// Bytes past its range a fill fetches into the cache for the next appends (a few records):
/// stores to lines not in the cache made the count's locked add after them wait (~4% of a
/// YCSB A worker's time, when a mutex's release followed the copy).
const PREFETCH_AHEAD: u64 = 512;

/// The shared part: the open word, the slots and the threads' regions.
pub(crate) struct AppendRing {
    open: CachePadded<AtomicU64>,
    slots: Box<[Slot]>,
    regions: Arc<Regions>,
    padding: Padding,
}

/// One buffer and the settings of its current install.
struct Slot {
    /// Bytes of the current install's reservations copied in (see [`Reservation::fill`]).
    filled: CachePadded<AtomicU64>,
    /// The caller's position of reserved byte 0 (for the log: its LSN).
    start: AtomicU64,
    /// The current install's generation and slot bits, as the open word names it.
    install: AtomicU64,
    /// A value the caller attaches to the install (for the log: the image threshold).
    tag: AtomicU64,
    /// Where reserved byte 0 lies in the buffer, and how many bytes may be reserved.
    base: AtomicU64,
    limit: AtomicU64,
    /// Bytes reserved when the install was sealed.
    sealed: AtomicU64,
    /// Set when a reservation of the install was dropped unfilled (a panic): its range holds
    /// whatever the buffer held before.
    poisoned: AtomicBool,
    /// The buffer's first aligned byte (set with the install; the memory is `storage`'s).
    bytes: AtomicPtr<u8>,
    /// Owns the buffer; touched only by the controller while the slot is free.
    storage: UnsafeCell<Vec<u8>>,
}

// SAFETY: `storage` is accessed only by the controller while the slot is free (see the module
// invariants), which its `&mut RingControl` serializes; everything else in a slot is atomic.
unsafe impl Sync for Slot {}
// SAFETY: as above; the buffer is plain memory owned by `storage`.
unsafe impl Send for Slot {}

/// Why a reservation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No buffer is open or the open one has no room: the controller must install one.
    Full,
    /// The open buffer's install carries another tag than the one asked for.
    Tag(u64),
}

/// A range reserved in the open buffer; [`Reservation::fill`] copies the bytes in. Dropped
/// unfilled (a panic), it counts as filled, so that the buffer is not waited for forever, and
/// poisons the buffer: [`Sealed::bytes_mut`] refuses it.
pub(crate) struct Reservation<'a> {
    slot: &'a Slot,
    offset: u64,
    len: u64,
    filled: bool,
}

impl AppendRing {
    /// A ring of `slots` buffers (at most [`MAX_SLOTS`]), none allocated yet, whose regions
    /// close with `padding`, and its controller.
    pub(crate) fn new(slots: usize, padding: Padding) -> (AppendRing, RingControl) {
        assert!((1..=MAX_SLOTS).contains(&slots));
        let ring = AppendRing {
            open: CachePadded::new(AtomicU64::new(CLOSED)),
            regions: Regions::new(),
            padding,
            slots: (0..slots)
                .map(|_| Slot {
                    filled: CachePadded::new(AtomicU64::new(0)),
                    start: AtomicU64::new(0),
                    install: AtomicU64::new(0),
                    tag: AtomicU64::new(0),
                    base: AtomicU64::new(0),
                    limit: AtomicU64::new(0),
                    sealed: AtomicU64::new(0),
                    poisoned: AtomicBool::new(false),
                    bytes: AtomicPtr::new(std::ptr::null_mut()),
                    storage: UnsafeCell::new(Vec::new()),
                })
                .collect(),
        };
        let control = RingControl {
            free: (0..slots).rev().collect(),
            generation: 0,
            open: None,
        };
        (ring, control)
    }

    /// Reserves `len` bytes of the open buffer if it has room and, when `tag` is given, its
    /// install carries that tag.
    pub(crate) fn reserve(&self, len: usize, tag: Option<u64>) -> Result<Reservation<'_>, Refused> {
        let len = len as u64;
        let mut word = self.open.load(Ordering::Acquire);
        loop {
            if word & CLOSED != 0 {
                return Err(Refused::Full);
            }
            // The settings read here are the install's that `word` names (published before
            // the word, read after it with acquire); if the slot was installed again since,
            // the word changed and the exchange below fails.
            let slot = &self.slots[((word >> OFFSET_BITS) & SLOT_MASK) as usize];
            let offset = word & OFFSET_MASK;
            if offset + len > slot.limit.load(Ordering::Relaxed) {
                return Err(Refused::Full);
            }
            if let Some(tag) = tag {
                let installed = slot.tag.load(Ordering::Relaxed);
                if installed != tag {
                    return Err(Refused::Tag(installed));
                }
            }
            match self.open.compare_exchange_weak(
                word,
                word + len,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        slot,
                        offset,
                        len,
                        filled: false,
                    })
                }
                Err(now) => word = now,
            }
        }
    }

    /// The open buffer's install (its start and bytes reserved so far), if one is open.
    pub(crate) fn open_extent(&self) -> Option<(u64, u64)> {
        let word = self.open.load(Ordering::Acquire);
        if word & CLOSED != 0 {
            return None;
        }
        let slot = &self.slots[((word >> OFFSET_BITS) & SLOT_MASK) as usize];
        Some((slot.start.load(Ordering::Relaxed), word & OFFSET_MASK))
    }
}

impl Reservation<'_> {
    /// The caller's position of the range's first byte (the install's start + its offset).
    pub(crate) fn position(&self) -> u64 {
        self.slot.start.load(Ordering::Relaxed) + self.offset
    }

    /// Copies `bytes` (exactly the reserved length) into the range.
    pub(crate) fn fill(mut self, bytes: &[u8]) {
        assert_eq!(
            bytes.len() as u64,
            self.len,
            "a reservation is filled whole"
        );
        copy_in(self.slot, self.offset, bytes);
        self.filled = true;
        // `drop` counts the range as filled.
    }
}

/// Copies `bytes` to `offset` of `slot`'s reserved bytes: a range reserved for the caller alone
/// (a reservation's, or a place in its region), not yet counted filled.
fn copy_in(slot: &Slot, offset: u64, bytes: &[u8]) {
    let base = slot.base.load(Ordering::Relaxed);
    let offset = base + offset;
    let at = slot.bytes.load(Ordering::Relaxed);
    // SAFETY: the range `offset..offset + len` of this install was reserved for the caller
    // alone (the compare-and-swap that made it, or its region, moved the word past it) and
    // lies within `limit`, which the install made room for behind `base`; the buffer is not
    // moved, freed or read until `filled` counts this range (with release, after this copy),
    // and `bytes` is a different allocation.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(offset as usize), bytes.len());
    }
    let end = offset + bytes.len() as u64;
    let room = (base + slot.limit.load(Ordering::Relaxed)).saturating_sub(end);
    prefetch_for_write(
        at.wrapping_add(end as usize),
        room.min(PREFETCH_AHEAD) as usize,
    );
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.slot.poisoned.store(true, Ordering::Relaxed);
        }
        // Release: the copy (or the poison mark) is visible to whoever sees the count.
        self.slot.filled.fetch_add(self.len, Ordering::Release);
    }
}

/// The controller of a ring: installs and seals buffers, hands out sealed ones, frees them.
/// Its methods take `&mut self`: the caller keeps it behind its mutex.
pub(crate) struct RingControl {
    /// Free slots, the most recently freed last (their buffers are warm).
    free: Vec<usize>,
    generation: u64,
    /// The open install's slot.
    open: Option<usize>,
}

/// A sealed buffer, until [`RingControl::free`] takes it back: the one handle to its bytes.
#[derive(Debug)]
pub(crate) struct Sealed {
    slot: usize,
    len: u64,
}

impl Sealed {
    /// Bytes reserved in it.
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }
}

impl RingControl {
    /// Slots free for [`Self::install`].
    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Opens a free slot's buffer for reservations of up to `limit` bytes, reserved byte 0 at
    /// `base` in the buffer and `tail` more bytes of room after the limit; `start` is the
    /// caller's position of byte 0 and `tag` its value for the install. Returns the reservation
    /// of its first `first` bytes, made with the install (no other can come before it). Fails
    /// if no slot is free. Nothing may be open (see [`Self::seal`]).
    #[allow(clippy::too_many_arguments)] // each is one setting of the install
    pub(crate) fn install<'a>(
        &mut self,
        ring: &'a AppendRing,
        start: u64,
        tag: u64,
        base: usize,
        limit: usize,
        tail: usize,
        first: usize,
    ) -> Result<Reservation<'a>, Refused> {
        assert!(self.open.is_none(), "one buffer is open at a time");
        assert!(limit as u64 <= OFFSET_MASK && first <= limit);
        let index = self.free.pop().ok_or(Refused::Full)?;
        let slot = &ring.slots[index];
        let size = base + limit + tail + BUFFER_ALIGNMENT;
        // SAFETY: the slot is free: no reservation of it is outstanding and none can be made
        // until the word below names it, so nothing else touches its storage.
        let storage = unsafe { &mut *slot.storage.get() };
        if storage.len() < size {
            *storage = vec![0; size];
        }
        let misalignment = storage.as_ptr() as usize % BUFFER_ALIGNMENT;
        let lead = (BUFFER_ALIGNMENT - misalignment) % BUFFER_ALIGNMENT;
        slot.bytes
            .store(storage[lead..].as_mut_ptr(), Ordering::Relaxed);
        slot.start.store(start, Ordering::Relaxed);
        slot.tag.store(tag, Ordering::Relaxed);
        slot.base.store(base as u64, Ordering::Relaxed);
        slot.limit.store(limit as u64, Ordering::Relaxed);
        slot.filled.store(0, Ordering::Relaxed);
        slot.poisoned.store(false, Ordering::Relaxed);
        self.generation = (self.generation + 1) & GENERATION_MASK;
        let install = self.generation << GENERATION_SHIFT | (index as u64) << OFFSET_BITS;
        slot.install.store(install, Ordering::Relaxed);
        let word = install | first as u64;
        // Release: the settings above are visible to whoever reads this word.
        ring.open.store(word, Ordering::Release);
        self.open = Some(index);
        Ok(Reservation {
            slot,
            offset: 0,
            len: first as u64,
            filled: false,
        })
    }

    /// Closes the open buffer to reservations; returns it with the bytes reserved in it, or
    /// `None` if none is open.
    pub(crate) fn seal(&mut self, ring: &AppendRing) -> Option<Sealed> {
        let index = self.open.take()?;
        let word = ring.open.fetch_or(CLOSED, Ordering::AcqRel);
        debug_assert_eq!(word & CLOSED, 0);
        debug_assert_eq!(((word >> OFFSET_BITS) & SLOT_MASK) as usize, index);
        let len = word & OFFSET_MASK;
        ring.slots[index].sealed.store(len, Ordering::Relaxed);
        Some(Sealed { slot: index, len })
    }

    /// [`Self::seal`] with `trailer` more bytes reserved at the end of the open buffer, in
    /// the same exchange, so that nothing is reserved after them; `None`, sealing nothing, if
    /// no buffer is open or the trailer does not fit within its limit.
    pub(crate) fn seal_with_trailer<'a>(
        &mut self,
        ring: &'a AppendRing,
        trailer: usize,
    ) -> Option<(Reservation<'a>, Sealed)> {
        let index = self.open?;
        let slot = &ring.slots[index];
        let trailer = trailer as u64;
        let mut word = ring.open.load(Ordering::Acquire);
        loop {
            debug_assert_eq!(word & CLOSED, 0);
            debug_assert_eq!(((word >> OFFSET_BITS) & SLOT_MASK) as usize, index);
            let offset = word & OFFSET_MASK;
            if offset + trailer > slot.limit.load(Ordering::Relaxed) {
                return None;
            }
            match ring.open.compare_exchange_weak(
                word,
                (word + trailer) | CLOSED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.open = None;
                    let len = offset + trailer;
                    slot.sealed.store(len, Ordering::Relaxed);
                    let reservation = Reservation {
                        slot,
                        offset,
                        len: trailer,
                        filled: false,
                    };
                    return Some((reservation, Sealed { slot: index, len }));
                }
                Err(now) => word = now,
            }
        }
    }

    /// Takes back a sealed buffer once filled (an appender may still be copying into it);
    /// the free buffers beyond the `keep` most recently freed are released (`keep` may
    /// change from call to call).
    pub(crate) fn free(&mut self, ring: &AppendRing, sealed: Sealed, keep: usize) {
        sealed.wait_filled(ring);
        self.free.push(sealed.slot);
        let beyond = self.free.len().saturating_sub(keep);
        // The free buffers that hold memory are the most recently freed (an install gives its
        // buffer memory and takes the last freed; releases go from the oldest): walking back
        // from the newest to release, the first one released ends the walk, so a call costs
        // what it releases, not the length of the free list.
        for &slot in self.free[..beyond].iter().rev() {
            // SAFETY: `slot` is in the free list: no install names it, so no reservation, fill
            // or sealed handle can reach its storage, and only this controller (borrowed
            // mutably here) touches a free slot's storage until it installs it again.
            let storage = unsafe { &mut *ring.slots[slot].storage.get() };
            if storage.capacity() == 0 {
                break;
            }
            *storage = Vec::new();
        }
    }

    /// Buffers in use: installed and not yet freed.
    pub(crate) fn in_use(&self, ring: &AppendRing) -> usize {
        ring.slots.len() - self.free.len()
    }

    /// Free buffers that still hold their memory.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn kept(&self, ring: &AppendRing) -> usize {
        let holds_memory = |slot: usize| {
            // SAFETY: `slot` is in the free list: nothing but this controller (borrowed here)
            // touches a free slot's storage, and it does not write it during this shared read.
            let storage = unsafe { &*ring.slots[slot].storage.get() };
            storage.capacity() != 0
        };
        self.free.iter().filter(|&&slot| holds_memory(slot)).count()
    }

    /// Waits until every sealed buffer not yet freed is filled: every reservation made before
    /// the last seal has its bytes in place (and whatever its appender did before filling).
    pub(crate) fn wait_all_filled(&self, ring: &AppendRing) {
        for (index, slot) in ring.slots.iter().enumerate() {
            if self.open == Some(index) || self.free.contains(&index) {
                continue;
            }
            ring.wait_filled(slot, slot.sealed.load(Ordering::Relaxed));
        }
    }
}

/// The slot an install's bits name.
fn slot_of(install: u64) -> usize {
    ((install >> OFFSET_BITS) & SLOT_MASK) as usize
}

impl AppendRing {
    /// Waits until `len` bytes of `slot`'s install (sealed) are filled, closing its regions
    /// (an appender between its reservation and its copy was preempted: it runs again soon).
    fn wait_filled(&self, slot: &Slot, len: u64) {
        let install = slot.install.load(Ordering::Relaxed);
        let mut spins = 0u32;
        while slot.filled.load(Ordering::Acquire) != len {
            self.close_regions_in(install);
            if slot.filled.load(Ordering::Acquire) == len {
                break;
            }
            pause(&mut spins);
        }
    }
}

/// Waits a moment for an appender between its reservation and its copy: spins at first, then
/// yields (it was preempted: it runs again soon).
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        spin_loop();
    } else {
        yield_now();
    }
}

impl Sealed {
    /// Waits until every reservation in the buffer is filled (its regions closed).
    pub(crate) fn wait_filled(&self, ring: &AppendRing) {
        ring.wait_filled(&ring.slots[self.slot], self.len);
    }

    /// The buffer, once filled: `base + len` bytes from its aligned start (the caller's bytes
    /// before `base`, then the reserved ones), and the `tail` of room after the limit. `None`
    /// if a reservation was dropped unfilled: some range holds stale bytes.
    pub(crate) fn bytes_mut<'a>(&'a mut self, ring: &'a AppendRing) -> Option<&'a mut [u8]> {
        self.wait_filled(ring);
        let slot = &ring.slots[self.slot];
        if slot.poisoned.load(Ordering::Relaxed) {
            return None;
        }
        let at = slot.bytes.load(Ordering::Relaxed);
        // SAFETY: the storage outlives the slot's install (changed only while free); `at`
        // lies in it with `size - BUFFER_ALIGNMENT` bytes after it (see `install`); every
        // reservation is filled (acquire above), none can be made (sealed), and this token is
        // the only handle to the slot, borrowed mutably here.
        unsafe {
            let storage = &*slot.storage.get();
            let size = storage.len() - at.offset_from(storage.as_ptr()) as usize;
            Some(std::slice::from_raw_parts_mut(at, size))
        }
    }
}

#[cfg(test)]
mod tests;
