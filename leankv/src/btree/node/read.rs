//! Reading a node: slots, keys, values, fences and child swips, and the binary search over
//! key heads.
//!
//! Invariant: no read leaves the page or panics, whatever the bytes say: a reader may be
//! looking at a page that is being written and validates its latch version afterwards.

use super::*;

/// Read access to a node.
#[derive(Clone, Copy)]
pub(crate) struct Node<'a> {
    pub(super) page: PageView<'a>,
}

impl<'a> Node<'a> {
    pub(crate) fn new(page: PageView<'a>) -> Self {
        Node { page }
    }

    #[inline]
    pub(super) fn max_slots(&self) -> usize {
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

    #[inline]
    fn slot(&self, index: usize) -> usize {
        SLOTS + index * SLOT_SIZE
    }

    #[inline]
    pub(super) fn key_offset(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index)))
    }

    #[inline]
    pub(super) fn key_len(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index) + 2))
    }

    #[inline]
    pub(super) fn value_len(&self, index: usize) -> usize {
        usize::from(self.page.u16(self.slot(index) + 4) & !BLOB_FLAG)
    }

    /// Whether leaf entry `index` holds a large-value reference rather than its value.
    #[inline]
    pub(crate) fn is_blob(&self, index: usize) -> bool {
        self.page.u16(self.slot(index) + 4) & BLOB_FLAG != 0
    }

    /// Leaf entry `index`'s value as stored.
    #[inline]
    pub(crate) fn stored(&self, index: usize) -> Stored<'a> {
        Stored {
            bytes: self.value(index),
            blob: self.is_blob(index),
        }
    }

    #[inline]
    pub(super) fn head(&self, index: usize) -> u32 {
        self.page.u32(self.slot(index) + SLOT_HEAD)
    }

    /// The hints as stored (zero in a node without hints).
    #[inline]
    pub(super) fn hints(&self) -> [u32; HINT_COUNT] {
        let bytes: [u8; HINT_COUNT * HEAD_LEN] = self.page.read(HINTS);
        std::array::from_fn(|i| {
            u32::from_le_bytes(
                bytes[i * HEAD_LEN..][..HEAD_LEN]
                    .try_into()
                    .expect("four bytes"),
            )
        })
    }

    /// The hints the slots call for: the head of slot `(i + 1) * spacing` for hint `i`, all
    /// zero in a node too small for hints (see the module notes).
    pub(super) fn sampled_hints(&self) -> [u32; HINT_COUNT] {
        match hint_spacing(self.count()) {
            Some(spacing) => std::array::from_fn(|i| self.head((i + 1) * spacing)),
            None => [0; HINT_COUNT],
        }
    }

    /// The slots `low..high` that hold the position of a key with `head` among `count`
    /// entries, from the hints: the entries from the last hint below `head` to the first hint
    /// above it. Whatever the hint bytes say, `low <= high <= count`.
    #[inline]
    fn hinted_range(&self, head: u32, count: usize) -> (usize, usize) {
        let Some(spacing) = hint_spacing(count) else {
            return (0, count);
        };
        let hints = self.hints();
        // Counting (not searching) compiles to a few vector compares; with sorted hints the
        // counts are the first hint `>= head` and the first `> head`.
        let below = hints.iter().filter(|&&hint| hint < head).count();
        let not_above = hints.iter().filter(|&&hint| hint <= head).count();
        let low = below * spacing;
        let high = if not_above < HINT_COUNT {
            (not_above + 1) * spacing
        } else {
            count
        };
        (low, high)
    }

    /// The hinted range for `head` among `count` entries (see [`Self::hinted_range`]), its
    /// slots loaded into the cache at once: a binary search's first probes fall in different
    /// cache lines of the range, each load waiting for the one before (its address follows
    /// the last comparison). Up to 512 bytes: the hints keep it about a seventeenth of the
    /// node.
    #[inline]
    fn search_range(&self, head: u32, count: usize) -> (usize, usize) {
        let (low, high) = self.hinted_range(head, count);
        if high - low > 64 / SLOT_SIZE {
            self.page
                .prefetch(self.slot(low), ((high - low) * SLOT_SIZE).min(512));
        }
        (low, high)
    }

    /// Starts loading the slots a search for `key` will probe (see [`Self::search_range`]),
    /// for a reader that comes back to search after other work.
    #[inline]
    pub(crate) fn prefetch_search(&self, key: &[u8]) {
        let head = key_head(key, self.head_offset());
        self.search_range(head, self.count());
    }

    #[inline]
    pub(super) fn head_offset(&self) -> usize {
        usize::from(self.page.u16(HEAD_OFFSET))
    }

    /// The prefix every key of the node starts with (see the module notes); empty if the page
    /// is torn or corrupt.
    #[inline]
    pub(super) fn head_prefix(&self) -> &'a [u8] {
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
    pub(super) fn widest_head_offset(&self) -> usize {
        match self.count() {
            0 => fence_prefix_len(self.lower_fence(), self.upper_fence()),
            count => common_prefix_len(self.key(0), self.key(count - 1)),
        }
    }

    #[inline]
    pub(crate) fn key(&self, index: usize) -> &'a [u8] {
        self.page.bytes(self.key_offset(index), self.key_len(index))
    }

    /// Value of a leaf entry (the reference, for a large value: see [`Self::is_blob`]).
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

    #[inline]
    fn fence(&self, at: usize) -> Option<&'a [u8]> {
        let len = self.page.u16(at + 2);
        (len != NO_FENCE).then(|| {
            self.page
                .bytes(usize::from(self.page.u16(at)), usize::from(len))
        })
    }

    #[inline]
    pub(crate) fn lower_fence(&self) -> Option<&'a [u8]> {
        self.fence(LOWER_FENCE)
    }

    #[inline]
    pub(crate) fn upper_fence(&self) -> Option<&'a [u8]> {
        self.fence(UPPER_FENCE)
    }

    /// Order of entry `index` and `key`, which has the node's head prefix and `head`; `known`
    /// is the head offset plus the head's length. Equal heads mean equal bytes up to `known`
    /// (or the shorter key's end), so only the bytes after are compared.
    #[inline]
    fn compare(&self, index: usize, key: &[u8], head: u32, known: usize) -> Ordering {
        match self.head(index).cmp(&head) {
            Ordering::Equal => {
                let stored = self.key(index);
                let skip = known.min(stored.len()).min(key.len());
                compare_keys(&stored[skip..], &key[skip..])
            }
            unequal => unequal,
        }
    }

    /// First index whose key is `>= key`, and whether it is equal.
    #[inline]
    pub(crate) fn lower_bound(&self, key: &[u8]) -> (usize, bool) {
        let count = self.count();
        let head_offset = self.head_offset();
        let head = key_head(key, head_offset);
        let known = head_offset + HEAD_LEN;
        let (mut low, mut high) = self.search_range(head, count);
        let mut found = false;
        while low < high {
            let middle = low + (high - low) / 2;
            match self.compare(middle, key, head, known) {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => {
                    (low, found) = (middle, true);
                    break;
                }
            }
        }
        // Heads order only keys with the node's head prefix, so the result stands only if
        // `key` has it. Every key of the node has it: the prefix is read from the key the
        // search landed on, whose cache line the caller reads next anyway (the value, or the
        // child's swip, follows the key), not from the first key's.
        let source = match count {
            0 => self.lower_fence().unwrap_or_default(),
            _ => self.key(low.min(count - 1)),
        };
        let prefix = source.get(..head_offset).unwrap_or_default();
        match key.get(..prefix.len()) {
            Some(start) if compare_keys(start, prefix).is_eq() => (low, found),
            // Any other key lies before or after every entry.
            _ if key > prefix => (count, false),
            _ => (0, false),
        }
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
            Bound::Last => self.count(),
        }
    }

    /// Whether the keys a search for `key` with `bound` is after lie in this node's range:
    /// `lower < key <= upper` for `AtLeast`, `lower <= key < upper` for `Above` (so the
    /// node's upper fence lies beyond the position and a scan moves forward); for `Last`, that
    /// the node is the last of its level.
    pub(crate) fn covers(&self, key: &[u8], bound: Bound) -> bool {
        let (lower, upper) = (self.lower_fence(), self.upper_fence());
        match bound {
            Bound::Last => upper.is_none(),
            Bound::AtLeast => {
                lower.is_none_or(|lower| lower < key) && upper.is_none_or(|upper| key <= upper)
            }
            Bound::Above => {
                lower.is_none_or(|lower| lower <= key) && upper.is_none_or(|upper| key < upper)
            }
        }
    }

    pub(super) fn heap_start(&self) -> usize {
        self.page.u32(HEAP_START) as usize
    }

    /// Contiguous free bytes between the slots and the heap.
    pub(crate) fn free_space(&self) -> usize {
        self.heap_start()
            .saturating_sub(SLOTS + self.count() * SLOT_SIZE)
    }

    /// The contiguous free bytes between the slots and the heap as (start, length): what a
    /// page image in the log leaves out.
    pub(crate) fn free_gap(&self) -> (usize, usize) {
        let start = (SLOTS + self.count() * SLOT_SIZE).min(self.page.len());
        (start, self.free_space())
    }

    /// Free bytes after compaction.
    pub(crate) fn reclaimable_space(&self) -> usize {
        self.free_space() + self.page.u32(GARBAGE) as usize
    }

    /// Bytes in use (header, slots, live keys, values and fences).
    pub(crate) fn used_space(&self) -> usize {
        self.page.len().saturating_sub(self.reclaimable_space())
    }

    /// Bytes the entries take as [`entry_size`] counts them (slots, keys and values): what
    /// [`Node::size_of`] sums over them, read from the node's space accounting instead of
    /// visiting each entry.
    pub(crate) fn entries_size(&self) -> usize {
        let empty = empty_size(self.is_leaf(), self.lower_fence(), self.upper_fence());
        self.used_space().saturating_sub(empty)
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

    /// The entries `range` as (key, stored value or swip bytes) pairs.
    pub(crate) fn entries(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (&'a [u8], Stored<'a>)> + '_ {
        let leaf = self.is_leaf();
        range.map(move |i| {
            let value = if leaf {
                self.stored(i)
            } else {
                Stored::inline(self.page.bytes(self.child_offset(i), SWIP_SIZE))
            };
            (self.key(i), value)
        })
    }

    /// Bytes a node needs to hold these entries and fences (conservative).
    pub(crate) fn size_of<'k>(
        leaf: bool,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        entries: impl Iterator<Item = (&'k [u8], Stored<'k>)>,
    ) -> usize {
        empty_size(leaf, lower, upper)
            + entries
                .map(|(key, value)| entry_size(leaf, key.len(), value.bytes.len()))
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
}
