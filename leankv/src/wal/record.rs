//! Log records and how they are encoded into frames (decoding is in `decode`).
//!
//! A frame is `[crc32c u32][payload length u32][lsn u64][generation u32][kind u8][0; 3]`
//! followed by the payload and zero padding to a multiple of 8 bytes. The CRC-32C covers the
//! payload and then the header after the CRC itself (payload first, so that a record is
//! encoded, checksum included, before its place in the log is reserved; until then the header
//! holds the payload's checksum where the frame's goes). A frame's LSN is its position in the
//! log stream (bytes since the database's first record), so a frame read at the wrong place,
//! left over from an earlier pass over the file, fails the position check; the generation
//! (counted up at every open) fences frames a crashed process left beyond the point where
//! recovery cut its log.
//!
//! Records (fixed-width integers little endian; lengths and ids in leaf records as LEB128
//! varints, since leaf records are most of the log):
//! * `Checkpoint`: the page count, the free page ids and the key count of every tree (by root
//!   page id) at the checkpoint's start (logs written before key counts end after the ids);
//! * `Structure`: a structural change (split, merge, new root, new tree) as one record: the
//!   full images of every page it changed (swips as page ids) and the page ids it freed;
//! * `Put` / `Remove` / `Patch`: one key of one leaf, with the tree (its root page id), the
//!   batch (0: a single operation, committed by itself), for batches the value before, and the
//!   page's full image after the change when it is the page's first change since a checkpoint
//!   began. A `Patch` rewrites a value in place: only the byte ranges that changed (in a
//!   batch with the ranges' old bytes, to undo it);
//! * `Split`: a node split, logically (when the node and its parent were described since the
//!   checkpoint began, so recovery holds both): the node, the new page taking its left part
//!   (entries `..left_count`), where its right part starts, the separator, and the parent
//!   that takes the separator with the new page as its left child;
//! * `RangeRemoval`: a range removal begins (its id, tree, bounds, and whether it drops the
//!   tree); it is committed by the `Commit` of its id, and recovery finishes one that was not
//!   (roll forward);
//! * `RangeStep`: a structural record of a range removal: the images and freed ids as in
//!   `Structure`, preceded by the removal's id, tree, the keys the freed leaves held, where the
//!   step started and the key it reached (its leaves removed everything up to it);
//! * `PackedGroup`: leaf records of one batch that its thread staged and published together
//!   (see `staging` and `group`): `[flags u8: bit 0 the group commits its batch][batch
//!   varint]`, then per record `[kind u8][payload]`, each payload a `Put`, `Remove` or `Patch`
//!   without its batch (the group's) and without a length (a leaf payload delimits itself).
//!   One frame and one checksum for them all; each record ends, for recovery, where the
//!   group's frame does, and a committing group is followed by its batch's `Commit` there;
//! * `Group`: the same as written before `PackedGroup` (decoded, never written): `[batch
//!   varint]`, then per record `[kind u8][payload length u32][payload]`, payloads with the
//!   batch;
//! * `Commit`: a batch (or a range removal) is complete;
//! * `SyncMark`: written with every write of the log, how far the log was durable before it,
//!   so that recovery tells a damaged synced record (an error) from a torn unsynced tail;
//! * `Padding`: zeros filling the unused rest of a thread's region of a chunk (see
//!   `sync::append_ring`'s regions); recovery skips it.
//!
//! Leaf payload: `[flags u8: bit 0 image follows, bits 1-2 before tag (0 unrecorded, 1
//! absent, 2 value), bit 3 (puts) the key was absent, bit 4 (puts) the value is a
//! large-value reference, bit 5 the value before is one][page id][tree][batch (not in a packed
//! group)][key len][key]`, then for `Put` `[value len][value]`,
//! for `Patch` `[value len][range count]` and per range `[gap from the previous range's
//! end][len][bytes]` and, in a batch (before tag 3), the range's old bytes; then the before
//! value (`[len][bytes]`) if tagged 2, then the image.

use super::patch::ChangedRanges;
use crate::key_count::KeyStripe;
use std::ops::Bound;

