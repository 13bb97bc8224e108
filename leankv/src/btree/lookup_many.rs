//! Looking up many keys at once so that their reads overlap: every key is first looked up as
//! far as memory goes, the pages those lookups stopped at are read ahead, and the keys that
//! stopped are looked up again later, waiting for those reads instead of issuing them one at a
//! time. The two passes are pipelined: up to the read-ahead depth of keys wait for their pages
//! (pages read ahead wait in the cooling stage, and too many would evict each other before
//! use); when a group's misses would exceed it, waiting keys are answered first (those whose
//! pages arrived, else the oldest), and the group's pages are asked for at once. A worker thus
//! keeps a steady number of reads in flight through a long list of keys, instead of a burst
//! that drains to nothing before the next batch of reads starts.
//!
//! The second lookup of a key goes all the way: if the page read ahead was an inner node, the
//! pages below it are read on demand, so every key is answered after two passes at most. A
//! large value is read where the first pass finds it (its pages are never in the pool).
//!
//! The first pass takes the keys [`GROUP`] at a time and interleaves their descents: each key
//! takes one step (enter a node, or search it) and starts loading what its next step reads
//! (the child's latch and header, or the slots its search will probe) before the next key
//! takes its step, so the group's cache misses overlap instead of each waiting in turn (in
//! memory a lookup mostly waits for memory). Each descent is the optimistic one of
//! `descend`, step by step: the child's version is read before its parent validates. A key
//! whose descent meets a conflict, a large value, a latch mode other than optimistic or
//! anything unexpected is looked up alone instead.

use super::descend::copy_value;
use super::*;
use std::collections::VecDeque;

