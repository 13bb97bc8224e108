//! The B+-tree on the buffer manager, synchronized by optimistic lock coupling (paper §IV-I,
//! Leis et al. 2019).
//!
//! * Lookups and scans take no latch: they read each node's version, read the node, and
//!   validate the parent after reading the child's version. After repeated conflicts the
//!   buffer manager's retry loop switches them to shared-latch coupling.
//! * Writes descend the same way and latch only the leaf exclusively (upgrading the version
//!   they read). A full leaf is split by a separate step that latches the parent and the node;
//!   if the parent is full too, the parent is split first. An underfull node is merged with a
//!   swizzled sibling under the parent's latch; the emptied page is deleted through the epoch
//!   mechanism.
//! * The root never moves: its page id is what the catalog records, and a root split moves the
//!   root's contents into two new children instead. Roots are never unswizzled.
//! * Range scans read one leaf per epoch and continue by descending to the keys above that
//!   leaf's upper fence, so no leaf links are needed and every page keeps one owning swip.
//!
//! Every loop over tree levels is bounded by `MAX_DEPTH`; a node whose level does not decrease
//! by one per step is treated as corruption, never followed forever.

pub(crate) mod check;
pub(crate) mod node;
mod split;

use crate::buffer::policy::Policy;
use crate::buffer::{
    BufferManager, ChildCheck, FrameId, FrameState, PageCheck, PageKind, Swip, SwipTarget,
};
use crate::error::{Error, Result};
use crate::io::page::PageType;
use crate::sync::{Attempt, ExclusiveGuard, LatchMode, Restart, SharedGuard};
use node::{entry_size, Bound, Node, NodeMut};
use split::{Incoming, Separator, SplitPlan};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Deepest tree a descent follows (a corrupt level field cannot loop forever).
const MAX_DEPTH: usize = 32;

/// One B+-tree: a root page in the buffer pool.
pub(crate) struct BTree<P: Policy> {
    bm: Arc<BufferManager<P>>,
    /// The root's frame. Changes only while no handle uses the tree (see [`Self::attach`]),
    /// so every operation, which runs through a handle, sees one value throughout.
    root: AtomicU32,
    root_page_id: u64,
    /// Handles (`Tree`s and their iterators) using this tree; at zero its root may leave the
    /// pool.
    handles: AtomicUsize,
}

/// A node reached by a descent and how it is held.
enum Held<'a> {
    Optimistic {
        frame: FrameId,
        version: u64,
    },
    Shared {
        frame: FrameId,
        _guard: SharedGuard<'a>,
    },
    Exclusive {
        frame: FrameId,
        guard: ExclusiveGuard<'a>,
    },
}

/// What a descent will do with the node it stops at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Intent {
    Read,
    Write,
}

/// A node and its parent, both latched exclusively; `index` is the node's child index in the
/// parent.
struct ParentAndChild<'a> {
    parent: FrameId,
    parent_guard: ExclusiveGuard<'a>,
    index: usize,
    child_guard: ExclusiveGuard<'a>,
}

/// What removing a key from its leaf asks the caller to do next.
enum Removal {
    Done(bool),
    /// The key was removed and the leaf in this frame has become underfull: merge it.
    Merge(FrameId),
}

/// Leaves at most this full (in bytes used) after a removal are merged with a sibling.
fn underfull(node: &Node<'_>, page_size: usize) -> bool {
    node.used_space() < page_size / 4
}

impl<P: Policy> BTree<P> {
    /// Creates an empty tree: a new root leaf, hot for as long as the tree is open.
    pub(crate) fn create(bm: &Arc<BufferManager<P>>) -> Result<BTree<P>> {
        let (root, root_page_id) = bm.run(|_| {
            let (frame, mut guard) = bm.allocate_page(PageType::BTreeLeaf, None)?;
            NodeMut::new(bm.page_mut(frame, &mut guard)).init(0, None, None);
            Ok((frame, bm.frame(frame).page_id()))
        })?;
        Ok(BTree {
            bm: bm.clone(),
            root: AtomicU32::new(root),
            root_page_id,
            handles: AtomicUsize::new(0),
        })
    }

