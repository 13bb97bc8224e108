//! Removing a range of keys in steps, one per parent of leaves: under that parent's exclusive
//! latch, the leaves wholly inside the range are cut out at once (the first of them is emptied
//! and takes over the others' key range, the rest are freed with their separators), and only
//! the leaves at the range's two ends lose keys one by one. Each step is one log record (the
//! changed pages, the freed ids, the keys the leaves held and how far the removal got), so a
//! removal costs one descent per parent of leaves, not one per key.
//!
//! The leaves must be in memory to be cut out, to count their keys (for `Tree::len` and the
//! count the removal returns) and to retire their frames: a step stops before the first leaf
//! that is not, and the next step brings it in first. Emptied leaves and parents left with one
//! child are merged away after each step.
//!
//! Invariants: a leaf is cut out only if every key its parent allows it lies inside the range;
//! every step ends strictly after the position it started from, so a removal ends; the parent's
//! separators and the emptied leaf's fences agree after the step.

use super::remove::Removal;
use super::*;
use std::ops::Bound as RangeBound;

/// What one step did.
struct StepDone {
    /// Keys removed (one by one and with the leaves cut out).
    removed: u64,
    /// Every key of the range up to here is gone (`None`: up to the end of the key space).
    through: Option<Vec<u8>>,
    /// Nodes that may have become underfull: their level and a key on their path.
    merge: Vec<(u16, Vec<u8>)>,
}

/// Whether no key above `key` lies before `end`.
pub(crate) fn beyond(key: &[u8], end: RangeBound<&[u8]>) -> bool {
    match end {
        RangeBound::Unbounded => false,
        RangeBound::Included(end) | RangeBound::Excluded(end) => key >= end,
    }
}

/// Whether every key above `lower` (`None`: every key) lies at or after `from`.
fn starts_inside(lower: Option<&[u8]>, from: &RangeBound<Vec<u8>>) -> bool {
    match from {
        RangeBound::Unbounded => true,
        RangeBound::Included(key) | RangeBound::Excluded(key) => {
            lower.is_some_and(|lower| lower >= key.as_slice())
        }
    }
}

/// Whether every key up to `upper` (`None`: every key) lies before `end`.
fn ends_inside(upper: Option<&[u8]>, end: RangeBound<&[u8]>) -> bool {
    match end {
        RangeBound::Unbounded => true,
        RangeBound::Included(end) => upper.is_some_and(|upper| upper <= end),
        RangeBound::Excluded(end) => upper.is_some_and(|upper| upper < end),
    }
}

/// The smallest key above `lower`: a key on the path of the node whose lower fence it is.
fn key_above(lower: Option<&[u8]>) -> Vec<u8> {
    lower.map_or_else(Vec::new, |lower| [lower, &[0]].concat())
}

impl<P: Policy> BTree<P> {
    /// Removes every key from `start` to `end` as range removal `removal` (the id its steps
    /// are logged with); returns how many keys it removed.
    pub(crate) fn remove_range(
        &self,
        start: RangeBound<Vec<u8>>,
        end: RangeBound<&[u8]>,
        removal: u64,
    ) -> Result<u64> {
        let mut from = start;
        let mut removed = 0;
        let mut merge = Vec::new();
        loop {
            let step = self
                .bm
                .run(|mode| self.remove_range_step(&from, end, removal, mode))?;
            removed += step.removed;
            merge.extend(step.merge);
            match step.through {
                Some(key) if !beyond(&key, end) => {
                    debug_assert!(match &from {
                        RangeBound::Included(at) => key >= *at,
                        RangeBound::Excluded(at) => key > *at,
                        RangeBound::Unbounded => true,
                    });
                    from = RangeBound::Excluded(key);
                }
                _ => break,
            }
        }
        // Merges wait until the end: the next step takes over an emptied leaf left before its
        // position, and an emptied leaf whose parent has no other child merges only once that
        // parent merged with a sibling (hence the second pass). Nodes are found again by key:
        // by now they may have left the pool.
        merge.sort_unstable();
        merge.dedup();
        for pass in 0..2 {
            for (level, key) in &merge {
                if pass == 1 && *level > 0 {
                    continue;
                }
                let node = self.bm.run(|mode| {
                    if self.level_of(self.root())? <= *level {
                        return Ok(None);
                    }
                    let ((), frame) = self.read_node(key, Bound::AtLeast, *level, mode, |_| ())?;
                    Ok(Some(frame))
                })?;
                if let Some(frame) = node {
                    self.merge_upwards(frame, key)?;
                }
            }
        }
        // A removal that emptied whole parents may leave a root with one child, maybe down
        // several levels.
        for _ in 0..MAX_DEPTH {
            if !self.bm.run(|_| self.collapse_root())? {
                break;
            }
        }
        self.bm.share_deleted_frames();
        Ok(removed)
    }