/// Bytes of a frame header.
pub(crate) const FRAME_HEADER: usize = 24;
/// Where a frame header holds its record's kind.
pub(crate) const KIND_OFFSET: usize = 20;
/// Frames start at multiples of this.
pub(crate) const FRAME_ALIGN: usize = 8;
/// Largest page an image may claim.
pub(super) const MAX_PAGE: usize = 1 << 16;
/// Largest payload a frame may claim (a checkpoint of a huge free list stays far below).
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;
/// Largest payload a group may claim: a slot is published once it holds 256 KiB
/// (`staging::STAGING_LIMIT`), so a group holds at most that and one more record, which is
/// below two pages (key, value, value before and image are each at most a page).
pub(super) const MAX_GROUP_PAYLOAD: usize = (256 << 10) + 4 * MAX_PAGE;

pub(super) const KIND_CHECKPOINT: u8 = 1;
pub(super) const KIND_STRUCTURE: u8 = 2;
pub(super) const KIND_PUT: u8 = 3;
pub(super) const KIND_REMOVE: u8 = 4;
pub(super) const KIND_PATCH: u8 = 5;
pub(super) const KIND_COMMIT: u8 = 6;
pub(super) const KIND_NEW_TREE: u8 = 7;
pub(crate) const KIND_SYNC_MARK: u8 = 8;
pub(super) const KIND_SPLIT: u8 = 9;
pub(super) const KIND_RANGE_REMOVAL: u8 = 10;
pub(super) const KIND_RANGE_STEP: u8 = 11;
pub(super) const KIND_GROUP: u8 = 12;
pub(super) const KIND_PACKED_GROUP: u8 = 13;
pub(super) const KIND_PADDING: u8 = 14;

/// A packed group's flag: the group commits its batch (no `Commit` frame follows).
pub(super) const GROUP_COMMITS: u8 = 1;

pub(super) const BOUND_UNBOUNDED: u8 = 0;
pub(super) const BOUND_INCLUDED: u8 = 1;
pub(super) const BOUND_EXCLUDED: u8 = 2;

pub(super) const FLAG_IMAGE: u8 = 1;
/// A put of a key that was absent: it adds to its tree's key count.
pub(super) const FLAG_ADDED: u8 = 1 << 3;
/// A put whose value is a large-value reference (see `crate::blob`).
pub(super) const FLAG_BLOB: u8 = 1 << 4;
/// The recorded value before (tag 2) is a large-value reference.
pub(super) const FLAG_BEFORE_BLOB: u8 = 1 << 5;
pub(super) const BEFORE_SHIFT: u8 = 1;
pub(super) const BEFORE_UNRECORDED: u8 = 0;
pub(super) const BEFORE_ABSENT: u8 = 1;
pub(super) const BEFORE_VALUE: u8 = 2;
/// A batch's patch: the old bytes of each range follow the range's new bytes.
pub(super) const BEFORE_RANGES: u8 = 3;

/// What a leaf operation changed, for undoing it if its batch never commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Before {
    /// Not recorded: a single operation, which is its own commit.
    Unrecorded,
    /// The key was absent.
    Absent,
    /// The key held this value.
    Value(Vec<u8>),
    /// The key held the large value with this reference. Recorded by single operations too:
    /// the change frees the large value's pages once it is committed.
    Blob(Vec<u8>),
    /// The key held a value of the same length with these bytes at these offsets (a patch).
    Ranges(Vec<(usize, Vec<u8>)>),
}

/// One decoded log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    Checkpoint {
        page_count: u64,
        free: Vec<u64>,
        /// Every tree's key count, by root page id (`None`: a log from before key counts).
        key_counts: Option<Vec<(u64, u64)>>,
    },
    Structure {
        images: Vec<(u64, Vec<u8>)>,
        freed: Vec<u64>,
        /// The record creates a tree whose root is its one image: if the catalog entry that
        /// follows did not survive a crash, recovery frees the root again.
        new_tree: bool,
        /// The record is a step of a range removal.
        step: Option<RangeStep>,
    },
    RangeRemoval(RangeRemoval),
    Put {
        page_id: u64,
        tree: u64,
        batch: u64,
        key: Vec<u8>,
        value: Vec<u8>,
        /// `value` is a large-value reference.
        blob: bool,
        /// The key was absent: the put added it.
        added: bool,
        before: Before,
        image: Option<Vec<u8>>,
    },
    Remove {
        page_id: u64,
        tree: u64,
        batch: u64,
        key: Vec<u8>,
        before: Before,
        image: Option<Vec<u8>>,
    },
    /// An in-place rewrite of a value of `value_len` bytes: each range `(offset, bytes)`
    /// replaces those bytes; in a batch, `before` holds the old bytes of the ranges.
    Patch {
        page_id: u64,
        tree: u64,
        batch: u64,
        key: Vec<u8>,
        value_len: usize,
        ranges: Vec<(usize, Vec<u8>)>,
        before: Before,
        image: Option<Vec<u8>>,
    },
    Split(Split),
    Commit {
        batch: u64,
    },
    SyncMark {
        durable: u64,
    },
    /// The unused rest of a thread's region (zeros, not checked: the checksum covers them).
    Padding,
}

