//! The B+-tree node: a slotted page with variable-size keys and values and two fence keys.
//!
//! Layout after the 24-byte page header (little endian):
//!
//! | bytes  | field                                                                |
//! |--------|----------------------------------------------------------------------|
//! | 24..26 | number of slots                                                      |
//! | 26..28 | level: 0 for leaves, parent = child + 1                              |
//! | 28..32 | lower fence: offset u16, length u16 (`NO_FENCE` = minus infinity)    |
//! | 32..36 | upper fence: offset u16, length u16 (`NO_FENCE` = plus infinity)     |
//! | 36..40 | heap start: lowest used heap byte; the heap grows down from the end  |
//! | 40..44 | garbage: dead heap bytes that compaction would reclaim               |
//! | 44..46 | head offset: length of a prefix every key of the node has            |
//! | 48..56 | inner nodes: swip of the upper child (keys > the last key)           |
//! | 56..   | slots, 8 bytes each: key offset, key length, value length, key head  |
//!
//! Keys are ordered bytewise; every key `k` of the node satisfies `lower < k <= upper`. In inner
//! nodes the value of slot `i` is the 8-byte swip of the child holding keys in
//! `(key[i-1], key[i]]`. Every heap allocation of an inner node (keys and fences) is rounded up
//! to 8 bytes, so the heap start stays 8-aligned and each swip, stored right after its padded
//! key, can be read and written atomically; space accounting stays exact.
//!
//! The key head is the two key bytes after the head offset, big endian, zero padded. The head
//! offset is the length of a prefix all keys of the node share (the head prefix: the first
//! key's, or in an empty node the lower fence's, first bytes), so the bytes after it are the
//! first that can differ, and when two heads differ they order the keys without a heap access
//! during binary search. Keys that begin with a common field, such as a table or warehouse
//! number, would otherwise all have one head. A rebuild sets the offset to the prefix the
//! first and last key share (in sorted order, every key shares it); an empty node takes the
//! prefix its fences share (every key between them has it); an insert that breaks the prefix
//! shortens it and recomputes the heads.
//!
//! Reading ([`Node`]) never panics and never leaves the page, whatever the bytes say (it may be
//! reading a page that is being written; the caller validates afterwards). Writing
//! ([`NodeMut`]) happens under the exclusive latch, on consistent data.

use crate::buffer::{PageMut, PageView, Swip, SwipTarget};
use crate::io::page::{PageType, PAGE_HEADER_SIZE};
use std::cmp::Ordering;

const COUNT: usize = PAGE_HEADER_SIZE;
const LEVEL: usize = 26;
const LOWER_FENCE: usize = 28;
const UPPER_FENCE: usize = 32;
const HEAP_START: usize = 36;
const GARBAGE: usize = 40;
const HEAD_OFFSET: usize = 44;
/// Offset of the upper child's swip in inner nodes.
const UPPER_SWIP: usize = 48;
/// Offset of the first slot: the node header ends here.
pub(crate) const SLOTS: usize = 56;
const SLOT_SIZE: usize = 8;
const NO_FENCE: u16 = u16::MAX;
/// Bytes an inner entry's value (a swip) takes.
const SWIP_SIZE: usize = 8;

/// Which keys a descent is after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The node that may hold `key` itself.
    AtLeast,
    /// The node that holds the keys just above `key`.
    Above,
}

/// The two bytes of `key` at `offset`, zero padded.
fn key_head(key: &[u8], offset: usize) -> u16 {
    u16::from_be_bytes([
        key.get(offset).copied().unwrap_or(0),
        key.get(offset + 1).copied().unwrap_or(0),
    ])
}

