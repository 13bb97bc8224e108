//! Replaying leaf operations on page images at recovery (the log's `Put`, `Remove` and `Patch`
//! records, physiological: by key, within one page) and logical node splits (`Split`).
//!
//! Invariant: an image is checked as a node before anything is applied to it, and an operation
//! that does not fit is an error, never a partial write.

use super::node::{entry_size, max_value_size, Node, NodeMut, Stored};
use crate::buffer::{PageMut, PageView, Swip};
use crate::wal::Split;

/// Checks an image from the log as a B-tree node, as a page read from disk would be.
pub(crate) fn check_image(page: &[u8]) -> Result<(), String> {
    Node::new(PageView::from_slice(page)).check_on_disk()
}

/// Puts `key` = `value` (a large-value reference if `blob`) into the leaf image `page`
/// (checked by [`check_image`]).
pub(crate) fn redo_put(
    page: &mut [u8],
    key: &[u8],
    value: &[u8],
    blob: bool,
) -> Result<(), String> {
    let node = Node::new(PageView::from_slice(page));
    if !node.is_leaf() {
        return Err("a leaf operation on an inner node".into());
    }
    if !node.covers(key, super::node::Bound::AtLeast) {
        return Err("a leaf operation on a key outside the leaf's fences".into());
    }
    if value.len() > max_value_size(node.page_len()) {
        return Err("a logged value longer than a leaf holds".into());
    }
    let (index, found) = node.lower_bound(key);
    if found && !blob && !node.is_blob(index) && node.value(index).len() == value.len() {
        NodeMut::new(PageMut::from_slice(page)).overwrite_value(index, value);
        return Ok(());
    }
    let reclaimed = if found { node.entry_size(index) } else { 0 };
    if node.reclaimable_space() + reclaimed < entry_size(true, key.len(), value.len()) {
        return Err("a logged insert does not fit its leaf".into());
    }
    let mut leaf = NodeMut::new(PageMut::from_slice(page));
    if found {
        leaf.remove_at(index);
    }
    leaf.insert_stored(index, key, Stored { bytes: value, blob });
    Ok(())
}

/// Removes `key` from the leaf image `page` if present.
pub(crate) fn redo_remove(page: &mut [u8], key: &[u8]) -> Result<(), String> {
    let node = Node::new(PageView::from_slice(page));
    if !node.is_leaf() {
        return Err("a leaf operation on an inner node".into());
    }
    let (index, found) = node.lower_bound(key);
    if found {
        NodeMut::new(PageMut::from_slice(page)).remove_at(index);
    }
    Ok(())
}

