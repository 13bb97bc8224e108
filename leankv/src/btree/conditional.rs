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
use crate::buffer::NewBlob;

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
enum Outcome<V> {
    Kept,
    /// The step, and the size of the entry put (what a split must make room for); whether it
    /// put the large value written ahead.
    Put(Step, usize, bool),
    Removed(Removal),
    /// The key holds the large value with this reference: read it, then decide.
    ReadLarge(Vec<u8>),
    /// The decision puts a large value: write it (outside the latch), then put it if the key
    /// still holds the value decided on.
    WriteLarge(V, Option<StoredValue>),
}

/// A large value written ahead for the decision on the value `decided_on` (`None`: absent).
struct Prepared<'a, P: Policy> {
    decided_on: Option<StoredValue>,
    blob: NewBlob<'a, P>,
}

impl<P: Policy> BTree<P> {
    /// Shows `decide` the current value of `key` (`None`: absent) under the leaf's exclusive
    /// latch and applies its decision; `decide` must not use this tree. Returns the write, or
    /// `None` if nothing changed.
    ///
    /// Large values need I/O, which never happens under a latch: a current large value is
    /// read first, and shown once the leaf still references it; a large new value is written
    /// first, and put without deciding again once the key still holds the value it was
    /// decided on.
    pub(crate) fn write_if<V: AsRef<[u8]>>(
        &self,
        key: &[u8],
        mut decide: impl FnMut(Option<&[u8]>) -> Decision<V>,
    ) -> Result<Option<Written>> {
        // The large value last read: its reference and its bytes.
        let mut seen: Option<(Vec<u8>, Vec<u8>)> = None;
        let mut prepared: Option<Prepared<'_, P>> = None;
        // A large value a write replaces, which its record names (nothing else is kept here:
        // these writes are single operations, never part of a batch).
        let mut replaced = Vec::new();
        loop {
            let outcome = self.bm.run(|mode| {
                let (frame, mut guard) = self.descend_exclusive(key, 0, mode)?;
                let leaf = self.node(frame);
                let (index, found) = leaf.lower_bound(key);
                let current = found.then(|| leaf.stored(index));
                if let Some(prepared) = prepared
                    .as_ref()
                    .filter(|p| p.decided_on.as_ref().map(StoredValue::as_stored) == current)
                {
                    let stored = Stored {
                        bytes: prepared.blob.reference(),
                        blob: true,
                    };
                    let added = Some(prepared.blob.blob());
                    let into = &mut replaced;
                    let at = (index, found);
                    let step = self.put_in_leaf(frame, &mut guard, at, key, stored, added, 0, into);
                    let size = entry_size(true, key.len(), stored.bytes.len());
                    return Ok(Outcome::Put(step, size, true));
                }
                let shown = match current {
                    Some(stored) if stored.blob => match &seen {
                        Some((reference, value)) if reference[..] == *stored.bytes => {
                            Some(&value[..])
                        }
                        _ => return Ok(Outcome::ReadLarge(stored.bytes.to_vec())),
                    },
                    Some(stored) => Some(stored.bytes),
                    None => None,
                };
                Ok(match decide(shown) {
                    Decision::Keep => Outcome::Kept,
                    Decision::Put(value) if value.as_ref().len() > self.max_inline() => {
                        Outcome::WriteLarge(value, current.map(StoredValue::of))
                    }
                    Decision::Put(value) => {
                        let value = Stored::inline(value.as_ref());
                        let step = self.put_in_leaf(
                            frame,
                            &mut guard,
                            (index, found),
                            key,
                            value,
                            None,
                            0,
                            &mut replaced,
                        );
                        Outcome::Put(step, entry_size(true, key.len(), value.bytes.len()), false)
                    }
                    Decision::Remove if found => {
                        let into = &mut replaced;
                        Outcome::Removed(
                            self.remove_from_leaf(frame, &mut guard, index, key, 0, into),
                        )
                    }
                    Decision::Remove => Outcome::Kept,
                })
            })?;
            match outcome {
                Outcome::Kept => return Ok(None),
                Outcome::Put(Step::Done(written), _, large) => {
                    if large {
                        prepared.take().expect("put above").blob.referenced();
                    }
                    return Ok(Some(written));
                }
                Outcome::Put(Step::Full(frame), size, _) => {
                    let incoming = Incoming { key, size };
                    self.bm.run(|mode| self.split(frame, key, incoming, mode))?;
                }
                Outcome::Removed(removal) => return self.finish_removal(removal, key),
                Outcome::ReadLarge(reference) => {
                    let mut value = reference.clone();
                    if self.read_large(key, &mut value)? {
                        seen = Some((reference, value));
                    }
                }
                Outcome::WriteLarge(value, decided_on) => {
                    let blob = self.bm.write_blob(value.as_ref())?;
                    prepared = Some(Prepared { decided_on, blob });
                }
            }
        }
    }
}
