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
//!
//! The rooms: this file holds the tree handle (creation, opening, the root and its handles) and
//! the page kinds it registers with the buffer manager; [`descend`] the descents and reads,
//! [`insert`] inserts, updates and splits (planned by [`split`]), [`remove`] removals and
//! merges, [`remove_range`] range removals, [`conditional`] compare-and-swap and
//! read-modify-write, [`drop`](mod@drop) dropping a tree, [`scan`] range scans, [`large`] values
//! stored outside the leaves; [`node`] the node format
//! (reading, validating, writing) and [`check`] the integrity checker over a whole tree on
//! disk.

pub(crate) mod check;
mod conditional;
mod descend;
mod drop;
mod insert;
mod large;
mod lookup_many;
pub(crate) mod node;
pub(crate) mod redo;
mod remove;
mod remove_range;
mod scan;
mod split;

pub(crate) use conditional::Decision;
use descend::ParentAndChild;
pub(crate) use node::Stored;
pub(crate) use remove_range::beyond;
pub(crate) use scan::{LeafBatch, ScanFrom};

use crate::blob::BlobRef;
use crate::buffer::policy::Policy;
use crate::buffer::{
    BlobChange, BufferManager, ChildCheck, FrameId, FrameState, FreeGap, PageCheck, PageKind,
    ReadAhead, Swip, SwipTarget,
};
use crate::error::{Error, Result};
use crate::io::page::PageType;
use crate::key_count::{KeyCount, KeyCounts};
use crate::sync::{Attempt, ExclusiveGuard, LatchMode, Restart, SharedGuard};
use crate::wal::{BeforeRef, ChangedRanges, LeafOp, RangeStep};
use node::{entry_size, Bound, Node, NodeMut};
use split::{Incoming, Separator, SplitPlan};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a write did: the end LSN of its log record (0 without a log) and, in a batch, where
/// the value it replaced lies in the caller's list (`None`: the key was absent; always `None`
/// outside batches).
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) lsn: u64,
    pub(crate) before: Option<Replaced>,
}

/// A value a write replaced, as stored, appended to the caller's list of replaced values (a
/// batch or transaction keeps them all in one list, to undo its changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replaced {
    pub(crate) at: Range<usize>,
    /// A large-value reference.
    pub(crate) blob: bool,
}

impl Replaced {
    /// Appends `stored` to `list`.
    fn append(list: &mut Vec<u8>, stored: Stored<'_>) -> Replaced {
        let start = list.len();
        list.extend_from_slice(stored.bytes);
        Replaced {
            at: start..list.len(),
            blob: stored.blob,
        }
    }

    /// The value in `list` (the one it was appended to).
    pub(crate) fn stored<'a>(&self, list: &'a [u8]) -> Stored<'a> {
        Stored {
            bytes: &list[self.at.clone()],
            blob: self.blob,
        }
    }
}

/// A leaf value as stored, owned (see [`Stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredValue {
    pub(crate) bytes: Vec<u8>,
    pub(crate) blob: bool,
}

impl StoredValue {
    pub(crate) fn of(stored: Stored<'_>) -> StoredValue {
        StoredValue {
            bytes: stored.bytes.to_vec(),
            blob: stored.blob,
        }
    }

    pub(crate) fn as_stored(&self) -> Stored<'_> {
        Stored {
            bytes: &self.bytes,
            blob: self.blob,
        }
    }
}

/// A large-value reference as a leaf stores it.
pub(crate) fn stored_blob(reference: &[u8]) -> Stored<'_> {
    Stored {
        bytes: reference,
        blob: true,
    }
}

/// How a leaf change records the value it replaced: as a batch needs it to undo the change,
/// and always when it was a large value (whose pages the change frees once committed).
fn before_ref(batch: u64, replaced: Option<Stored<'_>>) -> BeforeRef<'_> {
    match (batch, replaced) {
        (_, Some(value)) if value.blob => BeforeRef::Blob(value.bytes),
        (0, _) => BeforeRef::Unrecorded,
        (_, None) => BeforeRef::Absent,
        (_, Some(value)) => BeforeRef::Value(value.bytes),
    }
}

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
    /// How many keys the tree holds (see `crate::key_count`).
    keys: Arc<KeyCount>,
    /// Set when the tree is dropped: every descent checks it, inside its operation (see
    /// [`Self::mark_dropped`]).
    dropped: AtomicBool,
    /// Tells this tree from every other opened in this process (root page ids are reused
    /// once a tree is dropped; addresses once it is freed).
    id: u64,
}