/// Bytewise order of two keys, eight bytes at a step. Keys are short (a dozen bytes is
/// typical), where a call into the C library's `memcmp` costs more than the comparison.
#[inline]
fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let mut a_words = a.chunks_exact(8);
    let mut b_words = b.chunks_exact(8);
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let x = u64::from_be_bytes(x.try_into().expect("eight bytes"));
        let y = u64::from_be_bytes(y.try_into().expect("eight bytes"));
        if x != y {
            return x.cmp(&y);
        }
    }
    let done = a.len().min(b.len()) / 8 * 8;
    for (x, y) in a[done..].iter().zip(&b[done..]) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Length of the prefix every key between the fences has: the one they share (none when a
/// fence is infinite).
fn fence_prefix_len(lower: Option<&[u8]>, upper: Option<&[u8]>) -> usize {
    match (lower, upper) {
        (Some(lower), Some(upper)) => common_prefix_len(lower, upper),
        _ => 0,
    }
}

/// Heap bytes `len` bytes take in a node: exact in leaves, rounded up to 8 in inner nodes.
pub(crate) fn heap_len(leaf: bool, len: usize) -> usize {
    if leaf {
        len
    } else {
        len.next_multiple_of(8)
    }
}

/// Longest key (and fence) a node of `page_size` bytes holds: small enough that a split always
/// finds a point where both halves fit (see `split`).
pub(crate) const fn max_key_size(page_size: usize) -> usize {
    page_size / 16
}

/// Longest leaf value a node of `page_size` bytes holds.
pub(crate) const fn max_value_size(page_size: usize) -> usize {
    page_size / 4
}

/// Highest level a node may have: far above any real tree (a 64 KiB-page tree of level 16
/// would hold more entries than any disk), low enough that every walk down stays short.
pub(crate) const MAX_LEVEL: u16 = 24;

/// Heap bytes and slot an entry needs in a node of the given kind.
pub(crate) fn entry_size(leaf: bool, key_len: usize, value_len: usize) -> usize {
    if leaf {
        SLOT_SIZE + key_len + value_len
    } else {
        SLOT_SIZE + heap_len(false, key_len) + SWIP_SIZE
    }
}

/// The 16-bit field for heap bytes at `offset` of which `len` are used. An empty allocation in
/// an empty 64 KiB node sits at offset 65536, which the field cannot hold; it stores 0 (an
/// empty slice is the same anywhere, and the node check does not place empty entries).
fn offset_field(offset: usize, len: usize) -> u16 {
    match u16::try_from(offset) {
        Ok(field) => field,
        Err(_) => {
            debug_assert_eq!(len, 0, "heap offset {offset} beyond 16 bits");
            0
        }
    }
}

/// Space a node with these fences and no entries uses.
fn empty_size(leaf: bool, lower: Option<&[u8]>, upper: Option<&[u8]>) -> usize {
    SLOTS
        + lower.map_or(0, |fence| heap_len(leaf, fence.len()))
        + upper.map_or(0, |fence| heap_len(leaf, fence.len()))
}

/// Read access to a node.
#[derive(Clone, Copy)]
pub(crate) struct Node<'a> {
    page: PageView<'a>,
}

impl<'a> Node<'a> {
    pub(crate) fn new(page: PageView<'a>) -> Self {
        Node { page }
    }

    fn max_slots(&self) -> usize {
        self.page.len().saturating_sub(SLOTS) / SLOT_SIZE
    }

    /// Number of entries (clamped to what could fit, so torn data cannot make loops run long).
    #[inline]
    pub(crate) fn count(&self) -> usize {
        usize::from(self.page.u16(COUNT)).min(self.max_slots())
    }

    #[inline]
    pub(crate) fn level(&self) -> u16 {
        self.page.u16(LEVEL)
    }

    #[inline]
    pub(crate) fn is_leaf(&self) -> bool {
        self.level() == 0
    }

    fn slot(&self, index: usize) -> usize {
        SLOTS + index * SLOT_SIZE
    }