/// A node split as logged (see `Record::Split`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    /// The node split; it keeps the right part.
    pub(crate) page_id: u64,
    /// The new page holding the left part.
    pub(crate) left: u64,
    pub(crate) parent: u64,
    /// The left part: entries `..left_count`; the right part: entries `right_start..`.
    pub(crate) left_count: usize,
    pub(crate) right_start: usize,
    pub(crate) separator: Vec<u8>,
}

/// The start of a range removal (see `Record::RangeRemoval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeRemoval {
    /// Its id, unique like a batch id; its `Commit` says it is complete.
    pub(crate) removal: u64,
    /// The tree (its root page id).
    pub(crate) tree: u64,
    pub(crate) start: Bound<Vec<u8>>,
    pub(crate) end: Bound<Vec<u8>>,
    /// The removal drops the tree: after its keys, its catalog entry and its root go (the
    /// step that frees the root finishes it).
    pub(crate) drop: bool,
}

/// One step of a range removal (see `Record::RangeStep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeStep {
    pub(crate) removal: u64,
    pub(crate) tree: u64,
    /// Keys the pages this step freed or emptied held (each leaves the tree's key count).
    pub(crate) keys: u64,
    /// Where the step started.
    pub(crate) from: Bound<Vec<u8>>,
    /// Every key of the removal's range up to and including this one is gone (`None`: the
    /// step reached the end of the key space).
    pub(crate) through: Option<Vec<u8>>,
}

/// A leaf operation as the tree hands it to the log (borrowed, encoded in place).
#[derive(Debug, Clone, Copy)]
pub(crate) enum LeafOp<'a> {
    Put {
        key: &'a [u8],
        value: &'a [u8],
        /// `value` is a large-value reference.
        blob: bool,
        /// The key was absent.
        added: bool,
    },
    Remove {
        key: &'a [u8],
    },
    /// `value` replaced a value of the same length, differing only in `changed`.
    Patch {
        key: &'a [u8],
        value: &'a [u8],
        changed: &'a ChangedRanges,
    },
}

impl<'a> LeafOp<'a> {
    /// Putting `value` (a large-value reference if `blob`; under a key that was absent if
    /// `added`): a patch if `changed` holds the ranges in which it differs from the value of
    /// the same length it replaced.
    pub(crate) fn put(
        key: &'a [u8],
        value: &'a [u8],
        blob: bool,
        added: bool,
        changed: Option<&'a ChangedRanges>,
    ) -> LeafOp<'a> {
        match changed {
            Some(changed) => {
                debug_assert!(!added && !blob, "a patch replaces an inline value");
                LeafOp::Patch {
                    key,
                    value,
                    changed,
                }
            }
            None => LeafOp::Put {
                key,
                value,
                blob,
                added,
            },
        }
    }

    /// Counts the key the operation adds or removes in `stripe`, this thread's stripe of its
    /// tree's key count (most operations change no count).
    pub(crate) fn count_keys(&self, stripe: &KeyStripe) {
        match self {
            LeafOp::Put { added: true, .. } => stripe.add(1),
            LeafOp::Remove { .. } => stripe.remove(1),
            LeafOp::Put { added: false, .. } | LeafOp::Patch { .. } => {}
        }
    }
}

/// Writes a page into the slice it is given and returns its free gap (start, length), which
/// the log leaves out (see [`page_image`]).
pub(crate) type FillImage<'a> = dyn FnMut(&mut [u8]) -> (usize, usize) + 'a;

/// One leaf operation as logged: the page it changed, the tree (its root page id), the batch
/// (0: on its own), the operation and, for batches, what it replaced.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafChange<'a> {
    pub(crate) page_id: u64,
    pub(crate) tree: u64,
    pub(crate) batch: u64,
    pub(crate) op: LeafOp<'a>,
    pub(crate) before: BeforeRef<'a>,
}

