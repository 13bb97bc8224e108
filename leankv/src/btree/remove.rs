//! Removing: the entry leaves its exclusively latched leaf; an underfull node is then merged
//! with a sibling under the parent's latch (fetched from disk if needed), upwards while parents
//! become underfull, and a root with one child takes that child's contents. Emptied pages are
//! deleted through the epoch mechanism.
//!
//! Invariants: a merge happens only when the merged node fits one page; the separator between
//! the merged nodes leaves the parent with them; the root page never moves.

use super::*;

/// What removing a key from its leaf asks the caller to do next.
pub(super) enum Removal {
    Absent,
    Done(Written),
    /// Removed, and the leaf in this frame has become underfull: merge it.
    Merge(Written, FrameId),
}

/// Leaves at most this full (in bytes used) after a removal are merged with a sibling.
fn underfull(node: &Node<'_>, page_size: usize) -> bool {
    node.used_space() < page_size / 4
}

impl<P: Policy> BTree<P> {
    /// Removes `key` as part of `batch` (0: on its own), appending the value it removed to
    /// `replaced` in a batch (and when it was a large value); `None` if it was absent.
    pub(crate) fn remove(
        &self,
        key: &[u8],
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Result<Option<Written>> {
        let step = self.bm.run(|mode| {
            let exists =
                self.read_leaf(key, Bound::AtLeast, mode, |leaf| leaf.lower_bound(key).1)?;
            if !exists {
                return Ok(Removal::Absent);
            }
            let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
            let (index, found) = self.node(frame).lower_bound(key);
            if !found {
                return Ok(Removal::Absent);
            }
            let into = &mut *replaced;
            Ok(self.remove_from_leaf(frame, &mut guard, index, key, batch, into))
        })?;
        self.finish_removal(step, key)
    }

    /// Removes the entry at `index`, which holds `key`, from the exclusively latched leaf in
    /// `frame`, logged as part of `batch` (`replaced`: see [`Self::remove`]).
    pub(super) fn remove_from_leaf(
        &self,
        frame: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        index: usize,
        key: &[u8],
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Removal {
        let leaf = self.node(frame);
        debug_assert_eq!(leaf.lower_bound(key), (index, true));
        let before = (batch != 0 || leaf.is_blob(index))
            .then(|| Replaced::append(replaced, leaf.stored(index)));
        let dropped = before
            .as_ref()
            .and_then(|before| before.stored(replaced).large_value(self.bm.page_size()));
        NodeMut::new(self.bm.page_mut(frame, guard)).remove_at(index);
        self.bm.frame(frame).set_dirty(true);
        let lsn = self.bm.log_leaf(
            frame,
            guard,
            self.root_page_id,
            batch,
            LeafOp::Remove { key },
            before_ref(batch, before.as_ref().map(|before| before.stored(replaced))),
            BlobChange {
                added: None,
                dropped: dropped.as_ref(),
            },
            self.keys.stripe(),
        );
        let written = Written {
            lsn,
            before: before.filter(|_| batch != 0),
        };
        if frame != self.root() && underfull(&self.node(frame), self.bm.page_size()) {
            return Removal::Merge(written, frame);
        }
        Removal::Done(written)
    }

    /// Merges after a removal that left its leaf underfull (latches released by now). The
    /// removal is applied and logged whatever the merge does: a merge that fails (an I/O error
    /// bringing in a sibling, a full pool) leaves a valid, underfull node and is not the
    /// removal's failure, else a batch would not know to undo the removal. The error comes
    /// back at the next operation that needs that page.
    pub(super) fn finish_removal(&self, step: Removal, key: &[u8]) -> Result<Option<Written>> {
        match step {
            Removal::Absent => Ok(None),
            Removal::Done(written) => Ok(Some(written)),
            Removal::Merge(written, frame) => {
                let _underfull_is_valid = self.merge_upwards(frame, key);
                Ok(Some(written))
            }
        }
    }

    /// Merges the underfull node in `frame` and, while that leaves its parent underfull, the
    /// parent too; collapses a root left with a single child.
    pub(super) fn merge_upwards(&self, mut frame: FrameId, key: &[u8]) -> Result<()> {
        for _ in 0..MAX_DEPTH {
            match self.bm.run(|mode| self.merge(frame, key, mode))? {
                Some(parent) if parent == self.root() => {
                    self.bm.run(|_| self.collapse_root())?;
                    return Ok(());
                }
                Some(parent) => frame = parent,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Merges the node in `target` with a swizzled sibling if both fit in one page. Returns the
    /// parent if a merge happened and the parent is now underfull (or is a root with one
    /// child).
    pub(super) fn merge(
        &self,
        target: FrameId,
        key: &[u8],
        mode: LatchMode,
    ) -> Attempt<Option<FrameId>> {
        if target == self.root() {
            return Ok(None);
        }
        let Some(ParentAndChild {
            parent,
            mut parent_guard,
            index,
            child_guard: guard,
        }) = self.latch_parent_and_child(target, key, mode)?
        else {
            return Ok(None);
        };
        let page_size = self.bm.page_size();
        if !underfull(&self.node(target), page_size) {
            return Ok(None);
        }
        let parent_node = self.node(parent);
        let count = parent_node.count();
        if count == 0 {
            return Ok(None);
        }
        // The merged pair is (left, right) with separator slot `left_index` in the parent.
        let (left_index, sibling_index) = if index < count {
            (index, index + 1)
        } else {
            (count - 1, count - 1)
        };
        let sibling_word = parent_node.child_word(sibling_index);
        let sibling = match self.bm.child(sibling_word) {
            Some(SwipTarget::Frame(sibling)) => sibling,
            Some(SwipTarget::Page(page_id)) => {
                // Bring the sibling in (outside the latches), then merge on the restart.
                let offset = parent_node.child_offset(sibling_index) as u32;
                drop((guard, parent_guard));
                let version = self.bm.frame(parent).latch.optimistic()?;
                return Err(Restart::Swizzle {
                    frame: parent,
                    version,
                    offset,
                    page_id,
                });
            }
            None => return Err(self.corrupt(parent, "malformed child reference")),
        };
        let Some(sibling_guard) = self.bm.frame(sibling).latch.try_lock_exclusive() else {
            return Ok(None);
        };
        if !self.bm.holds(sibling, sibling_word) {
            return Ok(None);
        }
        let ((left, left_guard), (right, mut right_guard)) = if index < count {
            ((target, guard), (sibling, sibling_guard))
        } else {
            ((sibling, sibling_guard), (target, guard))
        };
        let (left_node, right_node) = (self.node(left), self.node(right));
        let separator = parent_node.key(left_index);
        let leaf = left_node.is_leaf();
        let merged_entries = || left_node.entries(0..left_node.count());
        let upper_word = left_node.child_word(left_node.count()).to_le_bytes();
        let bridge = (!leaf).then_some((separator, Stored::inline(&upper_word[..])));
        // Sized from the nodes' space accounting: a leaf emptied from its front next to a full
        // sibling (a queue's oldest entries) tries at every removal, and visiting both nodes'
        // entries each time took 3% of TPC-C's CPU time (its Delivery empties such leaves).
        let size = Node::size_of(
            leaf,
            left_node.lower_fence(),
            right_node.upper_fence(),
            bridge.into_iter(),
        ) + left_node.entries_size()
            + right_node.entries_size();
        debug_assert_eq!(
            size,
            Node::size_of(
                leaf,
                left_node.lower_fence(),
                right_node.upper_fence(),
                merged_entries()
                    .chain(bridge)
                    .chain(right_node.entries(0..right_node.count())),
            ),
            "the nodes' space accounting disagrees with their entries"
        );
        if size > page_size {
            return Ok(None);
        }
        NodeMut::new(self.bm.page_mut(right, &mut right_guard)).rebuild(
            right_node.level(),
            left_node.lower_fence(),
            right_node.upper_fence(),
            right_node.child_word(right_node.count()),
            merged_entries()
                .chain(bridge)
                .chain(right_node.entries(0..right_node.count())),
        );
        self.adopt_children(right);
        NodeMut::new(self.bm.page_mut(parent, &mut parent_guard)).remove_at(left_index);
        self.bm.frame(parent).set_dirty(true);
        self.bm.frame(right).set_dirty(true);
        self.bm.log_structure(
            &mut [(right, &mut right_guard), (parent, &mut parent_guard)],
            &[left],
        );
        self.bm.delete_page(left, left_guard);
        let parent_node = self.node(parent);
        let parent_underfull = if parent == self.root() {
            parent_node.count() == 0
        } else {
            underfull(&parent_node, page_size)
        };
        Ok(parent_underfull.then_some(parent))
    }

    /// If the root is an inner node with a single (swizzled) child, pulls that child's
    /// contents into the root, lowering the tree by one level; returns whether it did.
    pub(super) fn collapse_root(&self) -> Attempt<bool> {
        self.check_live()?;
        let mut guard = self.bm.frame(self.root()).latch.lock_exclusive();
        let root = self.node(self.root());
        if root.is_leaf() || root.count() > 0 {
            return Ok(false);
        }
        let word = root.child_word(0);
        let Some(SwipTarget::Frame(child)) = self.bm.child(word) else {
            return Ok(false);
        };
        let child_guard = self.bm.frame(child).latch.lock_exclusive();
        if !self.bm.holds(child, word) {
            return Ok(false);
        }
        let child_node = self.node(child);
        NodeMut::new(self.bm.page_mut(self.root(), &mut guard)).rebuild(
            child_node.level(),
            None,
            None,
            child_node.child_word(child_node.count()),
            child_node.entries(0..child_node.count()),
        );
        self.adopt_children(self.root());
        self.bm.frame(self.root()).set_dirty(true);
        self.bm
            .log_structure(&mut [(self.root(), &mut guard)], &[child]);
        self.bm.delete_page(child, child_guard);
        Ok(true)
    }
}
