//! Where to split a full node so that the entry that did not fit fits afterwards.
//!
//! A split is planned for one incoming entry: the leaf entry an insert could not place, or the
//! separator a child split pushes into its parent. Every candidate split point is sized
//! exactly, with both halves' new fences and the incoming entry on the side it will land on,
//! and only candidates where both halves fit are taken. So one split always makes room, and the
//! insert that asked for it completes after at most one split per level (unless other threads
//! fill the node again first, which is their progress, not a loop).
//!
//! # Why a split point always exists
//!
//! Let `P` be the page size, `K = P / 16` the longest key, `V = P / 4` the longest value,
//! `E = 10 + K + V` the largest leaf entry (slot, key, value) and `H` the node header (120
//! bytes). A half carries the header and at most two fences of at most `K` bytes each (inner
//! fences rounded up to 8), so `C = P - H - 2K` bytes are always left for its entries. Take the
//! entries in key order with the incoming one among them; their sizes sum to at most
//! `S <= P - H + E` (the node held all but the incoming one). Cut after the longest prefix of
//! at most `C` bytes: the prefix fits, and since adding the next entry (at most `E`) would
//! exceed `C`, the rest holds less than `S - C + E = 2K + 2E` bytes, which is at most `C`
//! whenever `4K + 2E + H <= P`, i.e. `P/8 >= 20 + H`: for every page size of 2 KiB and more
//! (leankv accepts 4 KiB to 64 KiB). Inner entries are smaller (`10 + K + 8`), so inner nodes split with
//! room to spare. `limits_admit_a_split_for_every_page_size` checks the bound, and
//! `every_worst_case_node_has_a_split` tries the worst cases.
//!
//! Leaves may also cut at the incoming key itself (it becomes the separator and the left node's
//! last key), which the argument above needs; inner nodes push an existing key up.

use super::node::{heap_len, Node, SLOTS};

/// Keys in a row inserted each right after the one before that make a leaf's split cut
/// where they arrive (see [`plan`]).
pub(crate) const IN_ORDER_RUN: usize = 16;

/// The entry a split must make room for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Incoming<'k> {
    /// Its key (for a parent: the separator coming up from the child).
    pub(crate) key: &'k [u8],
    /// Its size as `entry_size` counts it.
    pub(crate) size: usize,
}

/// Which key separates the two halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Separator {
    /// The key of entry `index`: in a leaf the left node's last key; in an inner node the key
    /// that moves up to the parent (its child becomes the left node's upper child).
    Existing(usize),
    /// The incoming key (leaves only): the left node takes the entries below it and, once the
    /// caller retries, the incoming entry as its last.
    Incoming,
}

/// A split point: the left node takes entries `0..left_count`, the right node the rest after
/// the separator (an inner separator itself goes to neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitPlan {
    pub(crate) left_count: usize,
    pub(crate) separator: Separator,
}

impl SplitPlan {
    /// First entry of the right node.
    pub(crate) fn right_start(&self, leaf: bool) -> usize {
        match self.separator {
            Separator::Existing(index) if !leaf => index + 1,
            _ => self.left_count,
        }
    }

    /// The separator key.
    pub(crate) fn separator_key<'a>(&self, node: &Node<'a>, incoming: &'a [u8]) -> &'a [u8] {
        match self.separator {
            Separator::Existing(index) => node.key(index),
            Separator::Incoming => incoming,
        }
    }
}

/// Whether `incoming` fits into `node` without a split (after compaction, and in place of the
/// entry with its key, if any).
pub(crate) fn has_room(node: &Node<'_>, incoming: Incoming<'_>) -> bool {
    has_room_at(node, node.lower_bound(incoming.key), incoming.size)
}

/// [`has_room`] for an entry of `size` bytes whose position in `node` (`lower_bound` of its
/// key) the caller has already searched.
pub(crate) fn has_room_at(node: &Node<'_>, (index, found): (usize, bool), size: usize) -> bool {
    let replaced = if found { node.entry_size(index) } else { 0 };
    node.reclaimable_space() + replaced >= size
}