/// The before-image of a leaf operation, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BeforeRef<'a> {
    Unrecorded,
    Absent,
    Value(&'a [u8]),
    /// A large-value reference (see [`Before::Blob`]).
    Blob(&'a [u8]),
}

/// Encodes frames ahead of their place in the log, one after another into a byte buffer:
/// each frame's header holds its payload's checksum where its own checksum goes, until
/// [`stamp_frames`] gives the frames their positions.
pub(crate) struct FrameWriter<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    /// A page-sized buffer images are filled into before their gap is left out.
    pub(crate) scratch: &'a mut Vec<u8>,
}

/// The checksum of a frame: its payload's, continued over the header after the checksum.
pub(super) fn frame_checksum(payload_checksum: u32, header: &[u8; FRAME_HEADER]) -> u32 {
    crc32c::crc32c_append(payload_checksum, &header[4..])
}

/// Writes a frame's position and generation into its header (the rest of it written) and
/// its checksum, given its payload's: how a frame encoded ahead gets its place in the log.
pub(crate) fn stamp(header: &mut [u8], lsn: u64, generation: u32, payload_checksum: u32) {
    let header: &mut [u8; FRAME_HEADER] = header.try_into().expect("a frame header");
    header[8..16].copy_from_slice(&lsn.to_le_bytes());
    header[16..20].copy_from_slice(&generation.to_le_bytes());
    let checksum = frame_checksum(payload_checksum, header);
    header[..4].copy_from_slice(&checksum.to_le_bytes());
}

/// Stamps the frames `frames` (encoded by a [`FrameWriter`], each with its payload's checksum
/// in place of its own) as placed from log position `lsn` on, in life `generation`.
pub(crate) fn stamp_frames(frames: &mut [u8], lsn: u64, generation: u32) {
    let mut at = 0;
    while at < frames.len() {
        let header = &mut frames[at..at + FRAME_HEADER];
        let payload_checksum = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let payload = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        stamp(header, lsn + at as u64, generation, payload_checksum);
        at += (FRAME_HEADER + payload).next_multiple_of(FRAME_ALIGN);
    }
    debug_assert_eq!(at, frames.len(), "whole frames");
}

/// Fills `bytes` (a multiple of [`FRAME_ALIGN`], at least a header) with one padding frame of
/// zeros placed at log position `lsn`, in life `generation`.
pub(crate) fn pad(bytes: &mut [u8], lsn: u64, generation: u32) {
    debug_assert!(bytes.len() >= FRAME_HEADER && bytes.len().is_multiple_of(FRAME_ALIGN));
    let (header, payload) = bytes.split_at_mut(FRAME_HEADER);
    payload.fill(0);
    header.fill(0);
    header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[KIND_OFFSET] = KIND_PADDING;
    stamp(header, lsn, generation, crc32c::crc32c(payload));
}

impl<'a> FrameWriter<'a> {
    /// A writer of frames appended to `out`; images are assembled in `scratch`.
    pub(crate) fn new(out: &'a mut Vec<u8>, scratch: &'a mut Vec<u8>) -> Self {
        FrameWriter { out, scratch }
    }

