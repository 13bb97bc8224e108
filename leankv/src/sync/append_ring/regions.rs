//! Per-thread regions of the open buffer: a thread reserves a region of it at once (one
//! compare-and-swap on the shared word) and places its next small appends there, each
//! with a store to a word of its own, so that the shared word, the buffer's fill count and the
//! buffer's lines move between cores once per region instead of once per append (YCSB A with
//! the log, 2 threads on 2 cores: 1.125x the operations, bench/README `s51-*`).
//!
//! A region is sized to its thread's rate, because whatever a closer finds unused is padding
//! written to the log (every sync closes every region): twice its last one's size when that
//! one filled, half when less than half of it was used, from 1 to 16 KiB; a thread that used
//! less than half of a smallest region appends its next [`SHARED_STREAK`] appends to the
//! shared buffer instead, without padding. So once a region's size has followed its thread's
//! rate, its padding is at most what the thread put in it (while the rate falls, the halvings
//! catch up geometrically), and a thread that writes rarely pads almost nothing (with one
//! fixed 4 KiB region, 64 threads at 20 K operations/s of YCSB A together padded 1,897 bytes
//! per update to its ~160 bytes of record: bench/README `s53-*`).
//!
//! A region's reserved bytes count as filled only when it is *closed*: by its thread, when an
//! append does not fit or may not go there, or by whoever waits for its buffer to fill (the
//! log's writer, a checkpoint, a failed log discarding), which closes every region of that
//! buffer not in use, and waits out one in use (its thread is between a reservation and its
//! copy, as with a [`Reservation`](super::Reservation)). Closing fills the region's unused rest with the caller's
//! padding ([`Padding`]; the log writes a frame that recovery skips). So a thread that stops
//! appending never holds a buffer back, and none waits for a closer, nor a closer for longer
//! than a copy.
//!
//! Placement rules (the caller's, checked here): an append goes to its thread's region only if
//! the region's buffer is still the open one (checked after the region is taken: an append
//! that begins after another ended never lands in an earlier buffer, so a log cut at a buffer's
//! end keeps a prefix of what completed), if the install carries the tag asked for, if its
//! place lies at or after `at_least` (the log: the page's last record), and if it leaves the
//! region either full or with room for a padding frame.
//!
//! The state word: bit 63 closed, bit 62 in use (its thread copies into it), bits 32..62 how
//! often it was opened (a closer that read the region's settings before its exchange acts only
//! if the region was not closed and opened again meanwhile), bits 0..32 the bytes used.
//! Invariant: a region's settings (`install`, `offset`) change only while it is closed, by its
//! thread; an open region's buffer cannot be freed (its bytes are not yet counted filled), so
//! its thread may read the buffer's settings while it holds the region in use.

use super::{AppendRing, Refused, Slot, CLOSED, OFFSET_MASK};
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};

/// The largest append a region takes: half the smallest region, so that a fresh region takes
/// any append and keeps room for a padding frame (an append of 1,000 bytes to a fresh region
/// of 1 KiB would leave less than a frame header, which cannot be padded).
pub(crate) const MAX_PLACE: usize = SMALLEST_REGION as usize / 2;
const SMALLEST_REGION: u64 = 1 << 10;
const LARGEST_REGION: u64 = 16 << 10;
/// Appends a thread makes to the shared buffer after it used less than half of a smallest
/// region, before it opens a region again.
const SHARED_STREAK: u32 = 64;
/// Regions per ring: a thread that finds none free appends to the shared buffer.
const REGIONS: usize = 64;

const REGION_CLOSED: u64 = 1 << 63;
const IN_USE: u64 = 1 << 62;
const OPENED: u64 = 1 << 32;
const USED_MASK: u64 = OPENED - 1;
const OPENED_MASK: u64 = (IN_USE - 1) & !USED_MASK;

/// How a region's unused rest is filled when it closes: `write` gets the bytes and their
/// position (the install's start + offset); at least `min` bytes are ever padded (an append
/// never leaves fewer free).
pub(crate) struct Padding {
    pub(crate) min: usize,
    pub(crate) write: PadWriter,
}

/// Writes padding into its bytes, placed at its position.
pub(crate) type PadWriter = Box<dyn Fn(&mut [u8], u64) + Send + Sync>;