/// Rewrites ranges of the value of `key` (of `value_len` bytes) in the leaf image `page`.
pub(crate) fn redo_patch(
    page: &mut [u8],
    key: &[u8],
    value_len: usize,
    ranges: &[(usize, Vec<u8>)],
) -> Result<(), String> {
    let node = Node::new(PageView::from_slice(page));
    if !node.is_leaf() {
        return Err("a leaf operation on an inner node".into());
    }
    let (index, found) = node.lower_bound(key);
    if !found || node.is_blob(index) || node.value(index).len() != value_len {
        return Err("a logged patch of a value that is not there".into());
    }
    let mut value = node.value(index).to_vec();
    for (offset, bytes) in ranges {
        // The decoder checked every range against `value_len`.
        value[*offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    NodeMut::new(PageMut::from_slice(page)).overwrite_value(index, &value);
    Ok(())
}

/// Replays a logged split on the images of the node split (`node_page`), its parent and the
/// fresh page `left_page` (a zeroed page with its header), as `BTree::split` did it: the left
/// part moves to the new page, the separator with the new page as its child goes into the
/// parent. Everything is checked first, so a split that does not fit its pages is an error and
/// changes nothing.
pub(crate) fn redo_split(
    node_page: &mut [u8],
    parent_page: &mut [u8],
    left_page: &mut [u8],
    split: &Split,
) -> Result<(), String> {
    let original = node_page.to_vec();
    let node = Node::new(PageView::from_slice(&original));
    let parent = Node::new(PageView::from_slice(parent_page));
    if parent.is_leaf() || parent.level() != node.level() + 1 {
        return Err("a split whose parent is not the level above".into());
    }
    let (leaf, count, page_len) = (node.is_leaf(), node.count(), node.page_len());
    let (left_count, right_start) = (split.left_count, split.right_start);
    let separator = &split.separator[..];
    // Leaves keep the separator as the left part's last key; inner nodes move it up.
    let moved_up = usize::from(!leaf);
    if right_start != left_count + moved_up || right_start > count {
        return Err("a split point outside its node".into());
    }
    if !leaf && node.key(left_count) != separator {
        return Err("an inner split whose separator is not its middle key".into());
    }
    let ordered = (left_count == 0 || node.key(left_count - 1) <= separator)
        && (right_start == count || node.key(right_start) > separator)
        && node.lower_fence().is_none_or(|fence| fence < separator)
        && node.upper_fence().is_none_or(|fence| separator < fence);
    if !ordered {
        return Err("a split separator out of order with its node".into());
    }
    let halves = [
        (node.lower_fence(), Some(separator), 0..left_count),
        (Some(separator), node.upper_fence(), right_start..count),
    ];
    if halves.iter().any(|(lower, upper, range)| {
        Node::size_of(leaf, *lower, *upper, node.entries(range.clone())) > page_len
    }) {
        return Err("a split half that does not fit a page".into());
    }
    let (index, found) = parent.lower_bound(separator);
    let inside_parent = parent.lower_fence().is_none_or(|fence| fence < separator)
        && parent.upper_fence().is_none_or(|fence| separator < fence);
    if found || !inside_parent || parent.child_word(index) != Swip::unswizzled_word(split.page_id) {
        return Err("a split whose parent does not lead to the node there".into());
    }
    if !parent.fits(entry_size(false, separator.len(), 8)) {
        return Err("a split separator that does not fit the parent".into());
    }
    let left_upper = if leaf { 0 } else { node.child_word(left_count) };
    NodeMut::new(PageMut::from_slice(left_page)).rebuild(
        node.level(),
        node.lower_fence(),
        Some(separator),
        left_upper,
        node.entries(0..left_count),
    );
    NodeMut::new(PageMut::from_slice(node_page)).rebuild(
        node.level(),
        Some(separator),
        node.upper_fence(),
        node.child_word(count),
        node.entries(right_start..count),
    );
    let left_word = Swip::unswizzled_word(split.left).to_le_bytes();
    NodeMut::new(PageMut::from_slice(parent_page)).insert_at(index, separator, &left_word);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    /// A leaf (page 5) with keys 00..39 under a parent whose only child it is.
    fn leaf_and_parent() -> (Vec<u8>, Vec<u8>) {
        let mut leaf = vec![0u8; PAGE];
        let mut node = NodeMut::new(PageMut::from_slice(&mut leaf));
        node.init(0, None, None);
        for n in 0..40u8 {
            node.insert_at(n as usize, format!("{n:02}").as_bytes(), &[n; 20]);
        }
        let mut parent = vec![0u8; PAGE];
        let mut inner = NodeMut::new(PageMut::from_slice(&mut parent));
        inner.init(1, None, None);
        inner.set_upper_child(Swip::unswizzled_word(5));
        (leaf, parent)
    }

    fn split(left_count: usize, right_start: usize, separator: &str) -> Split {
        Split {
            page_id: 5,
            left: 9,
            parent: 2,
            left_count,
            right_start,
            separator: separator.into(),
        }
    }

    fn keys(page: &[u8]) -> Vec<String> {
        let node = Node::new(PageView::from_slice(page));
        (0..node.count())
            .map(|i| String::from_utf8(node.key(i).to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn a_split_moves_the_left_part_and_links_it_in_the_parent() {
        let (mut leaf, mut parent) = leaf_and_parent();
        let mut left = vec![0u8; PAGE];
        redo_split(&mut leaf, &mut parent, &mut left, &split(15, 15, "14")).unwrap();
        for page in [&leaf, &parent, &left] {
            assert_eq!(Node::new(PageView::from_slice(page)).check(), Ok(()));
        }
        assert_eq!(
            keys(&left),
            (0..15).map(|n| format!("{n:02}")).collect::<Vec<_>>()
        );
        assert_eq!(
            keys(&leaf),
            (15..40).map(|n| format!("{n:02}")).collect::<Vec<_>>()
        );
        let parent = Node::new(PageView::from_slice(&parent));
        assert_eq!(parent.key(0), b"14");
        assert_eq!(parent.child_word(0), Swip::unswizzled_word(9));
        assert_eq!(parent.child_word(1), Swip::unswizzled_word(5));
    }

    #[test]
    fn a_split_that_does_not_match_its_pages_changes_nothing() {
        for (bad, why) in [
            (split(15, 16, "14"), "leaf halves must meet"),
            (
                split(15, 15, "16"),
                "separator above the right part's first key",
            ),
            (
                split(15, 15, "13"),
                "separator below the left part's last key",
            ),
            (split(41, 41, "99"), "split point beyond the node"),
            (
                Split {
                    page_id: 6,
                    ..split(15, 15, "14")
                },
                "parent leads elsewhere",
            ),
        ] {
            let (mut leaf, mut parent) = leaf_and_parent();
            let (leaf_before, parent_before) = (leaf.clone(), parent.clone());
            let mut left = vec![0u8; PAGE];
            assert!(
                redo_split(&mut leaf, &mut parent, &mut left, &bad).is_err(),
                "{why}"
            );
            assert_eq!((leaf, parent), (leaf_before, parent_before), "{why}");
        }
    }
}
