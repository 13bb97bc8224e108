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
//! | 56..120| hints: 16 key heads sampled evenly from the slots (see below)         |
//! | 120..  | slots, 10 bytes each: key offset u16, key length u16, value length   |
//! |        | u16, key head u32                                                    |
//!
//! The top bit of a leaf slot's value length (`BLOB_FLAG`) marks a value stored outside the
//! leaf: the leaf holds a reference to it (see `crate::blob`). Leaf values are at most a
//! quarter of a page long, so the bit is free.
//!
//! Keys are ordered bytewise; every key `k` of the node satisfies `lower < k <= upper`. In inner
//! nodes the value of slot `i` is the 8-byte swip of the child holding keys in
//! `(key[i-1], key[i]]`. Every heap allocation of an inner node (keys and fences) is rounded up
//! to 8 bytes, so the heap start stays 8-aligned and each swip, stored right after its padded
//! key, can be read and written atomically; space accounting stays exact.
//!
//! The key head is the four key bytes after the head offset, big endian, zero padded. The head
//! offset is the length of a prefix all keys of the node share (the head prefix: the first
//! key's, or in an empty node the lower fence's, first bytes), so the bytes after it are the
//! first that can differ, and when two heads differ they order the keys without a heap access
//! during binary search. Four bytes (not two) because the keys a node holds are a small slice
//! of the key space only after the prefix: two bytes left ties, each a heap access, in nearly
//! every search of an inner node; on a tie only the bytes after the head are compared. Keys that begin with a common field, such as a table or warehouse
//! number, would otherwise all have one head. A rebuild sets the offset to the prefix the
//! first and last key share (in sorted order, every key shares it); an empty node takes the
//! prefix its fences share (every key between them has it); an insert that breaks the prefix
//! shortens it and recomputes the heads.
//!
//! The hints narrow a search before it touches the slots: in a node of more than 32 entries,
//! hint `i` is the head of slot `(i + 1) * (count / 17)`, so the hints that are below and above
//! a search key's head bound the slots its position can lie in to about a seventeenth of the
//! node, and the binary search starts there (in a node of fewer entries they are zero and
//! unused). An insertion or removal at slot `s` rewrites only the hints that sample slots from
//! `s` on (all of them when the spacing changes), so appending at a leaf's end touches none
//! unless the spacing changes.
//! The 16 hints share a cache line with the node's header; in a 16 KiB leaf of 120-byte
//! values they save about four of the seven slot cache lines a search would touch.
//!
//! Reading ([`Node`]) never panics and never leaves the page, whatever the bytes say (it may be
//! reading a page that is being written; the caller validates afterwards). Writing
//! ([`NodeMut`]) happens under the exclusive latch, on consistent data.

use crate::buffer::{PageMut, PageView, Swip, SwipTarget};
use crate::io::page::{PageType, PAGE_HEADER_SIZE};
use std::cmp::Ordering;

mod read;
mod validate;
mod write;

pub(crate) use read::Node;
pub(crate) use write::NodeMut;

const COUNT: usize = PAGE_HEADER_SIZE;
const LEVEL: usize = 26;
const LOWER_FENCE: usize = 28;
const UPPER_FENCE: usize = 32;
const HEAP_START: usize = 36;
const GARBAGE: usize = 40;
const HEAD_OFFSET: usize = 44;
/// Offset of the upper child's swip in inner nodes.
const UPPER_SWIP: usize = 48;
/// Offset of the hints.
const HINTS: usize = 56;
/// Number of hints.
const HINT_COUNT: usize = 16;
/// Offset of the first slot: the node header ends here.
pub(crate) const SLOTS: usize = HINTS + HINT_COUNT * HEAD_LEN;
const SLOT_SIZE: usize = 10;
/// Offset of the key head in a slot.
const SLOT_HEAD: usize = 6;
const NO_FENCE: u16 = u16::MAX;
/// Bytes an inner entry's value (a swip) takes.
const SWIP_SIZE: usize = 8;
/// Flag in a leaf slot's value length: the value is a large-value reference.
const BLOB_FLAG: u16 = 1 << 15;

/// A leaf value as a leaf stores it: its bytes, or (`blob`) a reference to a large value
/// stored outside the leaf. Inner entries' values (swips) are never blobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) blob: bool,
}

