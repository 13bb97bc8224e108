//! Groups: the leaf records one batch's thread staged, published as one frame (the format is
//! in `record`). A group costs its records five bytes each where frames of their own cost
//! 24-31, and one checksum over all of them; TPC-C stages ~17 records per transaction.

use super::record::{
    leaf_kind, leaf_payload, varint, FillImage, LeafChange, FRAME_ALIGN, FRAME_HEADER, KIND_GROUP,
    KIND_OFFSET, MAX_GROUP_PAYLOAD,
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
        varint(out, change.batch);
    }
    debug_assert!(
        {
            let mut batch = Vec::new();
            varint(&mut batch, change.batch);
            out[FRAME_HEADER..].starts_with(&batch)
        },
        "a group holds one batch (its header names it)"
    );
    out.push(leaf_kind(change.op));
    let length_at = out.len();
    out.extend_from_slice(&[0; 4]);
    leaf_payload(out, scratch, change, image);
    let len = u32::try_from(out.len() - length_at - 4).expect("a leaf record is far below 4 GiB");
    out[length_at..length_at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Completes the group's frame in `out` (its header's length, kind and payload checksum, as a
/// [`FrameWriter`](super::FrameWriter) leaves a frame, and the padding); `stamp_frames` gives
/// it its place in the log.
pub(super) fn seal(out: &mut Vec<u8>) {
    debug_assert!(out.len() > FRAME_HEADER, "a group holds records");
    debug_assert!(out.len() - FRAME_HEADER <= MAX_GROUP_PAYLOAD);
    let payload = u32::try_from(out.len() - FRAME_HEADER).expect("staging is bounded");
    out[4..8].copy_from_slice(&payload.to_le_bytes());
    out[KIND_OFFSET] = KIND_GROUP;
    let checksum = crc32c::crc32c(&out[FRAME_HEADER..]);
    out[..4].copy_from_slice(&checksum.to_le_bytes());
    out.resize(out.len().next_multiple_of(FRAME_ALIGN), 0);
}
