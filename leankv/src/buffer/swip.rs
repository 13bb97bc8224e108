//! Swips: the 8-byte references between buffer-managed pages.
//!
//! A swip is either *swizzled*, naming the pool frame that holds the page, or *unswizzled*,
//! naming the page id on disk. The low bit tells which (1 = unswizzled), so a hit on a hot
//! page costs one branch. Swizzled swips store the frame index (+1, so that an all-zero word is
//! never a valid reference) rather than a raw address: the index is checked against the pool
//! size before use, so a torn or corrupt word can never point outside the pool.
//!
//! Invariants: every page has exactly one owning swip; pages written to disk contain only
//! unswizzled swips (the write path converts swizzled ones to page ids in its copy).

use super::frame::FrameId;
use std::sync::atomic::{AtomicU64, Ordering};

const UNSWIZZLED_TAG: u64 = 1;

/// A reference to a page, stored in another page or in a tree descriptor.
#[repr(transparent)]
pub(crate) struct Swip(AtomicU64);

/// What a swip refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SwipTarget {
    /// The page is hot in this frame.
    Frame(FrameId),
    /// The page is not reachable in memory through this swip: cooling, in flight or on disk.
    Page(u64),
}

impl Swip {
    pub(crate) fn swizzled(frame: FrameId) -> Swip {
        Swip(AtomicU64::new(Self::swizzled_word(frame)))
    }

    pub(crate) fn unswizzled(page_id: u64) -> Swip {
        Swip(AtomicU64::new(Self::unswizzled_word(page_id)))
    }

    pub(crate) fn swizzled_word(frame: FrameId) -> u64 {
        (u64::from(frame) + 1) << 1
    }

    pub(crate) fn unswizzled_word(page_id: u64) -> u64 {
        debug_assert!(page_id < 1 << 63);
        (page_id << 1) | UNSWIZZLED_TAG
    }

    /// The raw word, for writing a swip into another page image.
    pub(crate) fn word(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn store(&self, swip: Swip) {
        self.0.store(swip.0.into_inner(), Ordering::Release);
    }

    /// Decodes this swip; `None` for a word that is no valid reference in a pool of `frames`.
    #[inline]
    pub(crate) fn target(&self, frames: u32) -> Option<SwipTarget> {
        Self::decode(self.word(), frames)
    }

    #[inline]
    pub(crate) fn decode(word: u64, frames: u32) -> Option<SwipTarget> {
        if word & UNSWIZZLED_TAG != 0 {
            let page_id = word >> 1;
            (page_id != 0).then_some(SwipTarget::Page(page_id))
        } else {
            let link = word >> 1;
            (link != 0 && link <= u64::from(frames)).then(|| SwipTarget::Frame((link - 1) as u32))
        }
    }

    /// Decodes a word that must be swizzled (the in-memory policy, whose pages never leave the
    /// pool); `None` for anything else.
    #[inline]
    pub(crate) fn decode_swizzled(word: u64, frames: u32) -> Option<FrameId> {
        let index = (word >> 1).wrapping_sub(1);
        (word & UNSWIZZLED_TAG == 0 && index < u64::from(frames)).then_some(index as FrameId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_roundtrips_and_rejects_garbage() {
        assert_eq!(Swip::swizzled(0).target(4), Some(SwipTarget::Frame(0)));
        assert_eq!(Swip::swizzled(3).target(4), Some(SwipTarget::Frame(3)));
        assert_eq!(Swip::swizzled(4).target(4), None, "frame beyond the pool");
        assert_eq!(Swip::unswizzled(42).target(4), Some(SwipTarget::Page(42)));
        assert_eq!(Swip::decode(0, 4), None, "zero word is no reference");
        assert_eq!(Swip::decode(1, 4), None, "page 0 is the superblock");
        let swip = Swip::unswizzled(9);
        swip.store(Swip::swizzled(2));
        assert_eq!(swip.target(4), Some(SwipTarget::Frame(2)));
        assert_eq!(Swip::decode_swizzled(Swip::swizzled_word(3), 4), Some(3));
        assert_eq!(Swip::decode_swizzled(Swip::swizzled_word(4), 4), None);
        assert_eq!(Swip::decode_swizzled(Swip::unswizzled_word(2), 4), None);
        assert_eq!(Swip::decode_swizzled(0, 4), None);
    }
}
