//! Groups: the leaf records one batch's thread staged, published as one frame (the format is
//! in `record`, kind `PackedGroup`). A group costs its records one byte each where frames of
//! their own cost 24-31, names the batch once, and has one checksum over all of them; TPC-C
//! stages ~17 records per transaction. A group published at its batch's commit carries the
//! commit too, where a frame of its own would cost 32 bytes.

use super::record::{
    leaf_kind, leaf_payload, varint, BatchField, FillImage, LeafChange, FRAME_ALIGN, FRAME_HEADER,
    GROUP_COMMITS, KIND_OFFSET, KIND_PACKED_GROUP, MAX_GROUP_PAYLOAD,
};

/// Appends the record of `change` (with the page image if `image` is given) to the group that
/// `out` holds at position 0, starting the group if `out` is empty.
pub(super) fn add(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    change: LeafChange<'_>,
    image: Option<(usize, &mut FillImage<'_>)>,
) {
    debug_assert_ne!(change.batch, 0, "single operations are never staged");
    if out.is_empty() {
        out.extend_from_slice(&[0; FRAME_HEADER]);
        out.push(0); // the flags, set by `seal`
        varint(out, change.batch);
    }
    debug_assert!(
        holds_batch(out, change.batch),
        "a group holds one batch (its header names it)"
    );
    out.push(leaf_kind(change.op));
    leaf_payload(out, scratch, change, image, BatchField::InGroup);
}

/// Whether the group that `out` holds (started by [`add`]) is batch `batch`'s.
pub(super) fn holds_batch(out: &[u8], batch: u64) -> bool {
    let mut named = Vec::with_capacity(10);
    varint(&mut named, batch);
    out[FRAME_HEADER + 1..].starts_with(&named)
}

/// Completes the group's frame in `out` (its flags, and its header's length, kind and payload
/// checksum, as a [`FrameWriter`](super::FrameWriter) leaves a frame, and the padding);
/// `commits`: the group commits its batch. `stamp_frames` gives it its place in the log.
pub(super) fn seal(out: &mut Vec<u8>, commits: bool) {
    debug_assert!(out.len() > FRAME_HEADER + 1, "a group holds records");
    debug_assert!(out.len() - FRAME_HEADER <= MAX_GROUP_PAYLOAD);
    out[FRAME_HEADER] = if commits { GROUP_COMMITS } else { 0 };
    let payload = u32::try_from(out.len() - FRAME_HEADER).expect("staging is bounded");
    out[4..8].copy_from_slice(&payload.to_le_bytes());
    out[KIND_OFFSET] = KIND_PACKED_GROUP;
    let checksum = crc32c::crc32c(&out[FRAME_HEADER..]);
    out[..4].copy_from_slice(&checksum.to_le_bytes());
    out.resize(out.len().next_multiple_of(FRAME_ALIGN), 0);
}