/// The regions of one ring; threads hold them through their thread-local claims.
pub(super) struct Regions {
    entries: Box<[CachePadded<Region>]>,
    /// Entries ever claimed (closers scan no further).
    claimed: AtomicUsize,
    /// Bytes of padding written into closed regions' unused rest, ever.
    padded: AtomicU64,
}

struct Region {
    state: AtomicU64,
    claimed: AtomicBool,
    /// The install the region lies in (the open word's generation and slot bits).
    install: AtomicU64,
    /// Where it starts among the install's reserved bytes.
    offset: AtomicU64,
    /// Its bytes (0 before the first).
    len: AtomicU64,
    /// Appends its thread still makes to the shared buffer before it opens a region again
    /// (touched by its thread only).
    shared_streak: AtomicU32,
}

impl Regions {
    pub(super) fn new() -> Arc<Regions> {
        Arc::new(Regions {
            entries: (0..REGIONS)
                .map(|_| {
                    CachePadded::new(Region {
                        state: AtomicU64::new(REGION_CLOSED),
                        claimed: AtomicBool::new(false),
                        install: AtomicU64::new(0),
                        offset: AtomicU64::new(0),
                        len: AtomicU64::new(0),
                        shared_streak: AtomicU32::new(0),
                    })
                })
                .collect(),
            claimed: AtomicUsize::new(0),
            padded: AtomicU64::new(0),
        })
    }

    /// Claims a free entry, if any.
    fn claim(&self) -> Option<usize> {
        let index = self.entries.iter().position(|entry| {
            entry
                .claimed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        self.claimed.fetch_max(index + 1, Ordering::AcqRel);
        Some(index)
    }
}

/// This thread's claimed entries, one per ring it appended to; released when the thread
/// ends (a region left open is closed by its buffer's next closer, or used on by the entry's
/// next thread).
struct Claims(Vec<(Weak<Regions>, usize)>);

impl Drop for Claims {
    fn drop(&mut self) {
        for (regions, index) in &self.0 {
            if let Some(regions) = regions.upgrade() {
                regions.entries[*index]
                    .claimed
                    .store(false, Ordering::Release);
            }
        }
    }
}

thread_local! {
    static CLAIMS: RefCell<Claims> = const { RefCell::new(Claims(Vec::new())) };
}

/// A place in a thread's region, taken in use until [`RegionReservation::fill`] copies the
/// bytes in. Dropped unfilled (a panic), it poisons the buffer, as a [`Reservation`](super::Reservation) does.
pub(crate) struct RegionReservation<'a> {
    region: &'a Region,
    slot: &'a Slot,
    /// The region's state before it was taken in use.
    state: u64,
    /// Where the place starts among the install's reserved bytes.
    offset: u64,
    len: u64,
    filled: bool,
}

impl AppendRing {
    /// Reserves `len` bytes in this thread's region (see the module notes), opening a region
    /// if its own cannot take them; [`Refused::Full`] if no region can be had (the open
    /// buffer has no room for one, none is open, or every entry is claimed), [`Refused::Tag`]
    /// if the open buffer's install carries another tag than `tag`.
    pub(crate) fn reserve_in_own_region(
        &self,
        len: usize,
        tag: Option<u64>,
        at_least: u64,
    ) -> Result<RegionReservation<'_>, Refused> {
        let entry = self.own_region().ok_or(Refused::Full)?;
        self.reserve_in_region(entry, len, tag, at_least)
    }

    /// This thread's entry in the ring's regions, claimed now if it holds none.
    fn own_region(&self) -> Option<usize> {
        let regions = Arc::as_ptr(&self.regions);
        CLAIMS
            .try_with(|claims| {
                let mut claims = claims.borrow_mut();
                if let Some((_, index)) = claims.0.iter().find(|(r, _)| r.as_ptr() == regions) {
                    return Some(*index);
                }
                // A claim's `Weak` keeps its allocation, so no other ring reuses the address.
                claims.0.retain(|(regions, _)| regions.strong_count() > 0);
                let index = self.regions.claim()?;
                claims.0.push((Arc::downgrade(&self.regions), index));
                Some(index)
            })
            .ok()
            .flatten()
    }