    /// Opens the tree whose root is page `root_page_id`.
    pub(crate) fn open(bm: &Arc<BufferManager<P>>, root_page_id: u64) -> Result<BTree<P>> {
        let root = bm.load_root(root_page_id, Self::check_root)?;
        Ok(BTree {
            bm: bm.clone(),
            root: AtomicU32::new(root),
            root_page_id,
            handles: AtomicUsize::new(0),
        })
    }

    fn check_root(page: crate::buffer::PageView<'_>) -> std::result::Result<(), String> {
        Node::new(page).check_as_root()
    }

    /// The root's frame.
    #[inline]
    fn root(&self) -> FrameId {
        self.root.load(Ordering::Acquire)
    }

    /// Counts a new handle.
    pub(crate) fn add_handle(&self) {
        self.handles.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts a dropped handle; true if it was the last.
    pub(crate) fn drop_handle(&self) -> bool {
        self.handles.fetch_sub(1, Ordering::AcqRel) == 1
    }

    pub(crate) fn has_handles(&self) -> bool {
        self.handles.load(Ordering::Acquire) > 0
    }

    /// Lets the root leave the pool: the tree is not used until [`Self::attach`]. The caller
    /// serializes `attach` and `detach` and has checked that no handle is left.
    pub(crate) fn detach(&self) {
        debug_assert!(!self.has_handles());
        self.bm.release_root(self.root(), self.root_page_id);
    }

    /// Makes the root hot again (bringing it in if it left) before a handle uses the tree.
    pub(crate) fn attach(&self) -> Result<()> {
        debug_assert!(!self.has_handles());
        let frame = self
            .bm
            .reclaim_root(self.root(), self.root_page_id, Self::check_root)?;
        self.root.store(frame, Ordering::Release);
        Ok(())
    }

    pub(crate) fn root_page_id(&self) -> u64 {
        self.root_page_id
    }

    fn node(&self, frame: FrameId) -> Node<'_> {
        Node::new(self.bm.page(frame))
    }

    fn corrupt(&self, frame: FrameId, reason: &'static str) -> Restart {
        Restart::Corrupt {
            page_id: self.bm.frame(frame).page_id(),
            reason,
        }
    }