impl<P: Policy> BTree<P> {
    /// Calls `found(index, value)` once for each of `keys` (in no particular order; `index`
    /// is the key's position in `keys`, `value` `None` if absent). Keys for which `skip`
    /// holds are answered absent without a search.
    pub(crate) fn lookup_many<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        skip: impl Fn(&[u8]) -> bool,
        buffer: &mut Vec<u8>,
        mut found: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        // Keys whose pages were asked for, oldest first, and this group's misses.
        let mut waiting = VecDeque::new();
        let (mut missing, mut targets) = (Vec::new(), Vec::new());
        let window = self.bm.prefetch_depth().max(1);
        let mut answers: [Answer; GROUP] = std::array::from_fn(|_| Answer::Alone);
        for (start, chunk) in (0..).step_by(GROUP).zip(keys.chunks(GROUP)) {
            let (mut group, mut len) = ([0; GROUP], 0);
            for (index, key) in (start..).zip(chunk) {
                if skip(key.as_ref()) {
                    found(index, None);
                } else {
                    group[len] = index;
                    len += 1;
                }
            }
            let (group, answers) = (&group[..len], &mut answers[..len]);
            self.lookup_group(keys, group, buffer, answers)?;
            for (&index, answer) in group.iter().zip(answers.iter()) {
                match answer {
                    Answer::Value(range) => found(index, Some(&buffer[range.clone()])),
                    Answer::Absent => found(index, None),
                    Answer::ReadAhead(target) => {
                        missing.push(index);
                        targets.push(*target);
                    }
                    Answer::Alone => {}
                }
            }
            // Keys the group could not answer, one at a time (the values above are used).
            for (&index, answer) in group.iter().zip(answers.iter()) {
                if !matches!(answer, Answer::Alone) {
                    continue;
                }
                match self.lookup_in_memory(keys[index].as_ref(), buffer)? {
                    Ok(present) => found(index, present.then_some(&buffer[..])),
                    Err(target) => {
                        missing.push(index);
                        targets.push(target);
                    }
                }
            }
            for (indexes, targets) in missing.chunks(window).zip(targets.chunks_mut(window)) {
                while waiting.len() + indexes.len() > window {
                    self.answer_waiting(keys, &mut waiting, buffer, &mut found)?;
                }
                let page_ids = targets.iter().map(|target| target.page_id);
                waiting.extend(indexes.iter().copied().zip(page_ids));
                self.bm.read_ahead(targets);
            }
            missing.clear();
            targets.clear();
        }
        while !waiting.is_empty() {
            self.answer_waiting(keys, &mut waiting, buffer, &mut found)?;
        }
        Ok(())
    }

    /// Answers one of the keys `waiting` for their pages (key index, page id; oldest first):
    /// the first whose page arrived, else the oldest, waiting for its read. Reads end out of
    /// order: answering the oldest first held the window's other keys, read already, behind
    /// the slowest read, and kept fewer reads in flight than the window allows.
    fn answer_waiting<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        waiting: &mut VecDeque<(usize, u64)>,
        buffer: &mut Vec<u8>,
        found: &mut impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let arrived = self
            .bm
            .first_not_in_flight(waiting.iter().map(|&(_, page_id)| page_id));
        let Some((index, _)) = waiting.remove(arrived.unwrap_or(0)) else {
            return Ok(());
        };
        let present = self.lookup(keys[index].as_ref(), buffer)?;
        found(index, present.then_some(&buffer[..]));
        Ok(())
    }

    /// Looks up `keys[i]` for each `i` in `group` (at most [`GROUP`]) as far as memory goes,
    /// their descents interleaved (see the module notes): `answers[j]` answers `group[j]`,
    /// values copied into `buffer`.
    fn lookup_group<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        group: &[usize],
        buffer: &mut Vec<u8>,
        answers: &mut [Answer],
    ) -> Result<()> {
        debug_assert!(group.len() <= GROUP && answers.len() == group.len());
        let mut steps = [Step::Done; GROUP];
        self.bm.run(|mode| {
            buffer.clear();
            answers.fill(Answer::Alone);
            if mode != LatchMode::Optimistic || self.check_live().is_err() {
                return Ok(());
            }
            let root = self.root();
            let Ok(version) = self.bm.frame(root).latch.optimistic() else {
                return Ok(());
            };
            for step in &mut steps[..group.len()] {
                *step = Step::Search {
                    frame: root,
                    version,
                };
            }
            let mut active = group.len();
            while active > 0 {
                for ((step, &index), answer) in steps.iter_mut().zip(group).zip(answers.iter_mut())
                {
                    if matches!(step, Step::Done) {
                        continue;
                    }
                    *step = self.take_step(*step, keys[index].as_ref(), buffer, answer);
                    if matches!(step, Step::Done) {
                        active -= 1;
                    }
                }
            }
            Ok(())
        })
    }

    /// One step of a key's interleaved descent; what it settles goes into `answer` (which
    /// stays `Alone` for a key to be looked up alone).
    fn take_step(&self, step: Step, key: &[u8], buffer: &mut Vec<u8>, answer: &mut Answer) -> Step {
        match step {
            Step::Enter {
                parent,
                version,
                word,
                child,
                level,
            } => {
                let Ok(child_version) = self.bm.frame(child).latch.optimistic() else {
                    return Step::Done;
                };
                if !self.bm.holds(child, word)
                    || self.bm.frame(parent).latch.validate(version).is_err()
                {
                    return Step::Done;
                }
                let node = self.node(child);
                if node.level() != level {
                    // A conflict (the search validates) or corruption: the lone lookup tells.
                    return Step::Done;
                }
                node.prefetch_search(key);
                Step::Search {
                    frame: child,
                    version: child_version,
                }
            }
            Step::Search { frame, version } => {
                self.bm.touch(frame);
                let node = self.node(frame);
                let level = node.level();
                if level == 0 {
                    let start = buffer.len();
                    let settled = match copy_value(node, key, buffer) {
                        None => Answer::Absent,
                        Some(false) => Answer::Value(start..buffer.len()),
                        Some(true) => Answer::Alone, // a large value's reference
                    };
                    if self.bm.frame(frame).latch.validate(version).is_ok() {
                        *answer = settled;
                    }
                    return Step::Done;
                }
                if usize::from(level) > MAX_DEPTH {
                    return Step::Done; // corruption: the lone lookup reports it
                }
                let index = node.search(key, Bound::AtLeast);
                let offset = node.child_offset(index);
                let word = node.child_word(index);
                if self.bm.frame(frame).latch.validate(version).is_err() {
                    return Step::Done;
                }
                match self.bm.child(word) {
                    Some(SwipTarget::Frame(child)) => {
                        self.bm.load_into_cache(child, node::SLOTS);
                        Step::Enter {
                            parent: frame,
                            version,
                            word,
                            child,
                            level: level - 1,
                        }
                    }
                    Some(SwipTarget::Page(page_id)) => {
                        *answer = Answer::ReadAhead(ReadAhead {
                            parent: frame,
                            version,
                            offset,
                            page_id,
                        });
                        Step::Done
                    }
                    None => Step::Done,
                }
            }
            Step::Done => Step::Done,
        }
    }

    /// [`Self::lookup`] as far as memory goes: `Err` with the first page its descent meets
    /// that is not in memory (a leaf, or an inner node above it), with the parent and version
    /// it saw there. A large value is read whole (its pages are never in the pool).
    pub(super) fn lookup_in_memory(
        &self,
        key: &[u8],
        buffer: &mut Vec<u8>,
    ) -> Result<std::result::Result<bool, ReadAhead>> {
        let large = self.bm.run(|mode| {
            match self.read_leaf(key, Bound::AtLeast, mode, |leaf| {
                buffer.clear();
                copy_value(leaf, key, buffer)
            }) {
                Ok(large) => Ok(Ok(large)),
                Err(Restart::Swizzle {
                    frame,
                    version,
                    offset,
                    page_id,
                }) => Ok(Err(ReadAhead {
                    parent: frame,
                    version,
                    offset: offset as usize,
                    page_id,
                })),
                Err(restart) => Err(restart),
            }
        })?;
        match large {
            Err(missing) => Ok(Err(missing)),
            Ok(None) => Ok(Ok(false)),
            Ok(Some(false)) => Ok(Ok(true)),
            Ok(Some(true)) => self.lookup(key, buffer).map(Ok),
        }
    }
}

/// Keys whose descents a lookup of many interleaves: enough misses in flight to keep a core's
/// line fill buffers busy (about ten), few enough that what each step loads is still cached
/// when the key's next step comes.
const GROUP: usize = 8;

/// Where a key's interleaved descent stands (see [`BTree::lookup_group`]).
#[derive(Clone, Copy)]
enum Step {
    /// Search `frame` (read at `version`; its header and the slots to probe are loading).
    Search { frame: FrameId, version: u64 },
    /// Enter `child`, whose swip `word` was read in `parent` at `version`, a node at `level`
    /// (the child's latch and header are loading).
    Enter {
        parent: FrameId,
        version: u64,
        word: u64,
        child: FrameId,
        level: u16,
    },
    /// Settled, or given up to a lookup alone.
    Done,
}

/// What the interleaved first pass found for a key.
#[derive(Clone)]
enum Answer {
    /// Present; its value is these bytes of the buffer.
    Value(std::ops::Range<usize>),
    Absent,
    /// Its descent stopped at a page not in memory.
    ReadAhead(ReadAhead),
    /// Looked up alone instead (a conflict, a large value, a pessimistic latch mode).
    Alone,
}
