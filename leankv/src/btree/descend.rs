//! Descending the tree: optimistically (versions read and validated, no latch taken), with
//! shared-latch coupling after repeated conflicts, or to an exclusively latched leaf for a
//! write; and reading a leaf or any node at a level through such a descent.
//!
//! Invariants: a child is read only after the parent's version was read, and used only after
//! the parent validated; each step goes exactly one level down (checked: a node whose level
//! does not decrease by one is corruption), and a descent takes at most `MAX_DEPTH` steps.

use super::*;

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
pub(super) struct ParentAndChild<'a> {
    pub(super) parent: FrameId,
    pub(super) parent_guard: ExclusiveGuard<'a>,
    pub(super) index: usize,
    pub(super) child_guard: ExclusiveGuard<'a>,
}

impl<P: Policy> BTree<P> {
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
        self.check_live()?;
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
    pub(super) fn descend_exclusive(
        &self,
        key: &[u8],
        level: u16,
        mode: LatchMode,
    ) -> Attempt<(FrameId, ExclusiveGuard<'_>)> {
        self.descend_exclusive_to(key, Bound::AtLeast, level, mode)
    }

    /// The node at `level` that a search for `key` with `bound` leads to, latched
    /// exclusively.
    pub(super) fn descend_exclusive_to(
        &self,
        key: &[u8],
        bound: Bound,
        level: u16,
        mode: LatchMode,
    ) -> Attempt<(FrameId, ExclusiveGuard<'_>)> {
        match self.descend(key, bound, level, mode, Intent::Write)? {
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
    pub(super) fn read_node<R>(
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
        loop {
            // Whether the key holds a large value (`buffer` then holds its reference).
            let large = self.bm.run(|mode| {
                self.read_leaf(key, Bound::AtLeast, mode, |leaf| {
                    buffer.clear();
                    copy_value(leaf, key, buffer)
                })
            })?;
            match large {
                None => return Ok(false),
                Some(false) => return Ok(true),
                Some(true) if self.read_large(key, buffer)? => return Ok(true),
                Some(true) => {} // replaced while it was read
            }
        }
    }

    /// Level of the node in `frame`, read optimistically.
    pub(super) fn level_of(&self, frame: FrameId) -> Attempt<u16> {
        let latch = &self.bm.frame(frame).latch;
        let version = latch.optimistic()?;
        let level = self.node(frame).level();
        latch.validate(version)?;
        Ok(level)
    }

    /// Latches the parent of `target` (found along `key`) and `target` itself exclusively.
    /// `None` if `target` is no longer on `key`'s path (it was split, merged or evicted since
    /// the caller saw it): the caller then gives up this step and retries its operation.
    pub(super) fn latch_parent_and_child(
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
}

/// Appends the value of `key` in `leaf` to `buffer`: `None` if absent, else whether it is a
/// large value's reference.
pub(super) fn copy_value(leaf: Node<'_>, key: &[u8], buffer: &mut Vec<u8>) -> Option<bool> {
    match leaf.lower_bound(key) {
        (index, true) => {
            buffer.extend_from_slice(leaf.value(index));
            Some(leaf.is_blob(index))
        }
        _ => None,
    }
}