    /// One step from `from`: the leaves of one parent (or the root leaf).
    fn remove_range_step(
        &self,
        from: &RangeBound<Vec<u8>>,
        end: RangeBound<&[u8]>,
        removal: u64,
        mode: LatchMode,
    ) -> Attempt<StepDone> {
        let (probe, bound) = match from {
            RangeBound::Unbounded => (&[][..], Bound::AtLeast),
            RangeBound::Included(key) => (key.as_slice(), Bound::AtLeast),
            RangeBound::Excluded(key) => (key.as_slice(), Bound::Above),
        };
        if self.level_of(self.root())? == 0 {
            let (leaf, mut guard) = self.descend_exclusive_to(probe, bound, 0, mode)?;
            let mut merge = Vec::new();
            let removed = self.remove_in_leaf(leaf, &mut guard, from, end, &mut merge);
            let through = self.node(leaf).upper_fence().map(<[u8]>::to_vec);
            self.log_progress(&mut [], &[], &[], removal, 0, from, &through);
            return Ok(StepDone {
                removed,
                through,
                merge,
            });
        }
        let (parent, mut parent_guard) = self.descend_exclusive_to(probe, bound, 1, mode)?;
        let node = self.node(parent);
        let count = node.count();
        let mut removed = 0;
        let mut merge = Vec::new();
        // The leaves wholly inside: (child index, frame, guard, keys).
        let mut whole: Vec<(usize, FrameId, ExclusiveGuard<'_>)> = Vec::new();
        let mut whole_keys = 0;
        // The large values the leaves wholly inside reference: freed with them.
        let mut blobs = Vec::new();
        let mut through = None;
        let mut processed = false;
        let first = node.search(probe, bound);
        for index in first..=count {
            let lower = if index == 0 {
                node.lower_fence()
            } else {
                Some(node.key(index - 1))
            };
            let upper = if index == count {
                node.upper_fence()
            } else {
                Some(node.key(index))
            };
            if lower.is_some_and(|lower| beyond(lower, end)) {
                break;
            }
            let offset = node.child_offset(index);
            let in_memory = self.bm.child_in_memory(
                parent,
                &mut parent_guard,
                offset,
                node.child_word(index),
            )?;
            // Swizzling a cooling child changed the swip.
            let word = node.child_word(index);
            let child = match (in_memory, self.bm.child(word)) {
                (Some(child), _) => child,
                (None, _) if processed => break,
                (None, Some(SwipTarget::Page(page_id))) => {
                    // Bring it in, and read ahead the leaves the next steps will cut out.
                    let ahead = self.unswizzled_children(&node, index + 1, end);
                    drop(parent_guard);
                    self.bm.prefetch(parent, &ahead);
                    let version = self.bm.frame(parent).latch.optimistic()?;
                    return Err(Restart::Swizzle {
                        frame: parent,
                        version,
                        offset: offset as u32,
                        page_id,
                    });
                }
                (None, _) => return Err(Restart::Conflict),
            };
            let mut guard = self.bm.frame(child).latch.lock_exclusive();
            if !self.bm.holds(child, word) {
                return Err(Restart::Conflict);
            }
            let leaf = self.node(child);
            if !leaf.is_leaf() {
                return Err(self.corrupt(child, "node level does not follow its parent's"));
            }
            if starts_inside(lower, from) && ends_inside(upper, end) {
                if whole.is_empty() && index == first && index > 0 {
                    // An empty leaf just before (what an earlier step left) joins the run.
                    if let Some(empty) =
                        self.empty_leaf(parent, &mut parent_guard, &node, index - 1)?
                    {
                        whole.push(empty);
                    }
                }
                whole_keys += leaf.count() as u64;
                self.collect_blobs(&leaf, &mut blobs);
                whole.push((index, child, guard));
            } else {
                removed += self.remove_in_leaf(child, &mut guard, from, end, &mut merge);
            }
            processed = true;
            through = upper.map(<[u8]>::to_vec);
        }
        if !processed {
            return Ok(StepDone {
                removed,
                through: None,
                merge,
            });
        }
        let mut freed = Vec::new();
        let mut freed_guards = Vec::new();
        if let Some((first, kept, mut kept_guard)) = (!whole.is_empty()).then(|| whole.remove(0)) {
            // The first whole leaf stays, empty, and spans the range of all of them.
            debug_assert!(whole
                .iter()
                .enumerate()
                .all(|(at, (index, ..))| *index == first + 1 + at));
            let last = whole.last().map_or(first, |(index, ..)| *index);
            let lower = self.node(kept).lower_fence().map(<[u8]>::to_vec);
            let upper = if last == count {
                node.upper_fence()
            } else {
                Some(node.key(last))
            };
            NodeMut::new(self.bm.page_mut(kept, &mut kept_guard)).rebuild(
                0,
                lower.as_deref(),
                upper,
                0,
                std::iter::empty(),
            );
            self.bm.frame(kept).set_dirty(true);
            merge.push((0, key_above(lower.as_deref())));
            for (_, frame, guard) in whole {
                freed.push(frame);
                freed_guards.push(guard);
            }
            if last > first {
                self.cut_out(parent, &mut parent_guard, first, last);
                self.bm.frame(parent).set_dirty(true);
                let changed = &mut [(parent, &mut parent_guard), (kept, &mut kept_guard)];
                self.log_progress(changed, &freed, &blobs, removal, whole_keys, from, &through);
            } else {
                let changed = &mut [(kept, &mut kept_guard)];
                self.log_progress(changed, &freed, &blobs, removal, whole_keys, from, &through);
            }
            drop(kept_guard);
        } else {
            self.log_progress(&mut [], &[], &[], removal, 0, from, &through);
        }
        // A parent left with one child (by this step or, after a crash, an earlier one) merges
        // with a sibling, or the tree keeps a chain of single children.
        let parent_node = self.node(parent);
        if parent_node.count() == 0 && parent != self.root() {
            merge.push((1, key_above(parent_node.lower_fence())));
        }
        for (frame, guard) in freed.into_iter().zip(freed_guards) {
            self.bm.delete_page(frame, guard);
        }
        Ok(StepDone {
            removed: removed + whole_keys,
            through,
            merge,
        })
    }

    /// Child `index` of the exclusively latched `parent`, latched exclusively, if it is an
    /// empty leaf in memory (cooling included).
    fn empty_leaf<'g>(
        &'g self,
        parent: FrameId,
        parent_guard: &mut ExclusiveGuard<'_>,
        node: &Node<'_>,
        index: usize,
    ) -> Attempt<Option<(usize, FrameId, ExclusiveGuard<'g>)>> {
        let offset = node.child_offset(index);
        let word = node.child_word(index);
        let Some(child) = self
            .bm
            .child_in_memory(parent, parent_guard, offset, word)?
        else {
            return Ok(None);
        };
        let word = node.child_word(index);
        let Some(guard) = self.bm.frame(child).latch.try_lock_exclusive() else {
            return Ok(None);
        };
        let leaf = self.node(child);
        let empty = self.bm.holds(child, word) && leaf.is_leaf() && leaf.count() == 0;
        Ok(empty.then_some((index, child, guard)))
    }