impl<'a> Stored<'a> {
    pub(crate) fn inline(bytes: &'a [u8]) -> Self {
        Stored { bytes, blob: false }
    }

    /// The large value this references, if it is one. Stored values come from checked leaves
    /// (a reference in one was decoded by the node check), so a malformed one is not expected.
    pub(crate) fn large_value(self, page_size: usize) -> Option<crate::blob::BlobRef> {
        if !self.blob {
            return None;
        }
        let blob = crate::blob::BlobRef::decode(self.bytes, page_size);
        debug_assert!(blob.is_ok(), "a checked leaf holds a malformed reference");
        blob.ok()
    }
}

/// Which keys a descent is after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The node that may hold `key` itself.
    AtLeast,
    /// The node that holds the keys just above `key`.
    Above,
    /// The last node of its level (`key` is ignored): where a backward scan starts.
    Last,
}

/// Bytes a key head holds.
const HEAD_LEN: usize = 4;

/// Slots between two hints in a node of `count` entries, if it keeps hints.
#[inline]
fn hint_spacing(count: usize) -> Option<usize> {
    (count > 2 * HINT_COUNT).then_some(count / (HINT_COUNT + 1))
}

/// The four bytes of `key` at `offset`, big endian, zero padded.
#[inline]
fn key_head(key: &[u8], offset: usize) -> u32 {
    match key.get(offset..offset + HEAD_LEN) {
        Some(bytes) => u32::from_be_bytes(bytes.try_into().expect("four bytes")),
        // Byte by byte: a copy of the (at most three) remaining bytes would call the C
        // library's `memmove`, for keys as short as TPC-C's stock keys at every search.
        None => key
            .get(offset..)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .fold(0, |head, (i, &byte)| head | u32::from(byte) << (24 - 8 * i)),
    }
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

/// Longest leaf value a node of `page_size` bytes holds (longer ones live outside the leaf).
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

    /// Hints are brought up to date only from the slot an insertion or removal changed on:
    /// entries coming and going at the end, the front and the middle of a node with hints
    /// (past 32 entries, across changes of their spacing) leave them as a full refresh would.
    #[test]
    fn hints_stay_exact_as_entries_come_and_go_anywhere() {
        // Small enough for Miri, which runs this test too: 34 entries give the first hints
        // (spacing 2, sampling slots 2 to 32), 40 to 41 keep that spacing.
        fn assert_hints_exact(node: &NodeMut<'_>) {
            let view = node.view();
            assert_eq!(
                view.hints(),
                view.sampled_hints(),
                "after a change at {} entries",
                view.count()
            );
        }
        let mut page = vec![0u8; 4096];
        let mut node = leaf(&mut page);
        let key = |n: u32| (n * 4).to_be_bytes();
        for n in 0..40 {
            node.insert_at(n as usize, &key(n), b"value");
            assert_hints_exact(&node);
        }
        assert_eq!(hint_spacing(node.view().count()), Some(2));
        for n in 0..12u32 {
            // Between existing keys: at the front, the middle and near the end in turn.
            let turn = n as usize % 3;
            let between = [n * 4 + 1, 80 + n * 4 + 1, 157 - n * 4][turn];
            let index = node.view().lower_bound(&between.to_be_bytes()).0;
            node.insert_at(index, &between.to_be_bytes(), b"v");
            assert_hints_exact(&node);
            let count = node.view().count();
            node.remove_at([0, count / 2, count - 1][turn]);
            assert_hints_exact(&node);
        }
        node.view().check().unwrap();
        while node.view().count() > 0 {
            node.remove_at(node.view().count() / 3);
            assert_hints_exact(&node);
        }
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
        /// which the heads skip) land where the map says; its space accounting gives the
        /// entries' size without visiting them.
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
                let view = node.view();
                let (lower, upper) = (view.lower_fence(), view.upper_fence());
                prop_assert_eq!(
                    Node::size_of(true, lower, upper, std::iter::empty()) + view.entries_size(),
                    Node::size_of(true, lower, upper, view.entries(0..view.count())),
                    "entries_size disagrees with the entries"
                );
            }
            let view = node.view();
            let entries: Vec<(Vec<u8>, Vec<u8>)> =
                view.entries(0..view.count()).map(|(k, v)| (k.to_vec(), v.bytes.to_vec())).collect();
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
