//! Looking up many keys at once so that their reads overlap: every key is first looked up as
//! far as memory goes, the pages those lookups stopped at are handed to the read-ahead threads
//! together (up to the read-ahead depth at a time: pages read ahead wait in the cooling stage,
//! and too many would evict each other before use), and then the keys that stopped are looked
//! up again, waiting for those reads instead of issuing them one at a time. A worker thus
//! keeps up to as many reads in flight as it has keys missing from memory, instead of one.
//!
//! The second lookup of a key goes all the way: if the page read ahead was an inner node, the
//! pages below it are read on demand, so every key is answered after two passes at most. A
//! large value is read where the first pass finds it (its pages are never in the pool).

use super::descend::copy_value;
use super::*;

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
        let mut missing = Vec::new();
        let mut targets = Vec::new();
        for (index, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            if skip(key) {
                found(index, None);
                continue;
            }
            match self.lookup_in_memory(key, buffer)? {
                Ok(present) => found(index, present.then_some(&buffer[..])),
                Err(target) => {
                    missing.push(index);
                    targets.push(target);
                }
            }
        }
        let depth = self.bm.prefetch_depth().max(1);
        for (indexes, targets) in missing.chunks(depth).zip(targets.chunks_mut(depth)) {
            self.bm.read_ahead(targets);
            for &index in indexes {
                let present = self.lookup(keys[index].as_ref(), buffer)?;
                found(index, present.then_some(&buffer[..]));
            }
        }
        Ok(())
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
