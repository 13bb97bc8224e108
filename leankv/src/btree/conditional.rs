//! Conditional writes of one key (compare-and-swap, read-modify-write): the key's leaf is
//! latched exclusively, its current value is shown to a decision, and what the decision asks
//! for is applied and logged under the same latch, so no other write of the key comes between
//! the look and the change.
//!
//! Invariant: the decision runs again, on the value then current, whenever its change did not
//! fit the leaf (after the split); it never runs without the leaf latched.

use super::insert::Step;
use super::remove::Removal;
use super::*;

/// What a conditional write does with the value it was shown.
#[derive(Debug)]
pub(crate) enum Decision<V> {
    /// Leave the key as it is.
    Keep,
    /// Store this value under the key.
    Put(V),
    /// Remove the key (nothing to do if it is absent).
    Remove,
}

/// How one attempt at a conditional write ended.
enum Outcome {
    Kept,
    /// The step, and the size of the entry put (what a split must make room for).
    Put(Step, usize),
    Removed(Removal),
}

impl<P: Policy> BTree<P> {
    /// Shows `decide` the current value of `key` (`None`: absent) under the leaf's exclusive
    /// latch and applies its decision; `decide` must not use this tree. Returns the write, or
    /// `None` if nothing changed.
    pub(crate) fn write_if<V: AsRef<[u8]>>(
        &self,
        key: &[u8],
        mut decide: impl FnMut(Option<&[u8]>) -> Decision<V>,
    ) -> Result<Option<Written>> {
        loop {
            let outcome = self.bm.run(|mode| {
                let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
                let leaf = self.node(frame);
                let (index, found) = leaf.lower_bound(key);
                Ok(match decide(found.then(|| leaf.value(index))) {
                    Decision::Keep => Outcome::Kept,
                    Decision::Put(value) => {
                        let value = value.as_ref();
                        let step =
                            self.put_in_leaf(frame, &mut guard, (index, found), key, value, 0);
                        Outcome::Put(step, entry_size(true, key.len(), value.len()))
                    }
                    Decision::Remove if found => {
                        Outcome::Removed(self.remove_from_leaf(frame, &mut guard, index, key, 0))
                    }
                    Decision::Remove => Outcome::Kept,
                })
            })?;
            match outcome {
                Outcome::Kept => return Ok(None),
                Outcome::Put(Step::Done(written), _) => return Ok(Some(written)),
                Outcome::Put(Step::Full(frame), size) => {
                    let incoming = Incoming { key, size };
                    self.bm.run(|mode| self.split(frame, key, incoming, mode))?;
                }
                Outcome::Removed(removal) => return self.finish_removal(removal, key),
            }
        }
    }
}