    /// Descends along `key` (with `bound`) to the node at `level` and holds it as `mode` and
    /// `intent` ask: optimistic readers and writers get a version, pessimistic ones a shared
    /// latch (readers) or an exclusive one (writers).
    fn descend(
        &self,
        key: &[u8],
        bound: Bound,
        level: u16,
        mode: LatchMode,
        intent: Intent,
    ) -> Attempt<Held<'_>> {
        match mode {
            LatchMode::Optimistic => self.descend_optimistic(key, bound, level),
            LatchMode::Pessimistic => self.descend_pessimistic(key, bound, level, intent),
        }
    }

    fn descend_optimistic(&self, key: &[u8], bound: Bound, level: u16) -> Attempt<Held<'_>> {
        let mut frame = self.root();
        let mut version = self.bm.frame(frame).latch.optimistic()?;
        for _ in 0..MAX_DEPTH {
            self.bm.touch(frame);
            let node = self.node(frame);
            let node_level = node.level();
            if node_level <= level {
                self.bm.frame(frame).latch.validate(version)?;
                if node_level < level {
                    return Err(Restart::Conflict);
                }
                return Ok(Held::Optimistic { frame, version });
            }
            let index = node.search(key, bound);
            let offset = node.child_offset(index);
            let word = node.child_word(index);
            self.bm.frame(frame).latch.validate(version)?;
            match self.bm.child(word) {
                Some(SwipTarget::Frame(child)) => {
                    let child_version = self.bm.frame(child).latch.optimistic()?;
                    if !self.bm.holds(child, word) {
                        return Err(Restart::Conflict);
                    }
                    self.bm.frame(frame).latch.validate(version)?;
                    frame = child;
                    version = child_version;
                }
                Some(SwipTarget::Page(page_id)) => {
                    return Err(Restart::Swizzle {
                        frame,
                        version,
                        offset: offset as u32,
                        page_id,
                    })
                }
                None => return Err(self.corrupt(frame, "malformed child reference")),
            }
        }
        Err(self.corrupt(frame, "tree deeper than the depth limit"))
    }

    fn descend_pessimistic(
        &self,
        key: &[u8],
        bound: Bound,
        level: u16,
        intent: Intent,
    ) -> Attempt<Held<'_>> {
        let mut frame = self.root();
        self.bm.touch(frame);
        let mut guard = self.bm.frame(frame).latch.lock_shared();
        if self.node(frame).level() == level && intent == Intent::Write {
            drop(guard);
            let guard = self.bm.frame(frame).latch.lock_exclusive();
            if self.node(frame).level() != level {
                return Err(Restart::Conflict);
            }
            return Ok(Held::Exclusive { frame, guard });
        }
        for _ in 0..MAX_DEPTH {
            let node = self.node(frame);
            let node_level = node.level();
            if node_level == level {
                return Ok(Held::Shared {
                    frame,
                    _guard: guard,
                });
            }
            if node_level < level {
                return Err(Restart::Conflict);
            }
            let index = node.search(key, bound);
            let word = node.child_word(index);
            match self.bm.child(word) {
                Some(SwipTarget::Frame(child)) => {
                    self.bm.touch(child);
                    let child_latch = &self.bm.frame(child).latch;
                    if node_level - 1 == level && intent == Intent::Write {
                        let child_guard = child_latch.lock_exclusive();
                        if !self.bm.holds(child, word) {
                            return Err(Restart::Conflict);
                        }
                        if self.node(child).level() != level {
                            return Err(
                                self.corrupt(child, "node level does not follow its parent's")
                            );
                        }
                        return Ok(Held::Exclusive {
                            frame: child,
                            guard: child_guard,
                        });
                    }
                    let child_guard = child_latch.lock_shared();
                    if !self.bm.holds(child, word) {
                        return Err(Restart::Conflict);
                    }
                    if self.node(child).level() != node_level - 1 {
                        return Err(self.corrupt(child, "node level does not follow its parent's"));
                    }
                    guard = child_guard;
                    frame = child;
                }
                Some(SwipTarget::Page(page_id)) => {
                    return Err(Restart::Swizzle {
                        frame,
                        version: guard.version(),
                        offset: node.child_offset(index) as u32,
                        page_id,
                    })
                }
                None => return Err(self.corrupt(frame, "malformed child reference")),
            }
        }
        Err(self.corrupt(frame, "tree deeper than the depth limit"))
    }

    /// The node at `level` on `key`'s path, latched exclusively.
    fn descend_exclusive(
        &self,
        key: &[u8],
        level: u16,
        mode: LatchMode,
    ) -> Attempt<(FrameId, ExclusiveGuard<'_>)> {
        match self.descend(key, Bound::AtLeast, level, mode, Intent::Write)? {
            Held::Optimistic { frame, version } => {
                let guard = self.bm.frame(frame).latch.try_upgrade(version)?;
                Ok((frame, guard))
            }
            Held::Exclusive { frame, guard } => Ok((frame, guard)),
            Held::Shared { .. } => unreachable!("write descents end exclusive"),
        }
    }

    /// Runs `read` on the leaf for `key`/`bound` and returns its result once the read is known
    /// to be consistent. `read` must copy what it needs: it may see torn data, in which case
    /// its result is thrown away and the attempt restarts.
    pub(crate) fn read_leaf<R>(
        &self,
        key: &[u8],
        bound: Bound,
        mode: LatchMode,
        read: impl FnOnce(Node<'_>) -> R,
    ) -> Attempt<R> {
        self.read_node(key, bound, 0, mode, read)
            .map(|(result, _)| result)
    }

    /// `read_leaf` for the node at any `level`; also returns the node's frame.
    fn read_node<R>(
        &self,
        key: &[u8],
        bound: Bound,
        level: u16,
        mode: LatchMode,
        read: impl FnOnce(Node<'_>) -> R,
    ) -> Attempt<(R, FrameId)> {
        match self.descend(key, bound, level, mode, Intent::Read)? {
            Held::Optimistic { frame, version } => {
                let result = read(self.node(frame));
                self.bm.frame(frame).latch.validate(version)?;
                Ok((result, frame))
            }
            Held::Shared { frame, _guard } => Ok((read(self.node(frame)), frame)),
            Held::Exclusive { .. } => unreachable!("read descents are not exclusive"),
        }
    }

    /// Copies the value of `key` into `buffer`; returns whether the key exists.
    pub(crate) fn lookup(&self, key: &[u8], buffer: &mut Vec<u8>) -> Result<bool> {
        self.bm.run(|mode| {
            self.read_leaf(key, Bound::AtLeast, mode, |leaf| {
                buffer.clear();
                match leaf.lower_bound(key) {
                    (index, true) => {
                        buffer.extend_from_slice(leaf.value(index));
                        true
                    }
                    _ => false,
                }
            })
        })
    }

    /// Inserts or overwrites.
    pub(crate) fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let page_size = self.bm.page_size();
        let incoming = Incoming {
            key,
            size: entry_size(true, key.len(), value.len()),
        };
        loop {
            let full_leaf = self.bm.run(|mode| {
                let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
                let leaf = self.node(frame);
                let (index, found) = leaf.lower_bound(key);
                if found && leaf.value(index).len() == value.len() {
                    NodeMut::new(self.bm.page_mut(frame, &mut guard)).overwrite_value(index, value);
                } else if split::has_room(&leaf, incoming) {
                    let mut leaf = NodeMut::new(self.bm.page_mut(frame, &mut guard));
                    if found {
                        leaf.remove_at(index);
                    }
                    leaf.insert_at(index, key, value);
                } else {
                    return Ok(Some(frame));
                }
                self.bm.frame(frame).set_dirty(true);
                debug_assert!(self.node(frame).used_space() <= page_size);
                Ok(None)
            })?;
            match full_leaf {
                None => return Ok(()),
                Some(frame) => self.bm.run(|mode| self.split(frame, key, incoming, mode))?,
            }
        }
    }

    /// Rewrites the value of `key` in place with `modify`, which sees a copy of the current
    /// value and may change its bytes but not its length. Runs at most once, under the leaf's
    /// exclusive latch, so updates of one key are atomic with respect to each other. Returns
    /// `None` (without calling `modify`) if the key is absent.
    pub(crate) fn update<R>(
        &self,
        key: &[u8],
        value: &mut Vec<u8>,
        modify: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>> {
        let mut modify = Some(modify);
        self.bm.run(|mode| {
            let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
            let leaf = self.node(frame);
            let (index, found) = leaf.lower_bound(key);
            if !found {
                return Ok(None);
            }
            value.clear();
            value.extend_from_slice(leaf.value(index));
            let modify = modify
                .take()
                .expect("nothing restarts after the latch is held");
            let result = modify(value);
            NodeMut::new(self.bm.page_mut(frame, &mut guard)).overwrite_value(index, value);
            self.bm.frame(frame).set_dirty(true);
            Ok(Some(result))
        })
    }

    /// Removes `key`; returns whether it existed.
    pub(crate) fn remove(&self, key: &[u8]) -> Result<bool> {
        let page_size = self.bm.page_size();
        let step = self.bm.run(|mode| {
            let exists =
                self.read_leaf(key, Bound::AtLeast, mode, |leaf| leaf.lower_bound(key).1)?;
            if !exists {
                return Ok(Removal::Done(false));
            }
            let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
            let (index, found) = self.node(frame).lower_bound(key);
            if !found {
                return Ok(Removal::Done(false));
            }
            NodeMut::new(self.bm.page_mut(frame, &mut guard)).remove_at(index);
            self.bm.frame(frame).set_dirty(true);
            if frame != self.root() && underfull(&self.node(frame), page_size) {
                return Ok(Removal::Merge(frame));
            }
            Ok(Removal::Done(true))
        })?;
        match step {
            Removal::Done(existed) => Ok(existed),
            Removal::Merge(frame) => {
                self.merge_upwards(frame, key)?;
                Ok(true)
            }
        }
    }

    /// Merges the underfull node in `frame` and, while that leaves its parent underfull, the
    /// parent too; collapses a root left with a single child.
    fn merge_upwards(&self, mut frame: FrameId, key: &[u8]) -> Result<()> {
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

    /// Level of the node in `frame`, read optimistically.
    fn level_of(&self, frame: FrameId) -> Attempt<u16> {
        let latch = &self.bm.frame(frame).latch;
        let version = latch.optimistic()?;
        let level = self.node(frame).level();
        latch.validate(version)?;
        Ok(level)
    }

    /// Latches the parent of `target` (found along `key`) and `target` itself exclusively.
    /// `None` if `target` is no longer on `key`'s path (it was split, merged or evicted since
    /// the caller saw it): the caller then gives up this step and retries its operation.
    fn latch_parent_and_child(
        &self,
        target: FrameId,
        key: &[u8],
        mode: LatchMode,
    ) -> Attempt<Option<ParentAndChild<'_>>> {
        let level = self.level_of(target)?;
        if level >= self.level_of(self.root())? {
            return Ok(None);
        }
        let (parent, parent_guard) = self.descend_exclusive(key, level + 1, mode)?;
        if self.bm.frame(parent).state() != FrameState::Hot {
            return Err(Restart::Conflict);
        }
        let index = self.node(parent).search(key, Bound::AtLeast);
        let word = self.node(parent).child_word(index);
        if word != self.bm.reference(target) {
            return Ok(None);
        }
        let guard = self.bm.frame(target).latch.lock_exclusive();
        if !self.bm.holds(target, word) {
            return Ok(None);
        }
        Ok(Some(ParentAndChild {
            parent,
            parent_guard,
            index,
            child_guard: guard,
        }))
    }

    /// Splits the node in `target` (on `key`'s path) so that `incoming` fits, unless it fits
    /// by now. If its parent cannot take the separator, splits the parent instead; the caller
    /// retries its write either way.
    fn split(
        &self,
        target: FrameId,
        key: &[u8],
        incoming: Incoming<'_>,
        mode: LatchMode,
    ) -> Attempt<()> {
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
        let Some(plan) = split::plan(&node, incoming) else {
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
        // Progress: no entry lost or duplicated, and the incoming entry has room on its side
        // (the half it shares a page with is strictly smaller than the node was).
        debug_assert_eq!(
            self.node(left).count() + self.node(target).count() + usize::from(!node.is_leaf()),
            entries_before
        );
        debug_assert!(split::has_room(
            &self.node(if incoming.key <= &separator[..] {
                left
            } else {
                target
            }),
            incoming
        ));
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
            Some((frame, guard)) => (frame, self.bm.page_mut(frame, guard)),
            None => (source, self.bm.page_mut(source, source_guard)),
        };
        NodeMut::new(right_page).rebuild(
            level,
            Some(separator),
            node.upper_fence(),
            node.child_word(count),
            node.entries(plan.right_start(leaf)..count),
        );
        self.adopt_children(left);
        if separate_right {
            self.adopt_children(right_frame);
        }
    }

    /// Points the parent link of every swizzled child of `frame` at `frame`.
    fn adopt_children(&self, frame: FrameId) {
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
    fn split_root(&self, mut guard: ExclusiveGuard<'_>, incoming: Incoming<'_>) -> Attempt<()> {
        let root = self.root();
        let node = self.node(root);
        if node.level() >= node::MAX_LEVEL {
            return Err(self.corrupt(root, "root split beyond the level limit"));
        }
        let Some(plan) = split::plan(&node, incoming) else {
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
            std::iter::once((&separator[..], &left_word[..])),
        );
        self.bm.frame(root).set_dirty(true);
        debug_assert!(split::has_room(
            &self.node(if incoming.key <= &separator[..] {
                left
            } else {
                right
            }),
            incoming
        ));
        Ok(())
    }

    /// Merges the node in `target` with a swizzled sibling if both fit in one page. Returns the
    /// parent if a merge happened and the parent is now underfull (or is a root with one
    /// child).
    fn merge(&self, target: FrameId, key: &[u8], mode: LatchMode) -> Attempt<Option<FrameId>> {
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
        let bridge = (!leaf).then_some((separator, &upper_word[..]));
        let size = Node::size_of(
            leaf,
            left_node.lower_fence(),
            right_node.upper_fence(),
            merged_entries()
                .chain(bridge)
                .chain(right_node.entries(0..right_node.count())),
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
    /// contents into the root, lowering the tree by one level.
    fn collapse_root(&self) -> Attempt<()> {
        let mut guard = self.bm.frame(self.root()).latch.lock_exclusive();
        let root = self.node(self.root());
        if root.is_leaf() || root.count() > 0 {
            return Ok(());
        }
        let word = root.child_word(0);
        let Some(SwipTarget::Frame(child)) = self.bm.child(word) else {
            return Ok(());
        };
        let child_guard = self.bm.frame(child).latch.lock_exclusive();
        if !self.bm.holds(child, word) {
            return Ok(());
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
        self.bm.delete_page(child, child_guard);
        Ok(())
    }

    /// Copies entries of one leaf from the lower end of a range: those at or after `start`
    /// (with `bound`) for which `keep` holds, stopping at the first that fails or after
    /// `limit` entries, into `batch`: the entries, whether `keep` stopped the scan, whether the
    /// limit did, and the leaf's upper fence.
    ///
    /// `leaves_done` is how many leaves the scan has finished before this one. Past its first
    /// leaf, a scan that had to bring this leaf in (from the cooling stage or the disk) is
    /// running through data that is not in memory: it requests the next leaves ahead, 2 after
    /// the first leaf and twice as many per further leaf up to the configured depth, and hands
    /// the leaf back to the cooling stage once read (paper §IV-I: prefetching and hinting).
    pub(crate) fn scan_leaf(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        limit: usize,
        leaves_done: usize,
        batch: &mut LeafBatch,
    ) -> Result<()> {
        let mut brought_in = false;
        let (covers_start, leaf) = self.bm.run(|mode| {
            let attempt = self.read_node(start, bound, 0, mode, |leaf| {
                batch.clear();
                for index in leaf.search(start, bound)..leaf.count() {
                    if batch.len() == limit {
                        batch.limited = true;
                        break;
                    }
                    let key = leaf.key(index);
                    if !keep(key) {
                        batch.stopped = true;
                        break;
                    }
                    batch.push(key, leaf.value(index));
                }
                batch.set_upper_fence(leaf.upper_fence());
                leaf.covers(start, bound)
            });
            if let Err(Restart::Swizzle { frame, .. }) = &attempt {
                // The missing page is a child of `frame`: a leaf if `frame` is on level 1.
                brought_in |= self.node(*frame).level() == 1;
            }
            attempt
        })?;
        // Every node is checked against its parent when it comes in, so this holds; checked
        // again because a scan that did not move forward would never end.
        if !covers_start {
            return Err(Error::corruption(
                self.bm.frame(leaf).page_id(),
                "leaf reached by a scan does not cover the scan's position",
            ));
        }
        if brought_in && leaves_done > 0 {
            let ahead = (2usize << leaves_done.min(16)).min(self.bm.prefetch_depth());
            if ahead > 0 {
                self.read_ahead(start, bound, keep, ahead)?;
            }
            self.bm.cool_scanned(leaf);
        }
        Ok(())
    }

    /// Requests the (up to) `ahead` leaves after the one holding `start` that are not in
    /// memory, from the prefetch threads. Only siblings under the same parent are requested
    /// (the next parent's leaves follow when the scan arrives there), and only those whose
    /// lower separator `keep` accepts: nothing past the end of the scan's range.
    fn read_ahead(
        &self,
        start: &[u8],
        bound: Bound,
        keep: &dyn Fn(&[u8]) -> bool,
        ahead: usize,
    ) -> Result<()> {
        let wanted = self.bm.run(|mode| {
            if self.level_of(self.root())? == 0 {
                return Ok(None);
            }
            self.read_node(start, bound, 1, mode, |parent| {
                let index = parent.search(start, bound);
                let last = (index + ahead).min(parent.count());
                // Child `c` holds the keys above separator `c - 1`.
                ((index + 1)..=last)
                    .take_while(|&child| keep(parent.key(child - 1)))
                    .filter_map(|child| match self.bm.child(parent.child_word(child)) {
                        Some(SwipTarget::Page(page_id)) => {
                            Some((parent.child_offset(child), page_id))
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .map(Some)
        })?;
        if let Some((children, parent)) = wanted {
            if !children.is_empty() {
                self.bm.prefetch(parent, &children);
            }
        }
        Ok(())
    }
}

/// One leaf's worth of a range scan, copied flat into reusable buffers (no allocation per
/// entry once the buffers have grown).
#[derive(Default)]
pub(crate) struct LeafBatch {
    /// Keys and values, back to back.
    bytes: Vec<u8>,
    /// Key and value length of each entry, in order.
    lengths: Vec<(usize, usize)>,
    /// The range's end was reached inside this leaf.
    pub(crate) stopped: bool,
    /// The entry limit was reached before the leaf's end: continue after the last entry.
    pub(crate) limited: bool,
    /// Where the next leaf starts (`None`: this was the last leaf).
    upper_fence: Option<Vec<u8>>,
}

impl LeafBatch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.lengths.clear();
        self.stopped = false;
        self.limited = false;
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.lengths.push((key.len(), value.len()));
    }

    fn set_upper_fence(&mut self, fence: Option<&[u8]>) {
        match (fence, &mut self.upper_fence) {
            (Some(fence), Some(kept)) => {
                kept.clear();
                kept.extend_from_slice(fence);
            }
            (fence, kept) => *kept = fence.map(<[u8]>::to_vec),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    pub(crate) fn upper_fence(&self) -> Option<&[u8]> {
        self.upper_fence.as_deref()
    }

    /// The entries, in key order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        self.lengths.iter().map(move |&(key_len, value_len)| {
            let key = &self.bytes[at..at + key_len];
            let value = &self.bytes[at + key_len..at + key_len + value_len];
            at += key_len + value_len;
            (key, value)
        })
    }

    /// The last entry's key.
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        let &(key_len, value_len) = self.lengths.last()?;
        let start = self.bytes.len() - key_len - value_len;
        Some(&self.bytes[start..start + key_len])
    }
}

/// What the buffer manager needs to know about B-tree pages: inner nodes' children, and the
/// checks of nodes read from disk and of nodes met through a parent.
pub(crate) fn page_kinds() -> [PageKind; 2] {
    let check: PageCheck = |page| Node::new(page).check_on_disk();
    let check_child: ChildCheck =
        |parent, offset, child| Node::new(child).check_as_child_of(&Node::new(parent), offset);
    [
        PageKind {
            page_type: PageType::BTreeLeaf,
            children: None,
            check: Some(check),
            check_child: None,
        },
        PageKind {
            page_type: PageType::BTreeInner,
            children: Some(Node::visit_children),
            check: Some(check),
            check_child: Some(check_child),
        },
    ]
}

#[cfg(test)]
mod tests;
