//! The pool: one memory mapping holding every buffer frame (anonymous; or, for the `Mmap`
//! baseline, a shared mapping of a file, so that the kernel pages frames in and out).
//!
//! Frame `i` starts at `base + i * stride` with `stride = FRAME_HEADER_AREA + page_size`: first
//! the frame header (latch, page id, state, parent link, ...), then, at a 512-byte boundary,
//! the page bytes. Interleaving header and page keeps them close in memory and spreads headers
//! over cache sets (paper §IV-I); the 512-byte alignment lets the page bytes be the target of
//! direct I/O without a bounce buffer.
//!
//! Invariants: the mapping lives as long as the pool, frames are never moved, and a frame index
//! is checked against the frame count before any address is formed, so even an index read from
//! torn data cannot point outside the pool. The mapping is zero-filled by the kernel, and an
//! all-zero header is a valid free frame, so untouched frames cost no memory until first used
//! or populated: while the pool grows, the background writer populates the memory of the next
//! frames to be used ([`Pool::populate`]), since the first write to an unpopulated huge page
//! stops the thread while the kernel zeroes 2 MiB (TPC-C in memory, growing: ~6% of a worker's
//! time).

use super::frame::{Frame, FrameId, FRAME_HEADER_AREA};
use super::page::{PageMut, PageView};
use crate::sync::{prefetch_for_read, ExclusiveGuard};

/// The memory of all frames.
pub(crate) struct Pool {
    base: *mut u8,
    mapping_len: usize,
    stride: usize,
    page_size: usize,
    frames: u32,
    /// Anonymous memory (not a file's) not populated at creation: what [`Pool::populate`]
    /// applies to.
    populate_on_demand: bool,
    /// The OS's page size (what `madvise` aligns to).
    os_page: usize,
}

// SAFETY: the pool only hands out shared references to frame headers (all atomics) and page
// views whose access discipline (latches) is enforced by their users; the raw base pointer is
// never used to create aliasing `&mut`.
unsafe impl Send for Pool {}
// SAFETY: see `Send`; concurrent access goes through atomics and latches.
unsafe impl Sync for Pool {}