    /// [`Self::reserve_in_own_region`] in region `entry`, which the caller holds.
    pub(super) fn reserve_in_region(
        &self,
        entry: usize,
        len: usize,
        tag: Option<u64>,
        at_least: u64,
    ) -> Result<RegionReservation<'_>, Refused> {
        let region = &self.regions.entries[entry];
        let len = len as u64;
        let mut state = region.state.load(Ordering::Relaxed);
        if state & REGION_CLOSED == 0 {
            // Taken in use, no closer can close it, nor its buffer be freed (see the notes).
            match region.state.compare_exchange(
                state,
                state | IN_USE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if let Some(reservation) = self.place(region, state, len, tag, at_least) {
                        return Ok(reservation);
                    }
                    state = self.close(region, state);
                }
                // A closer closed it.
                Err(now) => state = now,
            }
        }
        debug_assert_ne!(state & REGION_CLOSED, 0);
        debug_assert!(len <= MAX_PLACE as u64);
        let streak = region.shared_streak.load(Ordering::Relaxed);
        if streak > 0 {
            region.shared_streak.store(streak - 1, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        let last = region.len.load(Ordering::Relaxed);
        let Some(size) = next_region_size(last, state & USED_MASK, len + self.padding.min as u64)
        else {
            region
                .shared_streak
                .store(SHARED_STREAK - 1, Ordering::Relaxed);
            // Until the next region opens, none follows from this one's use.
            region.len.store(0, Ordering::Relaxed);
            return Err(Refused::Full);
        };
        let reservation = self.reserve(size as usize, tag)?;
        let slot = reservation.slot;
        let offset = reservation.offset;
        // A fresh region lies after every place reserved before it, so after `at_least`
        // unless that lies beyond the log's end. Its bytes count as filled when it closes
        // (`pad_and_count`), not now.
        std::mem::forget(reservation);
        region
            .install
            .store(slot.install.load(Ordering::Relaxed), Ordering::Relaxed);
        region.offset.store(offset, Ordering::Relaxed);
        region.len.store(size, Ordering::Relaxed);
        // Release: a closer that sees the region open sees its settings.
        let opened = (state & OPENED_MASK).wrapping_add(OPENED) & OPENED_MASK;
        region.state.store(opened | IN_USE, Ordering::Release);
        Ok(RegionReservation {
            region,
            slot,
            state: opened,
            offset,
            len,
            filled: false,
        })
    }

    /// The place for `len` more bytes in `region`, held in use (its state before: `state`),
    /// if the placement rules allow it (see the module notes).
    fn place<'a>(
        &'a self,
        region: &'a Region,
        state: u64,
        len: u64,
        tag: Option<u64>,
        at_least: u64,
    ) -> Option<RegionReservation<'a>> {
        let install = region.install.load(Ordering::Relaxed);
        let slot = &self.slots[super::slot_of(install)];
        let used = state & USED_MASK;
        let room = region.len.load(Ordering::Relaxed) - used;
        let offset = region.offset.load(Ordering::Relaxed) + used;
        let fits = len == room || len + self.padding.min as u64 <= room;
        let tagged = tag.is_none_or(|tag| tag == slot.tag.load(Ordering::Relaxed));
        let in_order = slot.start.load(Ordering::Relaxed) + offset >= at_least;
        let word = self.open.load(Ordering::Acquire);
        let still_open = word & CLOSED == 0 && word & !OFFSET_MASK == install;
        // Built only when placed: a reservation dropped hands the region back.
        (fits && tagged && in_order && still_open).then(|| RegionReservation {
            region,
            slot,
            state,
            offset,
            len,
            filled: false,
        })
    }

    /// Closes `region`, held in use by this thread (state before: `state`): pads its rest and
    /// counts it filled. Returns its closed state.
    fn close(&self, region: &Region, state: u64) -> u64 {
        let install = region.install.load(Ordering::Relaxed);
        let offset = region.offset.load(Ordering::Relaxed);
        let len = region.len.load(Ordering::Relaxed);
        self.pad_and_count(install, offset, len, state & USED_MASK);
        let closed = (state & !IN_USE) | REGION_CLOSED;
        region.state.store(closed, Ordering::Release);
        closed
    }

    /// Pads the unused rest of the region at `offset` of `install`, `len` bytes with `used`
    /// used, and counts the region filled: its buffer may be written (and freed) from now on.
    fn pad_and_count(&self, install: u64, offset: u64, len: u64, used: u64) {
        let slot = &self.slots[super::slot_of(install)];
        let rest = len - used;
        if rest > 0 {
            debug_assert!(rest >= self.padding.min as u64);
            let at = slot.bytes.load(Ordering::Relaxed);
            let start = slot.base.load(Ordering::Relaxed) + offset + used;
            // SAFETY: the region's range of the install was reserved for it alone (the
            // exchange that made it moved the open word past it) and lies within the limit;
            // its unused rest is written by whoever closed it, once (the state's exchange),
            // and the buffer is not freed or read before the count below.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(at.add(start as usize), rest as usize) };
            (self.padding.write)(bytes, slot.start.load(Ordering::Relaxed) + offset + used);
            self.regions.padded.fetch_add(rest, Ordering::Relaxed);
        }
        // Release: the region's bytes are visible to whoever sees the count.
        slot.filled.fetch_add(len, Ordering::Release);
    }

    /// Closes every region in `install` (a sealed buffer's) that is not in use, waiting out
    /// those in use (a thread between its place and its copy).
    pub(super) fn close_regions_in(&self, install: u64) {
        let scanned = self.regions.claimed.load(Ordering::Acquire);
        for region in &self.regions.entries[..scanned] {
            let mut spins = 0u32;
            loop {
                // Acquire: the settings of the region as opened, and its thread's copies.
                let state = region.state.load(Ordering::Acquire);
                if state & REGION_CLOSED != 0 {
                    break;
                }
                let (in_install, offset, len) = (
                    region.install.load(Ordering::Relaxed),
                    region.offset.load(Ordering::Relaxed),
                    region.len.load(Ordering::Relaxed),
                );
                if in_install != install {
                    // In another buffer (settings newer than `state` fail the exchange below
                    // in the next round, if they were ever read with an older state).
                    break;
                }
                if state & IN_USE != 0 {
                    super::pause(&mut spins);
                    continue;
                }
                if region
                    .state
                    .compare_exchange(
                        state,
                        state | REGION_CLOSED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    self.pad_and_count(in_install, offset, len, state & USED_MASK);
                    break;
                }
            }
        }
    }
}