    fn key_offset(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index)))
    }

    fn key_len(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index) + 2))
    }

    fn value_len(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index) + 4))
    }

    fn head(&self, index: usize) -> u16 {
        self.page.u16(self.slot(index) + 6)
    }

    fn head_offset(&self) -> usize {
        usize::from(self.page.u16(HEAD_OFFSET))
    }

    /// The prefix every key of the node starts with (see the module notes); empty if the page
    /// is torn or corrupt.
    fn head_prefix(&self) -> &'a [u8] {
        let offset = self.head_offset();
        let source = if self.count() > 0 {
            Some(self.key(0))
        } else {
            self.lower_fence()
        };
        source
            .and_then(|bytes| bytes.get(..offset))
            .unwrap_or_default()
    }

    /// What the head offset may be at most: the prefix the first and last key share, or in an
    /// empty node the fences.
    fn widest_head_offset(&self) -> usize {
        match self.count() {
            0 => fence_prefix_len(self.lower_fence(), self.upper_fence()),
            count => common_prefix_len(self.key(0), self.key(count - 1)),
        }
    }

    #[inline]
    pub(crate) fn key(&self, index: usize) -> &'a [u8] {
        self.page.bytes(self.key_offset(index), self.key_len(index))
    }

    /// Value of a leaf entry.
    #[inline]
    pub(crate) fn value(&self, index: usize) -> &'a [u8] {
        self.page.bytes(
            self.key_offset(index) + self.key_len(index),
            self.value_len(index),
        )
    }

    /// Offset of the swip of child `index` (`index == count` is the upper child).
    #[inline]
    pub(crate) fn child_offset(&self, index: usize) -> usize {
        if index >= self.count() {
            UPPER_SWIP
        } else {
            self.key_offset(index) + heap_len(false, self.key_len(index))
        }
    }

    /// The swip word of child `index`.
    #[inline]
    pub(crate) fn child_word(&self, index: usize) -> u64 {
        self.page.u64(self.child_offset(index))
    }

    fn fence(&self, at: usize) -> Option<&'a [u8]> {
        let len = self.page.u16(at + 2);
        (len != NO_FENCE).then(|| {
            self.page
                .bytes(usize::from(self.page.u16(at)), usize::from(len))
        })
    }

    pub(crate) fn lower_fence(&self) -> Option<&'a [u8]> {
        self.fence(LOWER_FENCE)
    }

    pub(crate) fn upper_fence(&self) -> Option<&'a [u8]> {
        self.fence(UPPER_FENCE)
    }

    /// Order of entry `index` and `key`, which has the node's head prefix and `head`.
    fn compare(&self, index: usize, key: &[u8], head: u16) -> Ordering {
        match self.head(index).cmp(&head) {
            Ordering::Equal => compare_keys(self.key(index), key),
            unequal => unequal,
        }
    }

    /// First index whose key is `>= key`, and whether it is equal.
    #[inline]
    pub(crate) fn lower_bound(&self, key: &[u8]) -> (usize, bool) {
        let prefix = self.head_prefix();
        if key.len() < prefix.len() || compare_keys(&key[..prefix.len()], prefix).is_ne() {
            // Heads only order keys with the node's prefix; any other key lies before or
            // after every entry.
            let after_all = key > prefix;
            return (if after_all { self.count() } else { 0 }, false);
        }
        let head = key_head(key, self.head_offset());
        let (mut low, mut high) = (0, self.count());
        while low < high {
            let middle = low + (high - low) / 2;
            match self.compare(middle, key, head) {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return (middle, true),
            }
        }
        (low, false)
    }

    /// First index whose key is `> key`.
    pub(crate) fn upper_bound(&self, key: &[u8]) -> usize {
        match self.lower_bound(key) {
            (index, true) => index + 1,
            (index, false) => index,
        }
    }

    /// First entry index a search with `bound` on `key` is after; for inner nodes, the index
    /// of the child to descend into.
    #[inline]
    pub(crate) fn search(&self, key: &[u8], bound: Bound) -> usize {
        match bound {
            Bound::AtLeast => self.lower_bound(key).0,
            Bound::Above => self.upper_bound(key),
        }
    }

    /// Whether the keys a search for `key` with `bound` is after lie in this node's range:
    /// `lower < key <= upper` for `AtLeast`, `lower <= key < upper` for `Above` (so the
    /// node's upper fence lies beyond the position and a scan moves forward).
    pub(crate) fn covers(&self, key: &[u8], bound: Bound) -> bool {
        let (lower, upper) = (self.lower_fence(), self.upper_fence());
        match bound {
            Bound::AtLeast => {
                lower.is_none_or(|lower| lower < key) && upper.is_none_or(|upper| key <= upper)
            }
            Bound::Above => {
                lower.is_none_or(|lower| lower <= key) && upper.is_none_or(|upper| key < upper)
            }
        }
    }

    fn heap_start(&self) -> usize {
        self.page.u32(HEAP_START) as usize
    }

    /// Contiguous free bytes between the slots and the heap.
    pub(crate) fn free_space(&self) -> usize {
        self.heap_start()
            .saturating_sub(SLOTS + self.count() * SLOT_SIZE)
    }

    /// Free bytes after compaction.
    pub(crate) fn reclaimable_space(&self) -> usize {
        self.free_space() + self.page.u32(GARBAGE) as usize
    }

    /// Bytes in use (header, slots, live keys, values and fences).
    pub(crate) fn used_space(&self) -> usize {
        self.page.len().saturating_sub(self.reclaimable_space())
    }

    /// Whether an entry of `size` bytes (see [`entry_size`]) fits, after compaction if needed.
    pub(crate) fn fits(&self, size: usize) -> bool {
        self.reclaimable_space() >= size
    }

    /// Size of entry `index` as [`entry_size`] counts it.
    pub(crate) fn entry_size(&self, index: usize) -> usize {
        entry_size(self.is_leaf(), self.key_len(index), self.value_len(index))
    }

    /// The page type a node of this level has.
    pub(crate) fn page_type(&self) -> PageType {
        if self.is_leaf() {
            PageType::BTreeLeaf
        } else {
            PageType::BTreeInner
        }
    }

    /// Page size in bytes.
    pub(crate) fn page_len(&self) -> usize {
        self.page.len()
    }

    /// The entries `range` as (key, value-or-swip bytes) pairs.
    pub(crate) fn entries(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        let leaf = self.is_leaf();
        range.map(move |i| {
            let value = if leaf {
                self.value(i)
            } else {
                self.page.bytes(self.child_offset(i), SWIP_SIZE)
            };
            (self.key(i), value)
        })
    }

    /// Bytes a node needs to hold these entries and fences (conservative).
    pub(crate) fn size_of<'k>(
        leaf: bool,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        entries: impl Iterator<Item = (&'k [u8], &'k [u8])>,
    ) -> usize {
        empty_size(leaf, lower, upper)
            + entries
                .map(|(key, value)| entry_size(leaf, key.len(), value.len()))
                .sum::<usize>()
    }

    /// Visits the offset of every child swip (the buffer manager's child iterator).
    pub(crate) fn visit_children(page: PageView<'_>, visit: &mut dyn FnMut(usize) -> bool) {
        let node = Node::new(page);
        if node.is_leaf() {
            return;
        }
        for index in 0..=node.count() {
            if !visit(node.child_offset(index)) {
                return;
            }
        }
    }

    /// Checks everything a node's readers and writers rely on: slot count, heap bounds and
    /// space accounting (so a write never overflows the page), fences and keys inside the page
    /// and within the size limits, keys ascending and strictly between the fences, head
    /// offset and heads, inner swips aligned, level in range and matching the page type.
    /// Applied to every node read from disk (with [`Node::check_on_disk`]) and by the
    /// integrity check; a node that passes can be searched, changed and split safely.
    pub(crate) fn check(&self) -> Result<(), String> {
        let len = self.page.len();
        let leaf = self.is_leaf();
        let count = usize::from(self.page.u16(COUNT));
        if count > self.max_slots() {
            return Err(format!("slot count {count} exceeds the page"));
        }
        let level = self.level();
        if level > MAX_LEVEL {
            return Err(format!("level {level} exceeds {MAX_LEVEL}"));
        }
        let page_type = crate::io::page::page_type(self.page.all());
        if page_type != Some(self.page_type()) {
            return Err(format!(
                "page type {page_type:?} does not match level {level}"
            ));
        }
        let heap = self.heap_start();
        if heap > len || heap < SLOTS + count * SLOT_SIZE || (!leaf && !heap.is_multiple_of(8)) {
            return Err(format!("heap start {heap} out of range"));
        }
        let max_key = max_key_size(len);
        let mut live = 0usize;
        for at in [LOWER_FENCE, UPPER_FENCE] {
            let fence_len = self.page.u16(at + 2);
            if fence_len == NO_FENCE {
                continue;
            }
            let (offset, fence_len) = (usize::from(self.page.u16(at)), usize::from(fence_len));
            let placed = fence_len == 0 || (offset >= heap && offset + fence_len <= len);
            if !placed || fence_len > max_key {
                return Err("fence key outside the heap or too long".into());
            }
            live += heap_len(leaf, fence_len);
        }
        if let (Some(lower), Some(upper)) = (self.lower_fence(), self.upper_fence()) {
            if lower >= upper {
                return Err("lower fence not below the upper fence".into());
            }
        }
        // Shorter is fine (every key has that prefix too): pages written before head
        // offsets existed say 0.
        if self.head_offset() > self.widest_head_offset() {
            return Err("head offset beyond the prefix the keys share".into());
        }
        let max_value = if leaf { max_value_size(len) } else { SWIP_SIZE };
        for index in 0..count {
            let (key_len, value_len) = (self.key_len(index), self.value_len(index));
            if key_len > max_key || value_len > max_value || (!leaf && value_len != SWIP_SIZE) {
                return Err(format!("entry {index} exceeds the size limits"));
            }
            let heap_bytes = self.entry_size(index) - SLOT_SIZE;
            let offset = self.key_offset(index);
            if heap_bytes > 0 && (offset < heap || offset + heap_bytes > len) {
                return Err(format!("entry {index} outside the heap"));
            }
            live += heap_bytes;
            if self.head(index) != key_head(self.key(index), self.head_offset()) {
                return Err(format!("entry {index} has a wrong key head"));
            }
            if !leaf && !self.child_offset(index).is_multiple_of(8) {
                return Err(format!("inner entry {index} has a misaligned swip"));
            }
            if index > 0 && self.key(index - 1) >= self.key(index) {
                return Err(format!("keys {} and {index} out of order", index - 1));
            }
        }
        // Writers trust the accounting (compaction must reclaim exactly what it promises), so
        // live bytes and garbage must add up to the heap exactly.
        let garbage = self.page.u32(GARBAGE) as usize;
        if live.checked_add(garbage) != Some(len - heap) {
            return Err(format!(
                "heap of {} bytes holds {live} live and {garbage} dead bytes",
                len - heap
            ));
        }
        // Every heap byte belongs to at most one key, value or fence: entries that share
        // bytes would read as pairs that were never written.
        let mut extents: Vec<(usize, usize)> = (0..count)
            .map(|index| (self.key_offset(index), self.entry_size(index) - SLOT_SIZE))
            .chain([LOWER_FENCE, UPPER_FENCE].into_iter().filter_map(|at| {
                let fence_len = self.page.u16(at + 2);
                (fence_len != NO_FENCE).then(|| {
                    (
                        usize::from(self.page.u16(at)),
                        heap_len(leaf, fence_len.into()),
                    )
                })
            }))
            .filter(|&(_, extent_len)| extent_len > 0)
            .collect();
        extents.sort_unstable();
        if extents
            .windows(2)
            .any(|pair| pair[0].0 + pair[0].1 > pair[1].0)
        {
            return Err("entries overlap in the heap".into());
        }
        if count > 0 {
            if let Some(lower) = self.lower_fence() {
                if self.key(0) <= lower {
                    return Err("first key not above the lower fence".into());
                }
            }
            if let Some(upper) = self.upper_fence() {
                if self.key(count - 1) > upper {
                    return Err("last key above the upper fence".into());
                }
            }
        }
        Ok(())
    }

    /// [`check`](Self::check) for a page image as it is on disk: every child reference of an
    /// inner node is a page id (a frame index means the image was never sealed by leankv).
    pub(crate) fn check_on_disk(&self) -> Result<(), String> {
        self.check()?;
        if self.is_leaf() {
            return Ok(());
        }
        for index in 0..=self.count() {
            if !matches!(
                Swip::decode(self.child_word(index), 0),
                Some(SwipTarget::Page(_))
            ) {
                return Err(format!("child {index} is not a page id"));
            }
        }
        Ok(())
    }

    /// Checks that this node can be a tree's root: a B-tree node (checked on its own when it
    /// was read) whose key range is unbounded.
    pub(crate) fn check_as_root(&self) -> Result<(), String> {
        if crate::io::page::page_type(self.page.all()) != Some(self.page_type()) {
            return Err("not a B-tree node".into());
        }
        if self.lower_fence().is_some() || self.upper_fence().is_some() {
            return Err("a tree root with fence keys (a page of another tree?)".into());
        }
        Ok(())
    }

    /// Checks that this node, met through the child swip at byte `offset` of `parent`, is the
    /// node the parent routes to there: one level below it, with fences equal to the
    /// separators around the swip (the parent's own fences at the ends). Together with the
    /// check of each node on its own, this keeps every walk down the tree and along its leaves
    /// moving forward, whatever a page on disk says.
    pub(crate) fn check_as_child_of(&self, parent: &Node<'_>, offset: usize) -> Result<(), String> {
        if crate::io::page::page_type(self.page.all()) != Some(self.page_type()) {
            return Err("not a B-tree node".into());
        }
        if parent.is_leaf() || self.level() + 1 != parent.level() {
            return Err(format!(
                "level {} below a parent of level {}",
                self.level(),
                parent.level()
            ));
        }
        let count = parent.count();
        let Some(index) = (0..=count).find(|&index| parent.child_offset(index) == offset) else {
            return Err("its parent has no child reference there".into());
        };
        let lower = match index {
            0 => parent.lower_fence(),
            _ => Some(parent.key(index - 1)),
        };
        let upper = match index {
            _ if index == count => parent.upper_fence(),
            _ => Some(parent.key(index)),
        };
        if self.lower_fence() != lower || self.upper_fence() != upper {
            return Err("fence keys differ from the parent's separators".into());
        }
        Ok(())
    }
}

