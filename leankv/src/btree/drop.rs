//! Dropping a tree: its keys go as a range removal over the whole key space, then its root page
//! is freed by a last step of that removal, after the catalog entry (see `crate::batch`).
//!
//! Invariant: only a handle no one else uses (`BTree::owner_handle` of a tree marked dropped,
//! once the operations running then have ended) empties and frees a tree.

use super::*;
use std::ops::Bound as RangeBound;

impl<P: Policy> BTree<P> {
    /// Removes every key from `from` on and then, until only the root is left, the empty
    /// leaves that merges gave up on, as range removal `removal`; returns the keys removed.
    pub(crate) fn clear(&self, from: RangeBound<Vec<u8>>, removal: u64) -> Result<u64> {
        let mut removed = self.remove_range(from, RangeBound::Unbounded, removal)?;
        for _ in 0..MAX_DEPTH {
            if self.bm.run(|_| self.level_of(self.root()))? == 0 {
                return Ok(removed);
            }
            removed += self.remove_range(RangeBound::Unbounded, RangeBound::Unbounded, removal)?;
        }
        Err(Error::corruption(
            self.root_page_id,
            "a tree being dropped keeps inner nodes after its keys were removed",
        ))
    }

    /// Frees the root of a tree [`Self::clear`] emptied, logged as the last step of range
    /// removal `removal`.
    pub(crate) fn free_root(&self, removal: u64) -> Result<()> {
        let root = self.root();
        let guard = self.bm.frame(root).latch.lock_exclusive();
        let node = self.node(root);
        if !node.is_leaf() || node.count() > 0 {
            return Err(Error::corruption(
                self.root_page_id,
                "a tree being dropped still holds keys",
            ));
        }
        self.log_progress(
            &mut [],
            &[root],
            &[],
            removal,
            0,
            &RangeBound::Unbounded,
            &None,
        );
        self.bm.delete_page(root, guard);
        Ok(())
    }
}
