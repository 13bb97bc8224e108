//! Views of page bytes: the only way any module reads or writes a page in the pool.
//!
//! [`PageView`] reads; every accessor is bounds-checked against the page size and never
//! panics, returning zeros or an empty slice for out-of-range requests, so code reading a page
//! optimistically (possibly torn, see `crate::sync`) stays inside the page whatever it reads.
//! [`PageMut`] writes and may panic on an out-of-range write, which can only come from a bug
//! in the caller, since writers hold the exclusive latch and see consistent data.
//!
//! The views can also wrap an ordinary byte buffer (a page image being built or written out),
//! so node code is written once for pooled pages and scratch buffers alike.

use super::swip::Swip;
use crate::sync::prefetch_for_read;
use std::marker::PhantomData;

/// Read access to page bytes.
#[derive(Clone, Copy)]
pub(crate) struct PageView<'a> {
    ptr: *const u8,
    len: usize,
    _bytes: PhantomData<&'a [u8]>,
}

impl<'a> PageView<'a> {
    /// # Safety
    /// `ptr..ptr+len` must stay valid memory for `'a`. Concurrent writes are allowed (the
    /// caller validates what it read, see `crate::sync`).
    pub(crate) unsafe fn from_raw(ptr: *const u8, len: usize) -> Self {
        PageView {
            ptr,
            len,
            _bytes: PhantomData,
        }
    }

    pub(crate) fn from_slice(bytes: &'a [u8]) -> Self {
        // SAFETY: the slice is valid for 'a.
        unsafe { Self::from_raw(bytes.as_ptr(), bytes.len()) }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Starts loading the cache lines of the `len` bytes at `offset` (as far as they lie in
    /// the page): a hint, see [`prefetch_for_read`].
    #[inline]
    pub(crate) fn prefetch(&self, offset: usize, len: usize) {
        let start = offset.min(self.len);
        prefetch_for_read(self.ptr.wrapping_add(start), len.min(self.len - start));
    }

    #[inline]
    pub(crate) fn read<const N: usize>(&self, offset: usize) -> [u8; N] {
        if offset.checked_add(N).is_some_and(|end| end <= self.len) {
            // SAFETY: `offset + N <= len`, inside the page; an unaligned read of plain bytes.
            unsafe { self.ptr.add(offset).cast::<[u8; N]>().read_unaligned() }
        } else {
            [0; N]
        }
    }

    #[inline]
    pub(crate) fn u16(&self, offset: usize) -> u16 {
        u16::from_le_bytes(self.read(offset))
    }

    #[inline]
    pub(crate) fn u32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.read(offset))
    }

    #[inline]
    pub(crate) fn u64(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.read(offset))
    }

    /// `len` bytes at `offset`, or an empty slice if that range leaves the page.
    #[inline]
    pub(crate) fn bytes(&self, offset: usize, len: usize) -> &'a [u8] {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            // SAFETY: the range is inside the page, valid for 'a.
            unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }
        } else {
            &[]
        }
    }

    /// The whole page.
    pub(crate) fn all(&self) -> &'a [u8] {
        self.bytes(0, self.len)
    }

    /// The swip stored at `offset`, if the offset is 8-aligned and inside the page.
    #[inline]
    pub(crate) fn swip(&self, offset: usize) -> Option<&'a Swip> {
        let aligned = (self.ptr as usize + offset).is_multiple_of(std::mem::align_of::<Swip>());
        if aligned && offset.checked_add(8).is_some_and(|end| end <= self.len) {
            // SAFETY: 8 bytes inside the page at an 8-aligned address; `Swip` is a transparent
            // `AtomicU64`, valid for any bit pattern, and is only accessed atomically.
            Some(unsafe { &*self.ptr.add(offset).cast::<Swip>() })
        } else {
            None
        }
    }
}

/// Write access to page bytes; holders have exclusive access (latch or private buffer).
pub(crate) struct PageMut<'a> {
    ptr: *mut u8,
    len: usize,
    _bytes: PhantomData<&'a mut [u8]>,
}

impl<'a> PageMut<'a> {
    /// # Safety
    /// `ptr..ptr+len` must be valid for `'a` and no other thread may write it meanwhile
    /// (readers that validate afterwards are allowed).
    pub(crate) unsafe fn from_raw(ptr: *mut u8, len: usize) -> Self {
        PageMut {
            ptr,
            len,
            _bytes: PhantomData,
        }
    }

    pub(crate) fn from_slice(bytes: &'a mut [u8]) -> Self {
        // SAFETY: the exclusive borrow is valid for 'a.
        unsafe { Self::from_raw(bytes.as_mut_ptr(), bytes.len()) }
    }

    pub(crate) fn view(&self) -> PageView<'_> {
        // SAFETY: same memory, shorter lifetime.
        unsafe { PageView::from_raw(self.ptr, self.len) }
    }

    #[inline]
    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "page write out of range: {offset}+{len} > {}",
            self.len
        );
    }

    #[inline]
    pub(crate) fn set_bytes(&mut self, offset: usize, src: &[u8]) {
        self.check(offset, src.len());
        // SAFETY: range checked above; `src` cannot overlap page bytes we hold exclusively
        // unless the caller passes a view of this page, which `copy_within` exists for.
        unsafe { std::ptr::copy(src.as_ptr(), self.ptr.add(offset), src.len()) }
    }

    #[inline]
    pub(crate) fn set_u8(&mut self, offset: usize, value: u8) {
        self.set_bytes(offset, &[value]);
    }

    #[inline]
    pub(crate) fn set_u16(&mut self, offset: usize, value: u16) {
        self.set_bytes(offset, &value.to_le_bytes());
    }

    #[inline]
    pub(crate) fn set_u32(&mut self, offset: usize, value: u32) {
        self.set_bytes(offset, &value.to_le_bytes());
    }

    #[inline]
    pub(crate) fn set_u64(&mut self, offset: usize, value: u64) {
        self.set_bytes(offset, &value.to_le_bytes());
    }

    /// Moves `len` bytes from `from` to `to` inside the page (ranges may overlap).
    pub(crate) fn copy_within(&mut self, from: usize, to: usize, len: usize) {
        self.check(from, len);
        self.check(to, len);
        // SAFETY: both ranges checked; `ptr::copy` handles overlap.
        unsafe { std::ptr::copy(self.ptr.add(from), self.ptr.add(to), len) }
    }

    /// Stores a swip word atomically (readers may be reading it concurrently).
    pub(crate) fn set_swip(&mut self, offset: usize, swip: Swip) {
        self.view()
            .swip(offset)
            .expect("swip offset must be 8-aligned and inside the page")
            .store(swip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_reads_are_harmless() {
        let bytes = [7u8; 64];
        let view = PageView::from_slice(&bytes);
        assert_eq!(view.u64(56), u64::from_le_bytes([7; 8]));
        assert_eq!(view.u64(57), 0);
        assert_eq!(view.u16(usize::MAX), 0);
        assert!(view.bytes(60, 5).is_empty());
        assert!(view.bytes(usize::MAX, 2).is_empty());
        assert_eq!(view.bytes(60, 4), &[7; 4]);
    }

    #[test]
    fn writes_land_where_reads_find_them() {
        let mut bytes = vec![0u8; 128];
        let mut page = PageMut::from_slice(&mut bytes);
        page.set_u16(10, 0xBEEF);
        page.set_bytes(20, b"hello");
        page.copy_within(20, 22, 5);
        assert_eq!(page.view().u16(10), 0xBEEF);
        assert_eq!(page.view().bytes(20, 7), b"hehello");
    }
}