/// Write access to a node (exclusive latch held, or a private buffer).
pub(crate) struct NodeMut<'a> {
    page: PageMut<'a>,
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

    /// Sets the head offset and recomputes every head (slots only; the heap is untouched).
    fn set_head_offset(&mut self, offset: usize) {
        self.page.set_u16(HEAD_OFFSET, offset as u16);
        for index in 0..self.view().count() {
            let head = key_head(self.view().key(index), offset);
            self.page.set_u16(SLOTS + index * SLOT_SIZE + 6, head);
        }
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
        let view = self.view();
        let leaf = view.is_leaf();
        let count = view.count();
        debug_assert!(index <= count);
        debug_assert!(leaf || value.len() == SWIP_SIZE);
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
        self.page.set_u16(slot + 4, value.len() as u16);
        let head = key_head(key, self.view().head_offset());
        self.page.set_u16(slot + 6, head);
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
    }

    /// Overwrites the value of leaf entry `index` with one of the same length.
    pub(crate) fn overwrite_value(&mut self, index: usize, value: &[u8]) {
        let view = self.view();
        debug_assert_eq!(view.value_len(index), value.len());
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
        entries: impl Iterator<Item = (&'k [u8], &'k [u8])>,
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
    }

    /// A page image of `len` bytes holding a node with these contents, its head offset as
    /// wide as the keys allow.
    fn build<'k>(
        len: usize,
        level: u16,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        upper_child: u64,
        entries: impl Iterator<Item = (&'k [u8], &'k [u8])>,
    ) -> Vec<u8> {
        let mut scratch = vec![0u8; len];
        let mut fresh = NodeMut::new(PageMut::from_slice(&mut scratch));
        fresh.init(level, lower, upper);
        fresh.set_upper_child(upper_child);
        for (index, (key, value)) in entries.enumerate() {
            fresh.insert_at(index, key, value);
        }
        let offset = fresh.view().widest_head_offset();
        fresh.set_head_offset(offset);
        scratch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn leaf(page: &mut [u8]) -> NodeMut<'_> {
        let mut node = NodeMut::new(PageMut::from_slice(page));
        node.init(0, None, None);
        node
    }

    #[test]
    fn inserts_keep_order_and_search_finds_them() {
        let mut page = vec![0u8; 4096];
        let mut node = leaf(&mut page);
        for key in [&b"m"[..], b"a", b"", b"zz", b"ma", b"a\0"] {
            let (index, found) = node.view().lower_bound(key);
            assert!(!found);
            node.insert_at(index, key, key);
        }
        let view = node.view();
        let keys: Vec<_> = (0..view.count()).map(|i| view.key(i)).collect();
        assert_eq!(keys, vec![&b""[..], b"a", b"a\0", b"m", b"ma", b"zz"]);
        assert_eq!(view.lower_bound(b"ma"), (4, true));
        assert_eq!(view.lower_bound(b"b"), (3, false));
        assert_eq!(view.upper_bound(b"a"), 2);
        assert_eq!(view.value(4), b"ma");
        view.check().unwrap();
    }

    #[test]
    fn compaction_reclaims_removed_entries() {
        let mut page = vec![0u8; 4096];
        let mut node = leaf(&mut page);
        let value = [7u8; 100];
        let size = entry_size(true, 4, value.len());
        let mut inserted = 0u32;
        while node.view().fits(size) {
            node.insert_at(inserted as usize, &inserted.to_be_bytes(), &value);
            inserted += 1;
        }
        let removed = inserted / 2;
        for index in 0..removed as usize {
            node.remove_at(index); // every other entry
        }
        assert!(
            node.view().free_space() < removed as usize * size / 2,
            "fragmented"
        );
        for key in inserted..inserted + removed {
            assert!(node.view().fits(size));
            let index = node.view().lower_bound(&key.to_be_bytes()).0;
            node.insert_at(index, &key.to_be_bytes(), &value);
        }
        assert_eq!(node.view().count(), inserted as usize);
        node.view().check().unwrap();
    }

    #[test]
    fn inner_swips_are_aligned_and_visited() {
        let mut page = vec![0u8; 4096];
        let mut node = NodeMut::new(PageMut::from_slice(&mut page));
        node.init(1, Some(b"a"), Some(b"z"));
        node.set_upper_child(99);
        for (i, key) in [&b"c"[..], b"bbb", b"f", b"ee"].iter().enumerate() {
            let index = node.view().lower_bound(key).0;
            node.insert_at(index, key, &(i as u64 + 1).to_le_bytes());
        }
        let view = node.view();
        view.check().unwrap();
        let mut offsets = Vec::new();
        Node::visit_children(PageView::from_slice(&page), &mut |offset| {
            offsets.push(offset);
            true
        });
        let view = Node::new(PageView::from_slice(&page));
        let words: Vec<u64> = offsets.iter().map(|&o| view.page.u64(o)).collect();
        assert_eq!(words, vec![2, 1, 4, 3, 99]);
        assert!(offsets.iter().all(|o| o % 8 == 0));
    }

    #[test]
    fn torn_bytes_never_lead_outside_the_page() {
        let mut page = vec![0xFFu8; 4096];
        let view = Node::new(PageView::from_slice(&page));
        let _ = view.lower_bound(b"key");
        let _ = view.upper_fence();
        assert!(view.check().is_err());
        Node::visit_children(PageView::from_slice(&page), &mut |_| true);
        page.fill(0x41);
        let view = Node::new(PageView::from_slice(&page));
        let _ = view.lower_bound(b"AAAA");
        let _ = (0..view.count())
            .map(|i| view.value(i).len())
            .sum::<usize>();
    }

    proptest! {
        #[test]
        fn key_comparison_is_bytewise(
            a in proptest::collection::vec(0u8..3, 0..20),
            b in proptest::collection::vec(0u8..3, 0..20),
        ) {
            prop_assert_eq!(compare_keys(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare_keys(&a, &a), Ordering::Equal);
        }

        /// The node behaves like a sorted map for any sequence of inserts, removes and
        /// compactions, and searches for any key (with or without the prefix all keys share,
        /// which the heads skip) land where the map says.
        #[test]
        fn node_matches_btreemap(
            prefix in proptest::collection::vec(any::<u8>(), 0..5),
            fenced in any::<bool>(),
            ops in proptest::collection::vec(
                (0u8..10, proptest::collection::vec(0u8..4, 0..6), proptest::collection::vec(any::<u8>(), 0..40)),
                1..200,
            ),
            probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..7), 0..20),
            written_before_head_offsets in any::<bool>(),
        ) {
            let mut page = vec![0u8; 4096];
            let mut node = NodeMut::new(PageMut::from_slice(&mut page));
            // Fences `prefix` and `prefix ff ff`: every key `prefix k` with `k` non-empty and
            // below `ff` lies between them. Unfenced, the keys still share the prefix.
            let upper = [&prefix[..], &[0xff, 0xff]].concat();
            let fenced = fenced && !prefix.is_empty();
            if fenced {
                node.init(0, Some(&prefix), Some(&upper));
            } else {
                node.init(0, None, None);
            }
            prop_assert_eq!(node.view().head_offset(), if fenced { prefix.len() } else { 0 });
            if written_before_head_offsets {
                node.page.set_u16(HEAD_OFFSET, 0);
            }
            let mut model = BTreeMap::new();
            for (op, suffix, value) in ops {
                if op == 0 {
                    node.compact();
                    node.view().check().map_err(TestCaseError::fail)?;
                    continue;
                }
                let insert = op < 6;
                if fenced && suffix.is_empty() {
                    continue; // the lower fence itself is not in the node's range
                }
                let key = [&prefix[..], &suffix].concat();
                let (index, found) = node.view().lower_bound(&key);
                if insert {
                    if found {
                        node.remove_at(index);
                    }
                    if node.view().fits(entry_size(true, key.len(), value.len())) {
                        node.insert_at(index, &key, &value);
                        model.insert(key, value);
                    } else {
                        model.remove(&key);
                    }
                } else if found {
                    node.remove_at(index);
                    model.remove(&key);
                }
                node.view().check().map_err(TestCaseError::fail)?;
            }
            let view = node.view();
            let entries: Vec<(Vec<u8>, Vec<u8>)> =
                view.entries(0..view.count()).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            for probe in probes.iter().flat_map(|p| [p.clone(), [&prefix[..], p].concat()]) {
                let below = model.range(..probe.clone()).count();
                let expected = (below, model.contains_key(&probe));
                prop_assert_eq!(view.lower_bound(&probe), expected, "probe {:?}", probe);
            }
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            prop_assert_eq!(entries, expected);
        }
    }
}