    /// Encodes a frame of `kind`; `body` writes the payload.
    fn frame(&mut self, kind: u8, body: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>)) {
        let start = self.out.len();
        debug_assert_eq!(start % FRAME_ALIGN, 0);
        self.out.extend_from_slice(&[0; FRAME_HEADER]);
        body(self.out, self.scratch);
        let payload = self.out.len() - start - FRAME_HEADER;
        debug_assert!(payload <= MAX_PAYLOAD);
        let payload_checksum = crc32c::crc32c(&self.out[start + FRAME_HEADER..]);
        let header = &mut self.out[start..start + FRAME_HEADER];
        header[..4].copy_from_slice(&payload_checksum.to_le_bytes());
        header[4..8].copy_from_slice(&(payload as u32).to_le_bytes());
        header[KIND_OFFSET] = kind;
        let padded = self.out.len().next_multiple_of(FRAME_ALIGN);
        self.out.resize(padded, 0);
    }

    pub(crate) fn checkpoint(&mut self, page_count: u64, free: &[u64], key_counts: &[(u64, u64)]) {
        self.frame(KIND_CHECKPOINT, |out, _| {
            out.extend_from_slice(&page_count.to_le_bytes());
            out.extend_from_slice(&(free.len() as u64).to_le_bytes());
            for id in free {
                out.extend_from_slice(&id.to_le_bytes());
            }
            out.extend_from_slice(&(key_counts.len() as u64).to_le_bytes());
            for (root, keys) in key_counts {
                out.extend_from_slice(&root.to_le_bytes());
                out.extend_from_slice(&keys.to_le_bytes());
            }
        })
    }

    /// A structural change: the images of `pages` (filled by `fill(handle, bytes)`) and the
    /// freed page ids; `new_tree` marks the creation of a tree (one image, its root), `step`
    /// a step of a range removal.
    pub(crate) fn structure<T: Copy>(
        &mut self,
        pages: &[(u64, T)],
        freed: &[u64],
        new_tree: bool,
        step: Option<&RangeStep>,
        page_size: usize,
        fill: impl Fn(T, &mut [u8]) -> (usize, usize),
    ) {
        debug_assert!(!(new_tree && step.is_some()));
        let kind = match (new_tree, step) {
            (true, _) => KIND_NEW_TREE,
            (false, Some(_)) => KIND_RANGE_STEP,
            (false, None) => KIND_STRUCTURE,
        };
        self.frame(kind, |out, scratch| {
            if let Some(step) = step {
                for number in [step.removal, step.tree, step.keys] {
                    out.extend_from_slice(&number.to_le_bytes());
                }
                key_bound(out, step.from.as_ref().map(Vec::as_slice));
                let through = match &step.through {
                    Some(key) => Bound::Included(key.as_slice()),
                    None => Bound::Unbounded,
                };
                key_bound(out, through);
            }
            out.extend_from_slice(&(pages.len() as u32).to_le_bytes());
            for &(page_id, handle) in pages {
                out.extend_from_slice(&page_id.to_le_bytes());
                page_image(out, scratch, page_size, |image| fill(handle, image));
            }
            out.extend_from_slice(&(freed.len() as u32).to_le_bytes());
            for id in freed {
                out.extend_from_slice(&id.to_le_bytes());
            }
        })
    }

    /// A leaf operation, with the page's full image after it when `image` is given (its page
    /// size and the function that fills it).
    pub(crate) fn leaf(
        &mut self,
        change: LeafChange<'_>,
        image: Option<(usize, &mut FillImage<'_>)>,
    ) {
        self.frame(leaf_kind(change.op), |out, scratch| {
            leaf_payload(out, scratch, change, image, BatchField::Written)
        })
    }

    /// A node split (see `Record::Split`), borrowing the separator.
    pub(crate) fn split(&mut self, split: &Split) {
        self.frame(KIND_SPLIT, |out, _| {
            for number in [split.page_id, split.left, split.parent] {
                varint(out, number);
            }
            varint(out, split.left_count as u64);
            varint(out, split.right_start as u64);
            bytes(out, &split.separator);
        })
    }

    /// The start of a range removal.
    pub(crate) fn range_removal(&mut self, removal: &RangeRemoval) {
        self.frame(KIND_RANGE_REMOVAL, |out, _| {
            out.extend_from_slice(&removal.removal.to_le_bytes());
            out.extend_from_slice(&removal.tree.to_le_bytes());
            key_bound(out, removal.start.as_ref().map(Vec::as_slice));
            key_bound(out, removal.end.as_ref().map(Vec::as_slice));
            out.push(u8::from(removal.drop));
        })
    }

    pub(crate) fn sync_mark(&mut self, durable: u64) {
        self.frame(KIND_SYNC_MARK, |out, _| {
            out.extend_from_slice(&durable.to_le_bytes())
        })
    }

    pub(crate) fn commit(&mut self, batch: u64) {
        self.frame(KIND_COMMIT, |out, _| {
            out.extend_from_slice(&batch.to_le_bytes())
        })
    }
}

/// The record kind of a leaf operation.
pub(crate) fn leaf_kind(op: LeafOp<'_>) -> u8 {
    match op {
        LeafOp::Put { .. } => KIND_PUT,
        LeafOp::Remove { .. } => KIND_REMOVE,
        LeafOp::Patch { .. } => KIND_PATCH,
    }
}

