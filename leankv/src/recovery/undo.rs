//! Which changes of batches that never committed recovery rolls back, gathered in one pass
//! over the log once the first pass found those batches.
//!
//! Each change of such a batch restores the value before it, last first, unless a committed
//! change to the same key came later (a change of another batch that did not fail, or a step
//! of a range removal covering the key), which then stands. Only the changes of the failed
//! batches, and what later records say of their keys, are kept: memory grows with those
//! batches, not with the log.

use super::{decode_blob, leaf_change_of, log_damage, step_covers, Restore, Undo};
use crate::blob::BlobRef;
use crate::error::Result;
use crate::wal::{Before, RangeStep, Record};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;

/// A change of a batch that never committed.
struct Candidate {
    /// Its position in the log (records from the checkpoint on).
    index: usize,
    tree: u64,
    key: Vec<u8>,
    before: Before,
}

/// A range step on a tree with a change to undo before it, with its removal's end.
struct Step {
    index: usize,
    step: RangeStep,
    end: Bound<Vec<u8>>,
    /// It freed its tree's root (a drop): it removed every key of the tree.
    everything: bool,
}

pub(super) struct UndoScan<'a> {
    incomplete: &'a HashSet<u64>,
    page_size: usize,
    index: usize,
    candidates: Vec<Candidate>,
    /// By tree and key of a candidate: one past the position of the last committed change
    /// to it after the first candidate (0: none).
    last_committed: HashMap<u64, HashMap<Vec<u8>, usize>>,
    /// The end of each range removal begun since the checkpoint.
    ends: HashMap<u64, Bound<Vec<u8>>>,
    steps: Vec<Step>,
    /// By large-value reference a candidate replaced: where it was last put since (if at all).
    last_put: HashMap<Vec<u8>, Option<usize>>,
}

impl<'a> UndoScan<'a> {
    pub(super) fn new(incomplete: &'a HashSet<u64>, page_size: usize) -> Self {
        UndoScan {
            incomplete,
            page_size,
            index: 0,
            candidates: Vec::new(),
            last_committed: HashMap::new(),
            ends: HashMap::new(),
            steps: Vec::new(),
            last_put: HashMap::new(),
        }
    }

    /// Takes note of the log's next record.
    pub(super) fn note(&mut self, record: &Record) {
        let index = self.index;
        self.index += 1;
        if self.incomplete.is_empty() {
            return;
        }
        match record {
            Record::RangeRemoval(removal) => {
                self.ends.insert(removal.removal, removal.end.clone());
            }
            // Only a step on a tree with changes to undo can decide one.
            Record::Structure {
                step: Some(step),
                freed,
                ..
            } if self.last_committed.contains_key(&step.tree) => {
                if let Some(end) = self.ends.get(&step.removal) {
                    self.steps.push(Step {
                        index,
                        step: step.clone(),
                        end: end.clone(),
                        everything: freed.contains(&step.tree),
                    });
                }
            }
            _ => {}
        }
        let Some((tree, batch, key, before)) = leaf_change_of(record) else {
            return;
        };
        if self.incomplete.contains(&batch) {
            self.last_committed
                .entry(tree)
                .or_default()
                .entry(key.to_vec())
                .or_insert(0);
            if let Before::Blob(reference) = before {
                self.last_put.entry(reference.clone()).or_insert(None);
            }
            self.candidates.push(Candidate {
                index,
                tree,
                key: key.to_vec(),
                before: before.clone(),
            });
        } else if let Some(last) = self
            .last_committed
            .get_mut(&tree)
            .and_then(|keys| keys.get_mut(key))
        {
            *last = index + 1;
        }
        if let Record::Put {
            value, blob: true, ..
        } = record
        {
            if let Some(put) = self.last_put.get_mut(value.as_slice()) {
                *put = Some(index);
            }
        }
    }

    /// The changes to undo, in the order to apply them; and the large values that changes
    /// left standing replaced, which nothing references any more.
    pub(super) fn finish(self) -> Result<(Vec<Undo>, Vec<BlobRef>)> {
        let mut undo = Vec::new();
        let mut orphaned = Vec::new();
        for Candidate {
            index,
            tree,
            key,
            before,
        } in self.candidates.into_iter().rev()
        {
            let committed_later = self.last_committed[&tree][&key] > index;
            let removed_later = self
                .steps
                .iter()
                .rev()
                .take_while(|step| step.index > index)
                .any(|step| {
                    step.step.tree == tree
                        && (step.everything || step_covers(&step.step, step.end.as_ref(), &key))
                });
            if committed_later || removed_later {
                // The large value this change replaced is not put back: unreferenced, unless
                // a later record put it back (and the changes after that decide its fate).
                if let Before::Blob(reference) = &before {
                    if self.last_put[reference].is_none_or(|put| put < index) {
                        orphaned.push(decode_blob(reference, self.page_size, 0)?);
                    }
                }
                continue;
            }
            let before = match before {
                Before::Absent => Restore::Absent,
                Before::Value(value) => Restore::Value(value),
                Before::Blob(reference) => {
                    decode_blob(&reference, self.page_size, 0)?;
                    Restore::Blob(reference)
                }
                Before::Ranges(ranges) => Restore::Ranges(ranges),
                Before::Unrecorded => {
                    return Err(log_damage(0, "a batch's change without its before-image"));
                }
            };
            undo.push(Undo { tree, key, before });
        }
        Ok((undo, orphaned))
    }
}