/// Plans the split of `node` for `incoming`; `None` only if no split point lets both halves
/// fit (impossible for entries within the size limits, see the module notes: a caller treats
/// it as corruption). A leaf that `incoming` extends at its upper end (ascending inserts) keeps
/// as much as fits on the left, so such loads leave full leaves; otherwise the halves are
/// balanced by bytes.
/// `in_order_before(slot)`: how many keys in a row arrived in order into the node, the last
/// of them right before `slot` (the frame's hint, `Frame::in_order_before`).
pub(crate) fn plan(
    node: &Node<'_>,
    incoming: Incoming<'_>,
    in_order_before: impl Fn(usize) -> usize,
) -> Option<SplitPlan> {
    let leaf = node.is_leaf();
    let count = node.count();
    let page_size = node.page_len();
    let (position, replaces) = node.lower_bound(incoming.key);
    // Bytes of entries `0..i` (prefix[i]), with the entry the incoming one replaces counted as 0.
    let mut prefix = Vec::with_capacity(count + 1);
    prefix.push(0usize);
    for index in 0..count {
        let size = if replaces && index == position {
            0
        } else {
            node.entry_size(index)
        };
        prefix.push(prefix[index] + size);
    }
    let entries = |range: std::ops::Range<usize>| prefix[range.end] - prefix[range.start];
    let lower = node.lower_fence();
    let upper = node.upper_fence();
    let half = |lower: Option<&[u8]>, upper: Option<&[u8]>| {
        SLOTS
            + lower.map_or(0, |fence| heap_len(leaf, fence.len()))
            + upper.map_or(0, |fence| heap_len(leaf, fence.len()))
    };
    // A separator must leave the right node a non-empty key range: below the upper fence.
    let usable = |separator: &[u8]| upper.is_none_or(|upper| separator < upper);
    let appending = leaf && !replaces && position == count;
    // Keys arriving in order into the middle of a leaf (a run of inserts, each right after
    // the one before, that the incoming key continues): an append point inside the tree,
    // such as each TPC-C district's next order lines. A cut where they arrive leaves the
    // keys before it in a full node that no insert will touch again, and the keys after it
    // in one the run no longer enters; halving would leave one of them half empty for good
    // (the keys after the point being the next group's first ones, every time). Only for a
    // long run (splits carry it on, `Frame::insert_run`): a few keys inserted together at
    // random places (a record's fields) must not cut nodes anywhere.
    let in_order = leaf && !replaces && !appending && in_order_before(position) >= IN_ORDER_RUN;

    let mut best: Option<(SplitPlan, usize)> = None;
    let mut consider = |plan: SplitPlan, left: usize, right: usize| {
        if left > page_size || right > page_size {
            return;
        }
        // Appends keep the most on the left; keys in order cut where they arrive (below);
        // everything else the smallest larger half.
        let score = if appending {
            page_size - plan.left_count
        } else if in_order {
            match plan.separator {
                // The key after them goes left as the separator: the keys to come sort
                // before it, so they join those before them instead of filling the room
                // beside the keys after it (whose node no longer takes them).
                Separator::Existing(index) if index == position => 0,
                // At the separator's upper fence (it cannot separate): cut before it.
                Separator::Incoming => 1,
                _ => 2 + 2 * plan.left_count.abs_diff(position),
            }
        } else {
            left.max(right)
        };
        if best.is_none_or(|(_, best_score)| score < best_score) {
            best = Some((plan, score));
        }
    };
    for index in 0..count {
        let separator = node.key(index);
        if !usable(separator) {
            continue;
        }
        let (left_range, right_range) = if leaf {
            (0..index + 1, index + 1..count)
        } else {
            (0..index, index + 1..count)
        };
        let mut left = half(lower, Some(separator)) + entries(left_range.clone());
        let mut right = half(Some(separator), upper) + entries(right_range);
        // Leaves route keys up to and including the separator left; an inner separator is
        // never equal to an incoming one.
        if incoming.key <= separator {
            left += incoming.size;
        } else {
            right += incoming.size;
        }
        let plan = SplitPlan {
            left_count: left_range.end,
            separator: Separator::Existing(index),
        };
        consider(plan, left, right);
    }
    if leaf && !replaces && usable(incoming.key) {
        let left = half(lower, Some(incoming.key)) + entries(0..position) + incoming.size;
        let right = half(Some(incoming.key), upper) + entries(position..count);
        let plan = SplitPlan {
            left_count: position,
            separator: Separator::Incoming,
        };
        consider(plan, left, right);
    }
    let (plan, _) = best?;
    debug_assert!(plan.left_count <= count);
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::node::{entry_size, max_key_size, max_value_size, NodeMut, Stored};
    use crate::buffer::{PageMut, PageView};

    const PAGE_SIZES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

    fn largest_leaf_entry(page_size: usize) -> usize {
        entry_size(true, max_key_size(page_size), max_value_size(page_size))
    }

    #[test]
    fn limits_admit_a_split_for_every_page_size() {
        for page_size in PAGE_SIZES {
            let key = max_key_size(page_size);
            let largest = largest_leaf_entry(page_size);
            let room = page_size - SLOTS - 2 * key;
            let most = page_size - SLOTS + largest;
            assert!(largest <= room, "{page_size}: one entry must fit a half");
            assert!(
                most - room + largest <= room,
                "{page_size}: the rest must fit"
            );
        }
    }

    fn leaf<'a>(page: &'a mut [u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> NodeMut<'a> {
        let mut node = NodeMut::new(PageMut::from_slice(page));
        node.init(0, lower, upper);
        node
    }

    /// Checks that the plan's halves really fit, with and without keys arriving in order
    /// before it: builds them with the incoming entry.
    fn check_plan(node: &Node<'_>, key: &[u8], value_len: usize) {
        check_plan_after(node, key, value_len, 0);
        check_plan_after(node, key, value_len, IN_ORDER_RUN);
    }

    fn check_plan_after(node: &Node<'_>, key: &[u8], value_len: usize, run: usize) {
        let size = entry_size(true, key.len(), value_len);
        let plan = plan(node, Incoming { key, size }, |_| run).expect("a split point");
        let separator = plan.separator_key(node, key);
        let count = node.count();
        let replaces = node.lower_bound(key).1;
        let value = vec![7u8; value_len];
        let mut halves = [
            (node.lower_fence(), Some(separator), 0..plan.left_count),
            (
                Some(separator),
                node.upper_fence(),
                plan.right_start(true)..count,
            ),
        ]
        .map(|(lower, upper, range)| {
            let mut entries: Vec<(&[u8], Stored)> = node
                .entries(range)
                .filter(|(k, _)| !(replaces && *k == key))
                .collect();
            (lower, upper, std::mem::take(&mut entries))
        });
        let side = if key <= separator { 0 } else { 1 };
        let at = halves[side].2.partition_point(|(k, _)| *k < key);
        halves[side].2.insert(at, (key, Stored::inline(&value)));
        for (lower, upper, entries) in halves {
            let size = Node::size_of(true, lower, upper, entries.iter().copied());
            assert!(size <= node.page_len(), "half of {size} bytes");
        }
    }

    #[test]
    fn every_worst_case_node_has_a_split() {
        for page_size in PAGE_SIZES {
            let key_len = max_key_size(page_size);
            let value_len = max_value_size(page_size);
            let fence = |byte: u8| vec![byte; key_len];
            let (lower, upper) = (fence(0x10), fence(0xf0));
            // Keys of maximal length between the fences, with large values, until full.
            for small_values in [false, true] {
                let mut page = vec![0u8; page_size];
                let mut node = leaf(&mut page, Some(&lower), Some(&upper));
                let mut index = 0u16;
                loop {
                    let mut key = fence(0x20);
                    key[..2].copy_from_slice(&(0x2000 + index * 16).to_be_bytes());
                    let len = if small_values && index % 2 == 1 {
                        1
                    } else {
                        value_len
                    };
                    if !node.view().fits(entry_size(true, key.len(), len)) {
                        break;
                    }
                    node.insert_at(index as usize, &key, &vec![1; len]);
                    index += 1;
                }
                let view = node.view();
                // Incoming maximal entries before, between and after every key, and
                // replacements of every key with a maximal value.
                let mut probes = vec![vec![0x11; key_len], vec![0xef; key_len]];
                for i in 0..view.count() {
                    let mut between = view.key(i).to_vec();
                    between[key_len - 1] = 0x21;
                    probes.push(between);
                    probes.push(view.key(i).to_vec());
                }
                for probe in probes {
                    check_plan(&view, &probe, value_len);
                }
            }
        }
    }

    #[test]
    fn a_key_equal_to_the_upper_fence_never_separates() {
        let mut page = vec![0u8; 4096];
        let upper = 300u32.to_be_bytes();
        let mut node = leaf(&mut page, None, Some(&upper));
        for (index, n) in [100u32, 200, 250, 300].into_iter().enumerate() {
            node.insert_at(index, &n.to_be_bytes(), &[1; 700]);
        }
        let view = Node::new(PageView::from_slice(&page));
        for incoming in [1u32, 150, 250, 299, 300] {
            let key = incoming.to_be_bytes();
            let plan = plan(
                &view,
                Incoming {
                    key: &key,
                    size: entry_size(true, 4, max_value_size(4096)),
                },
                |_| IN_ORDER_RUN,
            )
            .expect("a split point");
            assert!(
                plan.separator_key(&view, &key) < &upper[..],
                "{incoming}: {plan:?}"
            );
        }
    }

    #[test]
    fn appends_keep_the_left_full() {
        let mut page = vec![0u8; 4096];
        let mut node = leaf(&mut page, None, None);
        let mut n = 0u32;
        while node.view().fits(entry_size(true, 4, 100)) {
            node.insert_at(n as usize, &n.to_be_bytes(), &[1; 100]);
            n += 1;
        }
        let view = node.view();
        let count = view.count();
        let append = |key: &[u8], run| {
            plan(
                &view,
                Incoming {
                    key,
                    size: entry_size(true, key.len(), 100),
                },
                |_| run,
            )
            .unwrap()
        };
        // An append keeps every entry that fits with its new fence on the left...
        let plan = append(&(n + 1).to_be_bytes(), 0);
        assert!(plan.left_count >= count - 1, "{plan:?} of {count}");
        // ...an insert in the middle splits by size...
        let key = [0, 0, 0, 5, 0];
        let middle = append(&key, 0);
        assert!(
            middle.left_count.abs_diff(count / 2) <= 1,
            "{middle:?} of {count}"
        );
        // ...and so do too few keys in a row arriving in order...
        let late = count * 3 / 4;
        let mut later = [0; 5];
        later[..4].copy_from_slice(&(late as u32).to_be_bytes());
        let few = append(&later, IN_ORDER_RUN - 1);
        assert!(
            few.left_count.abs_diff(count / 2) <= 1,
            "{few:?} of {count}"
        );
        // ...but a run of keys arriving in order is cut where they arrive, the key after them
        // going left as the separator (the keys to come sort before it), wherever the run is:
        // the keys after it stay behind in a node that the run no longer enters.
        for (after, key) in [(late, later), (5, key)] {
            assert_eq!(
                append(&key, IN_ORDER_RUN),
                SplitPlan {
                    left_count: after + 2,
                    separator: Separator::Existing(after + 1)
                },
                "a run arriving after key {after} of {count}"
            );
        }
        check_plan(&view, &(n + 1).to_be_bytes(), 100);
        check_plan(&view, &key, 100);
        check_plan(&view, &later, 100);
    }
}