    /// The unswizzled children of the latched `parent` from child `first` on, as (swip offset,
    /// page id), while they lie before `end`: up to the buffer manager's read-ahead depth.
    fn unswizzled_children(
        &self,
        parent: &Node<'_>,
        first: usize,
        end: RangeBound<&[u8]>,
    ) -> Vec<(usize, u64)> {
        let children = (first..=parent.count())
            .take(self.bm.prefetch_depth())
            .take_while(|&child| !beyond(parent.key(child - 1), end));
        self.unswizzled(parent, children)
    }

    /// Rebuilds the exclusively latched parent without children `first + 1..=last`: child
    /// `first` takes over their key range (the separator of `last`, or the upper child's
    /// place).
    fn cut_out(&self, parent: FrameId, guard: &mut ExclusiveGuard<'_>, first: usize, last: usize) {
        let node = self.node(parent);
        let count = node.count();
        debug_assert!(first < last && last <= count);
        let kept_word = node.child_word(first).to_le_bytes();
        let upper_child = if last == count {
            node.child_word(first)
        } else {
            node.child_word(count)
        };
        let entries = node
            .entries(0..count)
            .enumerate()
            .filter_map(|(index, entry)| match index {
                index if index < first || index > last => Some(entry),
                index if index == first && last < count => {
                    Some((node.key(last), Stored::inline(&kept_word[..])))
                }
                _ => None,
            });
        NodeMut::new(self.bm.page_mut(parent, guard)).rebuild(
            node.level(),
            node.lower_fence(),
            node.upper_fence(),
            upper_child,
            entries,
        );
    }

