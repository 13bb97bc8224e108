//! Replaying leaf operations on page images at recovery (the log's `Put` and `Remove`
//! records, physiological: by key, within one page).
//!
//! Invariant: an image is checked as a node before anything is applied to it, and an operation
//! that does not fit is an error, never a partial write.

use super::node::{entry_size, Node, NodeMut};
use crate::buffer::{PageMut, PageView};

/// Checks an image from the log as a B-tree node, as a page read from disk would be.
pub(crate) fn check_image(page: &[u8]) -> Result<(), String> {
    Node::new(PageView::from_slice(page)).check_on_disk()
}

/// Puts `key` = `value` into the leaf image `page` (checked by [`check_image`]).
pub(crate) fn redo_put(page: &mut [u8], key: &[u8], value: &[u8]) -> Result<(), String> {
    let node = Node::new(PageView::from_slice(page));
    if !node.is_leaf() {
        return Err("a leaf operation on an inner node".into());
    }
    if !node.covers(key, super::node::Bound::AtLeast) {
        return Err("a leaf operation on a key outside the leaf's fences".into());
    }
    let (index, found) = node.lower_bound(key);
    if found && node.value(index).len() == value.len() {
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
    leaf.insert_at(index, key, value);
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
