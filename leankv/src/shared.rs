//! What every handle of one database shares: the buffer manager, the catalog, the trees
//! opened so far and the directory lock, with the operations that span them (flush, close,
//! writing the superblock), and the counted handle through which `Tree` and `Range` use one
//! tree. `Db`, `Tree` and `Range` hold them; none depends on another for them.
//!
//! Invariant: the superblock is written after the pages it describes (the free list included)
//! and synced with them; it never counts more pages than the file holds.

use crate::btree::BTree;
use crate::buffer::policy::Policy;
use crate::buffer::BufferManager;
use crate::error::{Error, Result};
use crate::io::superblock::Superblock;
use crate::io::AlignedBuf;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) struct DbShared<P: Policy> {
    pub(crate) path: PathBuf,
    pub(crate) bm: Arc<BufferManager<P>>,
    pub(crate) catalog: Arc<BTree<P>>,
    /// Every tree opened so far, by name; held while a root is attached or detached.
    pub(crate) trees: Mutex<HashMap<String, Arc<BTree<P>>>>,
    /// The directory's lock file while open; `None` once closed.
    pub(crate) lock: Mutex<Option<File>>,
    pub(crate) max_key_size: usize,
    pub(crate) max_value_size: usize,
}

impl<P: Policy> DbShared<P> {
    /// Called when the last handle of `tree` is gone: its root may leave the pool (unless a
    /// new handle came meanwhile). The catalog stays.
    pub(crate) fn release(&self, tree: &Arc<BTree<P>>) {
        if Arc::ptr_eq(tree, &self.catalog) {
            return;
        }
        let _trees = self.trees.lock();
        if !tree.has_handles() {
            tree.detach();
        }
    }

    /// Writes every dirty page, then the superblock (still marked open: eviction may write
    /// pages again before the close), and syncs.
    pub(crate) fn flush(&self) -> Result<()> {
        self.bm.flush()?;
        self.write_superblock(true)
    }

    /// Writes and syncs the superblock, with the open mark `open`.
    fn write_superblock(&self, open: bool) -> Result<()> {
        let storage = self.bm.storage().as_ref();
        let page_size = self.bm.page_size();
        let (page_count, free) = self.bm.page_allocation();
        let free_list_head = crate::buffer::save_free_list(storage, page_size, &free)?;
        // Pages allocated and freed before ever being written lie beyond the end of the file;
        // the superblock counts them, so the file must hold them (a shorter file is truncated).
        storage
            .extend_to(page_count * page_size as u64)
            .map_err(|e| Error::io("extending the page file", e))?;
        let mut page = AlignedBuf::new(page_size);
        Superblock {
            page_size: page_size as u32,
            catalog_root: self.catalog.root_page_id(),
            page_count,
            free_list_head,
            free_list_len: free.len() as u64,
            open,
        }
        .encode(&mut page);
        storage
            .write_at(&page, 0)
            .and_then(|()| storage.sync())
            .map_err(|e| Error::io("writing the superblock", e))
    }

    pub(crate) fn close(&self) -> Result<()> {
        let mut lock = self.lock.lock();
        if lock.is_none() {
            return Ok(());
        }
        self.bm.shut_down()?;
        // Only now is the file complete: no eviction can write a page any more.
        self.write_superblock(false)?;
        *lock = None;
        Ok(())
    }
}

/// One use of an open tree: a `Tree` or a `Range` over it. While any exists, the tree's root
/// stays in the pool; when the last goes, the root may leave it (see `BTree::attach`).
pub(crate) struct TreeHandle<P: Policy> {
    pub(crate) db: Arc<DbShared<P>>,
    pub(crate) tree: Arc<BTree<P>>,
    /// The tree's name (`<catalog>` for the catalog), for `Debug` output.
    pub(crate) name: Arc<str>,
}

impl<P: Policy> TreeHandle<P> {
    pub(crate) fn new(db: Arc<DbShared<P>>, tree: Arc<BTree<P>>, name: Arc<str>) -> Self {
        tree.add_handle();
        TreeHandle { db, tree, name }
    }
}

impl<P: Policy> Clone for TreeHandle<P> {
    fn clone(&self) -> Self {
        TreeHandle::new(self.db.clone(), self.tree.clone(), self.name.clone())
    }
}

impl<P: Policy> Drop for TreeHandle<P> {
    fn drop(&mut self) {
        if self.tree.drop_handle() {
            self.db.release(&self.tree);
        }
    }
}