    /// Removes the keys from `from` to `end` from the exclusively latched leaf one by one
    /// (each logged on its own); returns how many. Notes the leaf in `merge` if it became
    /// underfull.
    fn remove_in_leaf(
        &self,
        leaf: FrameId,
        guard: &mut ExclusiveGuard<'_>,
        from: &RangeBound<Vec<u8>>,
        end: RangeBound<&[u8]>,
        merge: &mut Vec<(u16, Vec<u8>)>,
    ) -> u64 {
        let node = self.node(leaf);
        let first = match from {
            RangeBound::Unbounded => 0,
            RangeBound::Included(key) => node.lower_bound(key).0,
            RangeBound::Excluded(key) => node.upper_bound(key),
        };
        let last = match end {
            RangeBound::Unbounded => node.count(),
            RangeBound::Included(key) => node.upper_bound(key),
            RangeBound::Excluded(key) => node.lower_bound(key).0,
        };
        let mut underfull = None;
        // The large value a removal drops, which its record names.
        let mut replaced = Vec::new();
        for index in (first..last).rev() {
            let key = self.node(leaf).key(index).to_vec();
            replaced.clear();
            let removal = self.remove_from_leaf(leaf, guard, index, &key, 0, &mut replaced);
            if let Removal::Merge(..) = removal {
                underfull = Some(key);
            }
        }
        if let Some(key) = underfull {
            merge.push((0, key));
        }
        last.saturating_sub(first) as u64
    }

    /// Logs a step of removal `removal` (the pages it changed and freed, the large values
    /// their leaves referenced, the `keys` of the leaves it cut out), and takes those keys
    /// off the tree's count.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log_progress(
        &self,
        changed: &mut [(FrameId, &mut ExclusiveGuard<'_>)],
        freed: &[FrameId],
        blobs: &[BlobRef],
        removal: u64,
        keys: u64,
        from: &RangeBound<Vec<u8>>,
        through: &Option<Vec<u8>>,
    ) {
        let step = RangeStep {
            removal,
            tree: self.root_page_id,
            keys,
            from: from.clone(),
            through: through.clone(),
        };
        self.bm
            .log_range_step(changed, freed, blobs, &step, self.keys.stripe());
    }
}