/// Whether a leaf payload names its batch: all but those of a packed group, which names the
/// batch once for all of its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchField {
    Written,
    InGroup,
}

/// Appends the payload of a leaf record (see the module notes) to `out`, the page image (if
/// `image` is given) assembled in `scratch`.
pub(crate) fn leaf_payload(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    change: LeafChange<'_>,
    image: Option<(usize, &mut FillImage<'_>)>,
    batch_field: BatchField,
) {
    let LeafChange {
        page_id,
        tree,
        batch,
        op,
        before,
    } = change;
    // A patch in a batch records its ranges' old bytes instead of the whole old value.
    let (before_tag, before_value) = match (before, op) {
        (BeforeRef::Unrecorded, _) => (BEFORE_UNRECORDED, None),
        (BeforeRef::Absent, _) => (BEFORE_ABSENT, None),
        (BeforeRef::Value(_), LeafOp::Patch { .. }) => (BEFORE_RANGES, None),
        (BeforeRef::Value(value) | BeforeRef::Blob(value), _) => (BEFORE_VALUE, Some(value)),
    };
    debug_assert!(!matches!(
        (before, op),
        (BeforeRef::Blob(_), LeafOp::Patch { .. })
    ));
    debug_assert!(
        !matches!(op, LeafOp::Patch { .. })
            || matches!(before_tag, BEFORE_UNRECORDED | BEFORE_RANGES)
    );
    let added = matches!(op, LeafOp::Put { added: true, .. });
    let blob = matches!(op, LeafOp::Put { blob: true, .. });
    let before_blob = matches!(before, BeforeRef::Blob(_));
    out.push(
        u8::from(image.is_some())
            | before_tag << BEFORE_SHIFT
            | if added { FLAG_ADDED } else { 0 }
            | if blob { FLAG_BLOB } else { 0 }
            | if before_blob { FLAG_BEFORE_BLOB } else { 0 },
    );
    varint(out, page_id);
    varint(out, tree);
    if batch_field == BatchField::Written {
        varint(out, batch);
    }
    match op {
        LeafOp::Put { key, value, .. } => {
            bytes(out, key);
            bytes(out, value);
        }
        LeafOp::Remove { key } => bytes(out, key),
        LeafOp::Patch {
            key,
            value,
            changed,
        } => {
            bytes(out, key);
            varint(out, value.len() as u64);
            varint(out, changed.len() as u64);
            let mut previous_end = 0;
            for (offset, len) in changed.iter() {
                varint(out, (offset - previous_end) as u64);
                bytes(out, &value[offset..offset + len]);
                if let BeforeRef::Value(old) = before {
                    out.extend_from_slice(&old[offset..offset + len]);
                }
                previous_end = offset + len;
            }
        }
    }
    if let Some(value) = before_value {
        bytes(out, value);
    }
    if let Some((page_size, fill)) = image {
        page_image(out, scratch, page_size, fill);
    }
}

/// Appends `value` as a LEB128 varint.
pub(super) fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a varint length and the bytes.
fn bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a key bound: `[tag u8: 0 unbounded, 1 included, 2 excluded]` and, if bounded, the
/// key with its varint length.
fn key_bound(out: &mut Vec<u8>, bound: Bound<&[u8]>) {
    match bound {
        Bound::Unbounded => out.push(BOUND_UNBOUNDED),
        Bound::Included(key) => {
            out.push(BOUND_INCLUDED);
            bytes(out, key);
        }
        Bound::Excluded(key) => {
            out.push(BOUND_EXCLUDED);
            bytes(out, key);
        }
    }
}

/// Appends a page image: `[page size u32][gap start u32][gap length u32]` and the page's
/// bytes without the gap (its free space, as `fill` reports after writing the whole page
/// into `scratch`).
fn page_image(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    page_size: usize,
    fill: impl FnOnce(&mut [u8]) -> (usize, usize),
) {
    scratch.resize(page_size, 0);
    let (start, len) = fill(&mut scratch[..]);
    let (start, len) = if start.checked_add(len).is_some_and(|end| end <= page_size) {
        (start, len)
    } else {
        (0, 0)
    };
    out.extend_from_slice(&(page_size as u32).to_le_bytes());
    out.extend_from_slice(&(start as u32).to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&scratch[..start]);
    out.extend_from_slice(&scratch[start + len..]);
}
