//! Inserting and updating: the leaf is latched exclusively by the descent; an entry that does
//! not fit splits the leaf (and, first, a full parent) as a separate step under the parent's
//! and the node's latches, as `split::plan` chose, and the operation starts over. The root
//! never moves: a root split moves its contents into two new children.
//!
//! Invariants: after a split both halves hold entries strictly inside their fences, no entry
//! is lost or duplicated, and the incoming entry has room on its side (debug-asserted); parent
//! links of moved children follow them.

use super::*;

/// How one attempt at an insert ended.
pub(super) enum Step {
    Done(Written),
    /// The leaf in this frame has no room: split it and try again.
    Full(FrameId),
}

impl<P: Policy> BTree<P> {
    /// Inserts or overwrites, as part of `batch` (0: on its own), appending the value it
    /// replaced to `replaced` in a batch (and when it was a large value). A value longer than
    /// a leaf holds is written to pages of its own first (see `large`).
    pub(crate) fn insert(
        &self,
        key: &[u8],
        value: &[u8],
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Result<Written> {
        if value.len() <= self.max_inline() {
            return self.insert_stored(key, Stored::inline(value), None, batch, replaced);
        }
        let blob = self.bm.write_blob(value)?;
        let stored = Stored {
            bytes: blob.reference(),
            blob: true,
        };
        let written = self.insert_stored(key, stored, Some(blob.blob()), batch, replaced)?;
        blob.referenced();
        Ok(written)
    }

    /// Inserts or overwrites with a value as stored: `added` is the large value `value`
    /// references if it was just written for this insert (a restored reference has none).
    /// `replaced`: see [`Self::insert`].
    pub(crate) fn insert_stored(
        &self,
        key: &[u8],
        value: Stored<'_>,
        added: Option<&BlobRef>,
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Result<Written> {
        let incoming = Incoming {
            key,
            size: entry_size(true, key.len(), value.bytes.len()),
        };
        loop {
            let step = self.bm.run(|mode| {
                let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
                let slot = self.node(frame).lower_bound(key);
                let into = &mut *replaced;
                Ok(self.put_in_leaf(frame, &mut guard, slot, key, value, added, batch, into))
            })?;
            match step {
                Step::Done(written) => return Ok(written),
                Step::Full(frame) => self.bm.run(|mode| self.split(frame, key, incoming, mode))?,
            }
        }
    }

    /// Puts `key` with `value` into the exclusively latched leaf in `frame`, at `slot` (where
    /// `lower_bound` placed the key, and whether it found it), logged as part of `batch`; or
    /// reports that it does not fit. `added`: see [`Self::insert_stored`]; `replaced`: see
    /// [`Self::insert`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn put_in_leaf(
        &self,
        frame: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        (index, found): (usize, bool),
        key: &[u8],
        value: Stored<'_>,
        added: Option<&BlobRef>,
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Step {
        let leaf = self.node(frame);
        debug_assert_eq!(leaf.lower_bound(key), (index, found));
        let replaces_blob = found && leaf.is_blob(index);
        let same_size =
            found && !replaces_blob && !value.blob && leaf.value(index).len() == value.bytes.len();
        let size = entry_size(true, key.len(), value.bytes.len());
        if !same_size && !split::has_room_at(&leaf, (index, found), size) {
            return Step::Full(frame);
        }
        let before = (found && (batch != 0 || replaces_blob))
            .then(|| Replaced::append(replaced, leaf.stored(index)));
        // Putting back the reference already there drops nothing.
        let dropped = before
            .as_ref()
            .map(|before| before.stored(replaced))
            .filter(|before| !(value.blob && before.bytes == value.bytes))
            .and_then(|before| before.large_value(self.bm.page_size()));
        // A value rewritten in place logs only what changed (and in a batch, what those
        // bytes were).
        let changed = (same_size && self.bm.log().is_some())
            .then(|| ChangedRanges::between(leaf.value(index), value.bytes))
            .flatten();
        let mut page = NodeMut::new(self.bm.page_mut(frame, guard));
        if same_size {
            page.overwrite_value(index, value.bytes);
        } else {
            if found {
                page.remove_at(index);
            }
            page.insert_stored(index, key, value);
            if !found {
                self.bm.frame(frame).note_insert(guard, index);
            }
        }
        self.bm.frame(frame).set_dirty(true);
        debug_assert!(self.node(frame).used_space() <= self.bm.page_size());
        let op = LeafOp::put(key, value.bytes, value.blob, !found, changed.as_ref());
        let lsn = self.bm.log_leaf(
            frame,
            guard,
            self.root_page_id,
            batch,
            op,
            before_ref(batch, before.as_ref().map(|before| before.stored(replaced))),
            BlobChange {
                added,
                dropped: dropped.as_ref(),
            },
            self.keys.stripe(),
        );
        Step::Done(Written {
            lsn,
            before: before.filter(|_| batch != 0),
        })
    }

    /// Rewrites the value of `key` in place with `modify`, which sees a copy of the current
    /// value and may change its bytes but not its length, as part of `batch` (0: on its own).
    /// Runs at most once, under the leaf's exclusive latch, so updates of one key are atomic
    /// with respect to each other. Returns `None` (without calling `modify`) if the key is
    /// absent, else `modify`'s result and the end LSN of its record (0: none). In a batch, the
    /// value it replaced (never a large one) is appended to `replaced`: a batch keeps its
    /// before-images one after another there instead of in an allocation each (TPC-C: ~17 per
    /// transaction). A large value (stored outside its leaf) is not rewritten in place: that
    /// fails with `ValueTooLarge` (without calling `modify`).
    pub(crate) fn update<R>(
        &self,
        key: &[u8],
        value: &mut Vec<u8>,
        modify: impl FnOnce(&mut [u8]) -> R,
        batch: u64,
        replaced: &mut Vec<u8>,
    ) -> Result<Option<(R, u64)>> {
        let mut modify = Some(modify);
        let max = self.max_inline();
        let updated = self.bm.run(|mode| {
            let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
            let leaf = self.node(frame);
            let (index, found) = leaf.lower_bound(key);
            if !found {
                return Ok(Ok(None));
            }
            if leaf.is_blob(index) {
                // Checked when the page was read: the before-image below is an inline value.
                let Some(blob) = leaf.stored(index).large_value(self.bm.page_size()) else {
                    return Err(self.corrupt(frame, "a large-value reference does not decode"));
                };
                return Ok(Err(blob.len));
            }
            value.clear();
            value.extend_from_slice(leaf.value(index));
            let modify = modify
                .take()
                .expect("nothing restarts after the latch is held");
            let result = modify(value);
            let replaced_at = replaced.len();
            if batch != 0 {
                replaced.extend_from_slice(leaf.value(index));
            }
            let changed = self
                .bm
                .log()
                .and_then(|_| ChangedRanges::between(leaf.value(index), value));
            NodeMut::new(self.bm.page_mut(frame, &mut guard)).overwrite_value(index, value);
            self.bm.frame(frame).set_dirty(true);
            let op = LeafOp::put(key, value, false, false, changed.as_ref());
            let lsn = self.bm.log_leaf(
                frame,
                &mut guard,
                self.root_page_id,
                batch,
                op,
                before_ref(batch, Some(Stored::inline(&replaced[replaced_at..]))),
                BlobChange::default(),
                self.keys.stripe(),
            );
            Ok(Ok(Some((result, lsn))))
        })?;
        updated.map_err(|len| Error::ValueTooLarge {
            len: usize::try_from(len).unwrap_or(usize::MAX),
            max,
        })
    }

    /// Splits the node in `target` (on `key`'s path) so that `incoming` fits, unless it fits
    /// by now. If its parent cannot take the separator, splits the parent instead; the caller
    /// retries its write either way.
    pub(super) fn split(
        &self,
        target: FrameId,
        key: &[u8],
        incoming: Incoming<'_>,
        mode: LatchMode,
    ) -> Attempt<()> {
        // A root found full in an earlier attempt may have been dropped (and freed) since.
        self.check_live()?;
        if target == self.root() {
            let guard = self.bm.frame(target).latch.lock_exclusive();
            if split::has_room(&self.node(target), incoming) {
                return Ok(());
            }
            return self.split_root(guard, incoming);
        }
        let Some(ParentAndChild {
            parent,
            mut parent_guard,
            index,
            child_guard: mut guard,
        }) = self.latch_parent_and_child(target, key, mode)?
        else {
            return Ok(());
        };
        let node = self.node(target);
        if split::has_room(&node, incoming) {
            return Ok(());
        }
        let in_order = |slot| self.bm.frame(target).in_order_before(slot);
        let Some(plan) = split::plan(&node, incoming, in_order) else {
            return Err(self.corrupt(target, "no split point makes room"));
        };
        let separator = plan.separator_key(&node, incoming.key).to_vec();
        let separator_entry = Incoming {
            key: &separator,
            size: entry_size(false, separator.len(), 8),
        };
        if !split::has_room(&self.node(parent), separator_entry) {
            drop((guard, parent_guard));
            return self.split(parent, key, separator_entry, mode);
        }
        let entries_before = node.count();
        let (left, mut left_guard) = self.bm.allocate_page(node.page_type(), Some(parent))?;
        self.fill_halves(
            (target, &mut guard),
            plan,
            &separator,
            (left, &mut left_guard),
            None,
        );
        let left_word = self.bm.reference(left).to_le_bytes();
        NodeMut::new(self.bm.page_mut(parent, &mut parent_guard))
            .insert_at(index, &separator, &left_word);
        self.bm.frame(parent).set_dirty(true);
        self.bm.frame(target).set_dirty(true);
        self.bm.log_split(
            &mut [
                (left, &mut left_guard),
                (target, &mut guard),
                (parent, &mut parent_guard),
            ],
            plan.left_count,
            plan.right_start(node.is_leaf()),
            &separator,
        );
        // Progress: no entry lost or duplicated, and the incoming entry has room on its side
        // (the half it shares a page with is strictly smaller than the node was).
        debug_assert_eq!(
            self.node(left).count() + self.node(target).count() + usize::from(!node.is_leaf()),
            entries_before
        );
        debug_assert!(self.room_after_split(left, target, &separator, incoming));
        Ok(())
    }

    /// Moves the entries of `source` that `plan` puts left into the new node `left`;
    /// `source` keeps the rest. With `right = Some(frame)`, the rest goes there instead (root
    /// split) and `source` is left for the caller to rewrite. Parent links of moved children
    /// follow.
    fn fill_halves(
        &self,
        (source, source_guard): (FrameId, &mut ExclusiveGuard<'_>),
        plan: SplitPlan,
        separator: &[u8],
        (left, left_guard): (FrameId, &mut ExclusiveGuard<'_>),
        right: Option<(FrameId, &mut ExclusiveGuard<'_>)>,
    ) {
        let node = self.node(source);
        let level = node.level();
        let count = node.count();
        let leaf = node.is_leaf();
        // The run of keys arriving in order goes on in the half (or both halves, when it
        // arrives at the cut) that holds its place, at the place's new slot: a run longer
        // than a node holds keys is seen as one.
        let right_start = plan.right_start(leaf);
        let run = self.bm.frame(source).insert_run();
        let left_run = run.filter(|&(next, _)| next <= plan.left_count);
        let right_run = run
            .filter(|&(next, _)| next >= right_start)
            .map(|(next, run)| (next - right_start, run));
        self.bm.frame(left).set_insert_run(left_guard, left_run);
        let left_upper = match plan.separator {
            Separator::Existing(index) if !leaf => node.child_word(index),
            _ => 0,
        };
        debug_assert!(leaf || matches!(plan.separator, Separator::Existing(_)));
        NodeMut::new(self.bm.page_mut(left, left_guard)).rebuild(
            level,
            node.lower_fence(),
            Some(separator),
            left_upper,
            node.entries(0..plan.left_count),
        );
        let separate_right = right.is_some();
        let (right_frame, right_page) = match right {
            Some((frame, guard)) => {
                // A root split: the source becomes the inner root, which notes no run.
                self.bm.frame(source).set_insert_run(source_guard, None);
                self.bm.frame(frame).set_insert_run(guard, right_run);
                (frame, self.bm.page_mut(frame, guard))
            }
            None => {
                self.bm
                    .frame(source)
                    .set_insert_run(source_guard, right_run);
                (source, self.bm.page_mut(source, source_guard))
            }
        };
        NodeMut::new(right_page).rebuild(
            level,
            Some(separator),
            node.upper_fence(),
            node.child_word(count),
            node.entries(right_start..count),
        );
        self.adopt_children(left);
        if separate_right {
            self.adopt_children(right_frame);
        }
    }

    /// Points the parent link of every swizzled child of `frame` at `frame`.
    pub(super) fn adopt_children(&self, frame: FrameId) {
        let node = self.node(frame);
        if node.is_leaf() {
            return;
        }
        for index in 0..=node.count() {
            if let Some(SwipTarget::Frame(child)) =
                Swip::decode(node.child_word(index), self.bm.frame_count())
            {
                self.bm.frame(child).set_parent(Some(frame));
            }
        }
    }

    /// Splits the root in place so that `incoming` fits: its entries move into two new
    /// children and the root becomes an inner node one level up, keeping its page id.
    fn split_root<'a>(
        &'a self,
        mut guard: ExclusiveGuard<'a>,
        incoming: Incoming<'_>,
    ) -> Attempt<()> {
        let root = self.root();
        let node = self.node(root);
        if node.level() >= node::MAX_LEVEL {
            return Err(self.corrupt(root, "root split beyond the level limit"));
        }
        let in_order = |slot| self.bm.frame(root).in_order_before(slot);
        let Some(plan) = split::plan(&node, incoming, in_order) else {
            return Err(self.corrupt(root, "no split point makes room"));
        };
        let separator = plan.separator_key(&node, incoming.key).to_vec();
        let page_type = node.page_type();
        let (left, mut left_guard) = self.bm.allocate_page(page_type, Some(root))?;
        let (right, mut right_guard) = match self.bm.allocate_page(page_type, Some(root)) {
            Ok(allocated) => allocated,
            Err(restart) => {
                self.bm.delete_page(left, left_guard);
                return Err(restart);
            }
        };
        self.fill_halves(
            (root, &mut guard),
            plan,
            &separator,
            (left, &mut left_guard),
            Some((right, &mut right_guard)),
        );
        let left_word = self.bm.reference(left).to_le_bytes();
        NodeMut::new(self.bm.page_mut(root, &mut guard)).rebuild(
            node.level() + 1,
            None,
            None,
            self.bm.reference(right),
            std::iter::once((&separator[..], Stored::inline(&left_word[..]))),
        );
        self.bm.frame(root).set_dirty(true);
        self.bm.log_structure(
            &mut [
                (left, &mut left_guard),
                (right, &mut right_guard),
                (root, &mut guard),
            ],
            &[],
        );
        debug_assert!(self.room_after_split(left, right, &separator, incoming));
        Ok(())
    }

    /// Whether the half of a split that `incoming` belongs to (by `separator`) has room for it.
    fn room_after_split(
        &self,
        left: FrameId,
        right: FrameId,
        separator: &[u8],
        incoming: Incoming<'_>,
    ) -> bool {
        let side = if incoming.key <= separator {
            left
        } else {
            right
        };
        split::has_room(&self.node(side), incoming)
    }
}