impl Pool {
    /// Maps `frames` frames of `page_size` bytes; `prefault` touches all memory up front.
    /// With `backing`, the frames live in that file (created or emptied, then sized sparsely).
    pub(crate) fn new(
        frames: u32,
        page_size: usize,
        prefault: bool,
        backing: Option<&std::path::Path>,
    ) -> std::io::Result<Pool> {
        use std::os::fd::AsRawFd;
        debug_assert!(page_size.is_power_of_two() && page_size >= 4096);
        let stride = FRAME_HEADER_AREA + page_size;
        let mapping_len = stride * frames as usize;
        let file = match backing {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)?;
                file.set_len(mapping_len as u64)?;
                Some(file)
            }
            None => None,
        };
        let sharing = match file {
            Some(_) => libc::MAP_SHARED,
            None => libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        };
        let populate = prefault && file.is_some();
        let flags = sharing | libc::MAP_NORESERVE | if populate { libc::MAP_POPULATE } else { 0 };
        let fd = file.as_ref().map_or(-1, |file| file.as_raw_fd());
        // SAFETY: a mapping with no address hint, of an anonymous region or of a file we just
        // sized to `mapping_len` (zero-filled, as sparse files read), has no preconditions;
        // the result is checked for MAP_FAILED below. The mapping keeps the file alive.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapping_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        if file.is_none() {
            // Tree descents touch frames all over the pool: with 4 KiB pages nearly every node
            // visit misses the TLB (huge pages measured ~20% faster on YCSB in memory). Only
            // a hint: the kernel's transparent huge page setting decides.
            // SAFETY: advice on the mapping just created, over its whole length; it changes
            // no contents.
            unsafe { libc::madvise(base, mapping_len, libc::MADV_HUGEPAGE) };
            // Populated after the advice, so that it is populated with huge pages.
            let populated = prefault && {
                // SAFETY: as above; populating writes nothing visible (zero pages).
                unsafe { libc::madvise(base, mapping_len, libc::MADV_POPULATE_WRITE) == 0 }
            };
            if prefault && !populated {
                // Kernels before 5.14 lack the advice: touch every page instead.
                for offset in (0..mapping_len).step_by(4096) {
                    // SAFETY: `offset < mapping_len`, inside the writable mapping, which
                    // nothing else uses yet; a zero written over zero changes nothing.
                    unsafe { base.cast::<u8>().add(offset).write_volatile(0) };
                }
            }
        }
        Ok(Pool {
            base: base.cast(),
            mapping_len,
            stride,
            page_size,
            frames,
            populate_on_demand: file.is_none() && !prefault,
            // SAFETY: `sysconf` has no preconditions.
            os_page: usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                .ok()
                .filter(|size| size.is_power_of_two())
                .unwrap_or(4096),
        })
    }

    /// Backs the memory of frames `frames` (clamped to the pool) with zeroed pages now, as a
    /// first write would, without writing anything: the threads that use them later do not
    /// stop for the kernel. Under memory pressure the kernel reclaims for it as for a first
    /// write; it fails where the kernel cannot (`EINVAL` before Linux 5.14, `ENOMEM` when
    /// memory is short, `EINTR`), and the first write then faults as before. Does nothing to a
    /// file's mapping or a pool populated at creation.
    pub(crate) fn populate(&self, frames: std::ops::Range<FrameId>) -> std::io::Result<()> {
        if !self.populate_on_demand {
            return Ok(());
        }
        let start = (frames.start.min(self.frames) as usize * self.stride) & !(self.os_page - 1);
        let end = (frames.end.min(self.frames) as usize * self.stride).min(self.mapping_len);
        if start >= end {
            return Ok(());
        }
        // SAFETY: `start` is aligned to the OS's page size (as `base` is: mmap returned it),
        // and `start..end` lies inside the mapping (clamped
        // above); populating changes no contents (pages already present stay as they are,
        // others become zero pages as the mapping's untouched memory reads), so it races with
        // nothing that threads do to frames in the range.
        let done = unsafe {
            libc::madvise(
                self.base.add(start).cast(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            ) == 0
        };
        if done {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Bytes of the mapping.
    pub(crate) fn mapping_len(&self) -> usize {
        self.mapping_len
    }

    /// Bytes from one frame to the next.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    pub(crate) fn frame_count(&self) -> u32 {
        self.frames
    }

    pub(crate) fn page_size(&self) -> usize {
        self.page_size
    }

    /// The header of frame `id`. Panics on an out-of-range id: callers check ids that come
    /// from page bytes (see `Swip::decode`) before they get here.
    #[inline]
    pub(crate) fn frame(&self, id: FrameId) -> &Frame {
        assert!(id < self.frames, "frame id {id} out of range");
        // SAFETY: `id < frames`, so the header lies inside the mapping; the mapping is zeroed
        // or written only through atomics, and all-zero bytes are a valid `Frame`. The
        // header area is 64-byte aligned because the mapping is page-aligned and the stride is
        // a multiple of 512.
        unsafe { &*self.base.add(id as usize * self.stride).cast::<Frame>() }
    }

    /// The page bytes of frame `id`, for reading (optimistically or under a latch).
    #[inline]
    pub(crate) fn page(&self, id: FrameId) -> PageView<'_> {
        assert!(id < self.frames, "frame id {id} out of range");
        // SAFETY: the page bytes of an in-range frame lie inside the mapping, which outlives
        // the returned view's lifetime (bound to `&self`).
        unsafe { PageView::from_raw(self.page_ptr(id), self.page_size) }
    }

    /// The page bytes of frame `id` for writing. The caller proves exclusive access with the
    /// frame's exclusive guard, borrowed mutably for as long as the bytes are in use, so one
    /// guard yields one writer at a time and no writer outlives its latch.
    #[inline]
    pub(crate) fn page_mut<'a>(
        &'a self,
        id: FrameId,
        guard: &'a mut ExclusiveGuard<'_>,
    ) -> PageMut<'a> {
        assert!(
            guard.holds(&self.frame(id).latch),
            "page_mut of frame {id} under another frame's latch"
        );
        // SAFETY: as for `page`; the frame's exclusive latch is held (checked above) and
        // borrowed mutably for 'a, so no other reference to these bytes writes meanwhile.
        unsafe { PageMut::from_raw(self.page_ptr(id), self.page_size) }
    }

    /// Page bytes of a frame that no other thread can reach (a frame being loaded or just
    /// allocated and not yet published): filled by I/O without a latch.
    ///
    /// # Safety
    /// The caller owns frame `id` exclusively: it took it from the free list (or a retired
    /// cache) and has not yet made it reachable through any swip, table or FIFO, and it drops
    /// the slice before doing so.
    #[expect(
        clippy::mut_from_ref,
        reason = "frames live in one shared mapping; exclusivity is the caller's contract"
    )]
    pub(crate) unsafe fn page_bytes_unpublished(&self, id: FrameId) -> &mut [u8] {
        assert!(id < self.frames, "frame id {id} out of range");
        // SAFETY: in range (checked above); exclusive per the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.page_ptr(id), self.page_size) }
    }

    /// Starts loading frame `id`'s header line (its latch) and the first `len` bytes of its
    /// page into the cache (a hint: an out-of-range id does nothing).
    #[inline]
    pub(crate) fn load_into_cache(&self, id: FrameId, len: usize) {
        if id < self.frames {
            prefetch_for_read(self.page_ptr(id).wrapping_sub(FRAME_HEADER_AREA), 64);
            prefetch_for_read(self.page_ptr(id), len.min(self.page_size));
        }
    }

    fn page_ptr(&self, id: FrameId) -> *mut u8 {
        // SAFETY: `id < frames` is checked by every caller; the offset stays inside the mapping.
        unsafe { self.base.add(id as usize * self.stride + FRAME_HEADER_AREA) }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: `base`/`mapping_len` are exactly what mmap returned, and no reference into
        // the pool outlives it (frames are only reached through `&Pool`).
        unsafe {
            libc::munmap(self.base.cast(), self.mapping_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::FrameState;

    #[test]
    fn frames_are_interleaved_and_pages_aligned_for_direct_io() {
        let pool = Pool::new(8, 16384, false, None).unwrap();
        for id in 0..8 {
            let header = pool.frame(id) as *const Frame as usize;
            let page = pool.page(id).as_ptr() as usize;
            assert_eq!(page - header, FRAME_HEADER_AREA);
            assert_eq!(page % crate::io::IO_ALIGNMENT, 0);
            assert_eq!(pool.frame(id).state(), FrameState::Free);
            assert_eq!(pool.frame(id).parent(), None);
        }
    }

    /// Whether every OS page holding frames `frames` of `pool` is resident.
    fn resident(pool: &Pool, frames: std::ops::Range<FrameId>) -> bool {
        let start = (frames.start as usize * pool.stride) & !(pool.os_page - 1);
        let end = frames.end as usize * pool.stride;
        let mut pages = vec![0u8; (end - start).div_ceil(pool.os_page)];
        // SAFETY: `start..end` lies inside the mapping, `start` page-aligned; `pages` has a
        // byte for each page of the range.
        let done = unsafe {
            libc::mincore(pool.base.add(start).cast(), end - start, pages.as_mut_ptr()) == 0
        };
        assert!(done, "mincore: {}", std::io::Error::last_os_error());
        pages.iter().all(|page| page & 1 == 1)
    }

    #[test]
    fn populating_makes_frames_resident_and_changes_no_contents() {
        let frames = 256;
        let pool = Pool::new(frames, 16384, false, None).unwrap();
        let mut guard = pool.frame(3).latch.lock_exclusive();
        let mut page = pool.page_mut(3, &mut guard);
        for offset in (0..16384).step_by(512) {
            page.set_u64(offset, offset as u64 + 1);
        }
        drop(guard);
        assert!(
            !resident(&pool, 200..240),
            "untouched memory is not resident"
        );
        match pool.populate(200..240) {
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("this kernel cannot populate (before Linux 5.14?): nothing to test");
                return;
            }
            done => done.unwrap(),
        }
        assert!(resident(&pool, 200..240));
        pool.populate(0..frames).unwrap();
        pool.populate(frames - 2..frames + 100)
            .expect("clamped to the pool");
        pool.populate(frames + 1..frames + 5)
            .expect("nothing to do");
        assert!(resident(&pool, 0..frames));
        for id in 0..frames {
            let page = pool.page(id);
            for offset in (0..16384).step_by(512) {
                let expected = if id == 3 { offset as u64 + 1 } else { 0 };
                assert_eq!(page.u64(offset), expected, "frame {id} at {offset}");
            }
        }
    }

    #[test]
    fn a_prefaulted_pool_is_resident_and_a_files_pages_are_left_to_the_kernel() {
        let prefaulted = Pool::new(16, 16384, true, None).unwrap();
        assert!(resident(&prefaulted, 0..16));
        prefaulted.populate(0..16).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mapped = Pool::new(16, 16384, false, Some(&dir.path().join("pool"))).unwrap();
        mapped.populate(0..16).unwrap();
        assert!(
            !resident(&mapped, 0..16),
            "a file's pages are left to the kernel"
        );
    }
}
