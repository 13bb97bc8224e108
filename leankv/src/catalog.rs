//! The catalog: the B-tree that maps tree names to their root page id and saved key count, and
//! the map of trees open in this life (`DbShared::trees`).
//!
//! Invariants: no two names map to one root, and no name maps to the catalog's own root (two
//! trees on one page would be two copies of it in the pool); a tree is created with its entry
//! under the batch gate, so no checkpoint lies between the new root and its entry. Lock order:
//! the batch gate before the map of open trees (see `crate::transaction`).

use crate::btree::BTree;
use crate::buffer::policy::Policy;
use crate::error::{Error, Result};
use crate::shared::DbShared;
use crate::tree::Tree;
use std::collections::HashMap;
use std::sync::Arc;

/// How the catalog's handle calls itself in `Debug` output (no tree can have this name: it is
/// not a name the catalog maps, only a label).
const CATALOG_NAME: &str = "<catalog>";

/// The catalog as a tree handle.
pub(crate) fn handle<P: Policy>(shared: &Arc<DbShared<P>>) -> Tree<P> {
    Tree::new(shared.clone(), shared.catalog.clone(), CATALOG_NAME.into())
}

/// The tree `name`, opened (its root hot) or created, and registered as open.
pub(crate) fn open_named_tree<P: Policy>(
    shared: &Arc<DbShared<P>>,
    name: &str,
) -> Result<Arc<BTree<P>>> {
    if let Some(tree) = named_tree(shared, &mut shared.trees.lock(), name)? {
        return Ok(tree);
    }
    shared.admit()?;
    let (tree, written) = {
        // No checkpoint begins between the new root and its catalog entry: recovery frees a
        // root whose entry a crash lost only if it replays the root's creation. The gate
        // before the trees (the lock order of `crate::transaction`).
        let _gate = shared.batch_gate.read();
        let mut trees = shared.trees.lock();
        if let Some(tree) = named_tree(shared, &mut trees, name)? {
            return Ok(tree); // created meanwhile
        }
        let tree = Arc::new(BTree::create(&shared.bm, &shared.key_counts)?);
        let entry = encode_catalog_entry(tree.root_page_id(), 0);
        let written = shared
            .catalog
            .insert(name.as_bytes(), &entry, 0, &mut Vec::new())?;
        trees.insert(name.to_string(), tree.clone());
        (tree, written)
    };
    shared.commit_durability(written.lsn, shared.durability)?;
    Ok(tree)
}

/// The tree the catalog names `name`, ready for use (opened into `trees`, the locked map of
/// open trees, if it was not), or `None`.
pub(crate) fn named_tree<P: Policy>(
    shared: &DbShared<P>,
    trees: &mut HashMap<String, Arc<BTree<P>>>,
    name: &str,
) -> Result<Option<Arc<BTree<P>>>> {
    if let Some(tree) = trees.get(name) {
        if !tree.has_handles() {
            tree.attach()?;
        }
        return Ok(Some(tree.clone()));
    }
    let mut entry = Vec::new();
    if !shared.catalog.lookup(name.as_bytes(), &mut entry)? {
        return Ok(None);
    }
    let corrupt = |reason: String| Error::corruption(shared.catalog.root_page_id(), reason);
    let (root, _) = decode_catalog_entry(&entry)
        .ok_or_else(|| corrupt(format!("catalog entry of tree {name:?} is not a page id")))?;
    // Two trees on one root would be two copies of one page in the pool.
    if root == shared.catalog.root_page_id()
        || trees.values().any(|tree| tree.root_page_id() == root)
    {
        return Err(corrupt(format!(
            "tree {name:?} has the root page {root} of another tree"
        )));
    }
    let tree = Arc::new(BTree::open(&shared.bm, root, &shared.key_counts)?);
    trees.insert(name.to_string(), tree.clone());
    Ok(Some(tree))
}

/// A catalog entry's value: the tree's root page id, then its key count as of the last clean
/// close (see `crate::key_count`).
pub(crate) fn encode_catalog_entry(root: u64, keys: u64) -> [u8; 16] {
    let mut entry = [0; 16];
    entry[..8].copy_from_slice(&root.to_le_bytes());
    entry[8..].copy_from_slice(&keys.to_le_bytes());
    entry
}

/// The root page id and saved key count of a catalog entry (no count in an entry written
/// before counts were kept); `None` if it is neither form.
pub(crate) fn decode_catalog_entry(entry: &[u8]) -> Option<(u64, Option<u64>)> {
    let word = |bytes: &[u8]| Some(u64::from_le_bytes(bytes.try_into().ok()?));
    match entry.len() {
        8 => Some((word(entry)?, None)),
        16 => Some((word(&entry[..8])?, word(&entry[8..]))),
        _ => None,
    }
}

/// Every catalog entry: tree names (lossily as text), root page ids and saved key counts.
pub(crate) fn catalog_entries<P: Policy>(
    shared: &Arc<DbShared<P>>,
) -> Result<Vec<(String, u64, Option<u64>)>> {
    let catalog = handle(shared);
    let mut entries = Vec::new();
    for item in catalog.iter() {
        let (name, entry) = item?;
        let name = String::from_utf8_lossy(&name).into_owned();
        let (root, keys) = decode_catalog_entry(&entry).ok_or_else(|| {
            Error::corruption(
                shared.catalog.root_page_id(),
                format!("catalog entry of tree {name:?} is not a page id"),
            )
        })?;
        entries.push((name, root, keys));
    }
    Ok(entries)
}

/// A new handle on the open tree whose [`BTree::id`] is `id` (its root made hot again if no
/// handle was left), or `None` if no open tree has it (it was dropped).
pub(crate) fn handle_of<P: Policy>(shared: &Arc<DbShared<P>>, id: u64) -> Result<Option<Tree<P>>> {
    let trees = shared.trees.lock();
    let Some((name, tree)) = trees.iter().find(|(_, tree)| tree.id() == id) else {
        return Ok(None);
    };
    if !tree.has_handles() {
        tree.attach()?;
    }
    // Counted under the lock, so that no release detaches the root in between.
    Ok(Some(Tree::new(
        shared.clone(),
        tree.clone(),
        name.as_str().into(),
    )))
}