/// The size of a thread's next region after its last one (`last` bytes, 0 if none, `used` of
/// them) did not take an append of `len` bytes and the least padding; `None` if the thread
/// should append to the shared buffer for a while (see the module notes).
fn next_region_size(last: u64, used: u64, len: u64) -> Option<u64> {
    if last == 0 {
        return Some(SMALLEST_REGION);
    }
    if used + len > last {
        Some((last * 2).min(LARGEST_REGION))
    } else if used >= last / 2 {
        Some(last)
    } else if last > SMALLEST_REGION {
        Some(last / 2)
    } else {
        None
    }
}

impl AppendRing {
    /// Bytes of padding its regions took, ever (see the module notes).
    pub(crate) fn padded_bytes(&self) -> u64 {
        self.regions.padded.load(Ordering::Relaxed)
    }
}

impl RegionReservation<'_> {
    /// The caller's position of the place's first byte.
    pub(crate) fn position(&self) -> u64 {
        self.slot.start.load(Ordering::Relaxed) + self.offset
    }

    /// Copies `bytes` (exactly the reserved length) into the place and hands the region back.
    pub(crate) fn fill(mut self, bytes: &[u8]) {
        assert_eq!(bytes.len() as u64, self.len, "a place is filled whole");
        super::copy_in(self.slot, self.offset, bytes);
        self.filled = true;
    }
}

impl Drop for RegionReservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.slot.poisoned.store(true, Ordering::Relaxed);
        }
        // Release: the copy (or the poison mark) is visible to whoever closes the region.
        let used = (self.state & USED_MASK) + self.len;
        debug_assert!(used <= self.region.len.load(Ordering::Relaxed));
        self.region
            .state
            .store((self.state & !USED_MASK) | used, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