/// The next [`BTree::id`].
static NEXT_TREE_ID: AtomicU64 = AtomicU64::new(1);

fn next_tree_id() -> u64 {
    NEXT_TREE_ID.fetch_add(1, Ordering::Relaxed)
}

impl<P: Policy> BTree<P> {
    /// Creates an empty tree: a new root leaf, hot for as long as the tree is open. Its key
    /// count joins `counts` before its creation is logged, so checkpoints include it.
    pub(crate) fn create(bm: &Arc<BufferManager<P>>, counts: &KeyCounts) -> Result<BTree<P>> {
        let (root, root_page_id, keys) = bm.run(|_| {
            let (frame, mut guard) = bm.allocate_page(PageType::BTreeLeaf, None)?;
            NodeMut::new(bm.page_mut(frame, &mut guard)).init(0, None, None);
            let keys = counts.created(bm.frame(frame).page_id());
            bm.log_new_tree(frame, &mut guard);
            Ok((frame, bm.frame(frame).page_id(), keys))
        })?;
        Ok(BTree {
            bm: bm.clone(),
            root: AtomicU32::new(root),
            root_page_id,
            handles: AtomicUsize::new(0),
            keys,
            dropped: AtomicBool::new(false),
            id: next_tree_id(),
        })
    }

    /// Opens the tree whose root is page `root_page_id`, with its key count from `counts`.
    pub(crate) fn open(
        bm: &Arc<BufferManager<P>>,
        root_page_id: u64,
        counts: &KeyCounts,
    ) -> Result<BTree<P>> {
        let root = bm.load_root(root_page_id, Self::check_root)?;
        Ok(BTree {
            bm: bm.clone(),
            root: AtomicU32::new(root),
            root_page_id,
            handles: AtomicUsize::new(0),
            keys: counts.of(root_page_id),
            dropped: AtomicBool::new(false),
            id: next_tree_id(),
        })
    }

    /// The tree's key count.
    pub(crate) fn key_count(&self) -> &KeyCount {
        &self.keys
    }

    /// Ends every use of the tree through this handle: operations from now on fail with
    /// `Error::TreeDropped` (each checks at every descent, inside its operation); once the
    /// caller has waited for the running ones (`wait_for_running_operations`), none touches
    /// the tree's pages any more.
    pub(crate) fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Fails a descent into a dropped tree.
    #[inline]
    fn check_live(&self) -> Attempt<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Restart::Dropped);
        }
        Ok(())
    }

    /// A second handle on the same pages that is not marked dropped: how the dropping thread
    /// empties and frees a tree no one else may use any more.
    pub(crate) fn owner_handle(&self) -> BTree<P> {
        BTree {
            bm: self.bm.clone(),
            root: AtomicU32::new(self.root()),
            root_page_id: self.root_page_id,
            handles: AtomicUsize::new(0),
            keys: self.keys.clone(),
            dropped: AtomicBool::new(false),
            id: next_tree_id(),
        }
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

    /// This tree's identity in this process.
    pub(crate) fn id(&self) -> u64 {
        self.id
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
}

/// What the buffer manager needs to know about B-tree pages: inner nodes' children, and the
/// checks of nodes read from disk and of nodes met through a parent.
pub(crate) fn page_kinds() -> [PageKind; 2] {
    let check: PageCheck = |page| Node::new(page).check_on_disk();
    let check_child: ChildCheck =
        |parent, offset, child| Node::new(child).check_as_child_of(&Node::new(parent), offset);
    let free_gap: FreeGap = |page| Node::new(page).free_gap();
    [
        PageKind {
            page_type: PageType::BTreeLeaf,
            children: None,
            check: Some(check),
            check_child: None,
            free_gap: Some(free_gap),
        },
        PageKind {
            page_type: PageType::BTreeInner,
            children: Some(Node::visit_children),
            check: Some(check),
            check_child: Some(check_child),
            free_gap: Some(free_gap),
        },
    ]
}

#[cfg(test)]
mod tests;
