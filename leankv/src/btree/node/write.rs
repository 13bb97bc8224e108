//! Writing a node, always under the frame's exclusive latch and on consistent data: inserting
//! and removing entries, overwriting values, compaction, and rebuilding a node from entries
//! (splits, merges, root changes).
//!
//! Invariant: space accounting stays exact (live + garbage bytes equal the heap), inner heap
//! allocations stay 8-byte multiples so swips stay aligned, and keys stay sorted and inside
//! the fences.

use super::*;

/// Write access to a node (exclusive latch held, or a private buffer).
pub(crate) struct NodeMut<'a> {
    pub(super) page: PageMut<'a>,
}

impl<'a> NodeMut<'a> {
    pub(crate) fn new(page: PageMut<'a>) -> Self {
        NodeMut { page }
    }

    pub(crate) fn view(&self) -> Node<'_> {
        Node::new(self.page.view())
    }

    /// Makes the page an empty node of `level` with the given fences, keeping the page header
    /// (id, LSN) but setting the page type to match the level.
    pub(crate) fn init(&mut self, level: u16, lower: Option<&[u8]>, upper: Option<&[u8]>) {
        debug_assert!(
            lower.zip(upper).is_none_or(|(lower, upper)| lower < upper),
            "fences out of order"
        );
        let len = self.page.view().len();
        let page_type = if level == 0 {
            PageType::BTreeLeaf
        } else {
            PageType::BTreeInner
        };
        self.page.set_u8(4, page_type as u8);
        self.page.set_bytes(COUNT, &[0; SLOTS - COUNT]);
        self.page.set_u16(LEVEL, level);
        self.page.set_u32(HEAP_START, len as u32);
        self.set_fence(LOWER_FENCE, lower);
        self.set_fence(UPPER_FENCE, upper);
        self.page
            .set_u16(HEAD_OFFSET, fence_prefix_len(lower, upper) as u16);
    }

    /// Sets the head offset and recomputes every head and the hints (slots only; the heap is
    /// untouched).
    fn set_head_offset(&mut self, offset: usize) {
        self.page.set_u16(HEAD_OFFSET, offset as u16);
        for index in 0..self.view().count() {
            let head = key_head(self.view().key(index), offset);
            self.page
                .set_u32(SLOTS + index * SLOT_SIZE + SLOT_HEAD, head);
        }
        self.refresh_hints();
    }

    /// Brings the hints up to date after an insertion or removal at slot `index` changed the
    /// count from `count_before`: only the hints sampling slots from `index` on see other
    /// slots now, unless the spacing changed. An insertion at a leaf's end (appended rows)
    /// touches no hint unless the spacing changes, where a full refresh reads up to sixteen
    /// slot lines under the latch.
    fn refresh_hints_after(&mut self, index: usize, count_before: usize) {
        let spacing = hint_spacing(self.view().count());
        if spacing != hint_spacing(count_before) {
            return self.refresh_hints();
        }
        if let Some(spacing) = spacing {
            // Hint `i` samples slot `(i + 1) * spacing`.
            for i in index.div_ceil(spacing).saturating_sub(1)..HINT_COUNT {
                let head = self.view().head((i + 1) * spacing);
                self.page.set_u32(HINTS + i * HEAD_LEN, head);
            }
        }
        debug_assert_eq!(self.view().hints(), self.view().sampled_hints());
    }

    /// Samples the hints from the slots (zeroes them in a node too small for hints). Every
    /// change of the slots ends with it or with [`Self::refresh_hints_after`].
    fn refresh_hints(&mut self) {
        let mut hints = [0u8; HINT_COUNT * HEAD_LEN];
        for (bytes, hint) in hints
            .chunks_exact_mut(HEAD_LEN)
            .zip(self.view().sampled_hints())
        {
            bytes.copy_from_slice(&hint.to_le_bytes());
        }
        self.page.set_bytes(HINTS, &hints);
    }

    fn set_fence(&mut self, at: usize, fence: Option<&[u8]>) {
        match fence {
            None => {
                self.page.set_u16(at, 0);
                self.page.set_u16(at + 2, NO_FENCE);
            }
            Some(key) => {
                let leaf = self.view().is_leaf();
                let offset = self.heap_alloc(heap_len(leaf, key.len()));
                self.page.set_bytes(offset, key);
                self.page.set_u16(at, offset_field(offset, key.len()));
                self.page.set_u16(at + 2, key.len() as u16);
            }
        }
    }

    /// Reserves `len` heap bytes (a multiple of 8 in inner nodes); returns their offset.
    fn heap_alloc(&mut self, len: usize) -> usize {
        let view = self.view();
        let start = view
            .heap_start()
            .checked_sub(len)
            .filter(|&start| start >= SLOTS + view.count() * SLOT_SIZE)
            .expect("node heap overflow (caller must check fits)");
        debug_assert!(view.is_leaf() || start.is_multiple_of(8));
        self.page.set_u32(HEAP_START, start as u32);
        start
    }

    pub(crate) fn set_upper_child(&mut self, word: u64) {
        self.page.set_u64(UPPER_SWIP, word);
    }

    /// Inserts at `index` (which keeps the keys ordered); leaf values are bytes, inner values
    /// the 8-byte little-endian swip word. Compacts first if the free space is fragmented.
    /// The caller has checked `fits(entry_size(..))`.
    pub(crate) fn insert_at(&mut self, index: usize, key: &[u8], value: &[u8]) {
        self.insert_stored(index, key, Stored::inline(value));
    }

    /// [`Self::insert_at`] for a leaf value as stored (maybe a large-value reference).
    pub(crate) fn insert_stored(&mut self, index: usize, key: &[u8], stored: Stored<'_>) {
        let count_before = self.view().count();
        self.place(index, key, stored);
        self.refresh_hints_after(index, count_before);
    }

    /// Inserts without refreshing the hints (a rebuild refreshes them once at its end).
    fn place(&mut self, index: usize, key: &[u8], stored: Stored<'_>) {
        let value = stored.bytes;
        let view = self.view();
        let leaf = view.is_leaf();
        let count = view.count();
        debug_assert!(index <= count);
        debug_assert!(leaf || (value.len() == SWIP_SIZE && !stored.blob));
        let needed = entry_size(leaf, key.len(), value.len());
        debug_assert!(view.fits(needed), "insert without room");
        if view.free_space() < needed {
            self.compact();
        }
        let view = self.view();
        if count == 0 {
            self.set_head_offset(view.widest_head_offset());
        } else if !key.starts_with(view.head_prefix()) {
            self.set_head_offset(common_prefix_len(view.head_prefix(), key));
        }
        let key_space = heap_len(leaf, key.len());
        let offset = self.heap_alloc(key_space + value.len());
        self.page.set_bytes(offset, key);
        self.page.set_bytes(offset + key_space, value);
        let slot = SLOTS + index * SLOT_SIZE;
        self.page
            .copy_within(slot, slot + SLOT_SIZE, (count - index) * SLOT_SIZE);
        self.page
            .set_u16(slot, offset_field(offset, key_space + value.len()));
        self.page.set_u16(slot + 2, key.len() as u16);
        let flag = if stored.blob { BLOB_FLAG } else { 0 };
        self.page.set_u16(slot + 4, value.len() as u16 | flag);
        let head = key_head(key, self.view().head_offset());
        self.page.set_u32(slot + SLOT_HEAD, head);
        self.page.set_u16(COUNT, (count + 1) as u16);
    }

    /// Removes entry `index`; its heap bytes become garbage.
    pub(crate) fn remove_at(&mut self, index: usize) {
        let view = self.view();
        let count = view.count();
        debug_assert!(index < count);
        let dead = view.entry_size(index) - SLOT_SIZE;
        let garbage = self.page.view().u32(GARBAGE) as usize + dead;
        let slot = SLOTS + index * SLOT_SIZE;
        self.page
            .copy_within(slot + SLOT_SIZE, slot, (count - index - 1) * SLOT_SIZE);
        self.page.set_u16(COUNT, (count - 1) as u16);
        self.page.set_u32(GARBAGE, garbage as u32);
        if count == 1 {
            // The head prefix now comes from the lower fence.
            let offset = self.view().widest_head_offset();
            self.set_head_offset(offset);
        }
        self.refresh_hints_after(index, count);
    }

    /// Overwrites the value of leaf entry `index` with one of the same length (both inline).
    pub(crate) fn overwrite_value(&mut self, index: usize, value: &[u8]) {
        let view = self.view();
        debug_assert_eq!(view.value_len(index), value.len());
        debug_assert!(!view.is_blob(index));
        let offset = view.key_offset(index) + view.key_len(index);
        self.page.set_bytes(offset, value);
    }

    /// Rewrites the heap without garbage.
    pub(crate) fn compact(&mut self) {
        let view = self.view();
        let scratch = Self::build(
            view.page.len(),
            view.level(),
            view.lower_fence(),
            view.upper_fence(),
            view.page.u64(UPPER_SWIP),
            view.entries(0..view.count()),
        );
        self.page.set_bytes(COUNT, &scratch[COUNT..]);
    }

    /// Replaces the whole node by `level`, fences, upper child and `entries` (which may borrow
    /// from this very page: they are copied out first).
    pub(crate) fn rebuild<'k>(
        &mut self,
        level: u16,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        upper_child: u64,
        entries: impl Iterator<Item = (&'k [u8], Stored<'k>)>,
    ) {
        let scratch = Self::build(
            self.page.view().len(),
            level,
            lower,
            upper,
            upper_child,
            entries,
        );
        self.page.set_u8(4, scratch[4]);
        self.page.set_bytes(COUNT, &scratch[COUNT..]);
        // A rebuilt node (split halves, merged nodes, new roots) must be one a reader from
        // disk would accept: keys sorted and strictly inside the fences, exact accounting.
        debug_assert_eq!(self.view().check(), Ok(()), "rebuilt node is malformed");
    }

    /// A page image of `len` bytes holding a node with these contents, its head offset as
    /// wide as the keys allow.
    fn build<'k>(
        len: usize,
        level: u16,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        upper_child: u64,
        entries: impl Iterator<Item = (&'k [u8], Stored<'k>)>,
    ) -> Vec<u8> {
        let mut scratch = vec![0u8; len];
        let mut fresh = NodeMut::new(PageMut::from_slice(&mut scratch));
        fresh.init(level, lower, upper);
        fresh.set_upper_child(upper_child);
        for (index, (key, value)) in entries.enumerate() {
            fresh.place(index, key, value);
        }
        let offset = fresh.view().widest_head_offset();
        fresh.set_head_offset(offset);
        scratch
    }
}
