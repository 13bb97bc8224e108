//! Structured edits of the log's frames: header and payload fields, key, value and page image
//! bytes, frames copied, dropped, duplicated, swapped or cut; every touched frame's checksum is
//! recomputed, so the reader takes the edit for a genuine frame. A few of the choices edit the
//! superblock's checkpoint reference instead, or the bytes raw, so one case can combine them.

use super::byte_edits::raw_edit;
use super::format::{
    decode, frame_bytes, get_le, index_frames, seal_frame, set_le, Field, Frame, FRAME_ALIGN,
    MAX_PAYLOAD,
};
use super::images::LogImage;
use super::superblock_edits::superblock_edit;
use super::PAGE_SIZE;
use crate::fuzzing::input::Input;
use crate::fuzzing::nodes::{self, EditContext};
use crate::fuzzing::Summary;

/// A value for an integer field: near the original, at a boundary, or one the log uses.
pub fn interesting(input: &mut Input<'_>, original: u64, width: usize, image: &LogImage) -> u64 {
    let max = if width >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let value = match input.below(18) {
        0 => 0,
        1 => 1,
        2 => original.wrapping_sub(1),
        3 => original.wrapping_add(1),
        4 => original.wrapping_sub(8),
        5 => original.wrapping_add(8),
        6 => original.wrapping_mul(2),
        7 => original / 2,
        8 => max,
        9 => max / 2 + 1,
        10 => input.u64(),
        11 | 12 => input.pick(&image.page_ids).copied().unwrap_or(1),
        13 => input.pick(&image.batches).copied().unwrap_or(0),
        14 => image.page_count + input.below(4) as u64,
        15 => PAGE_SIZE as u64 + input.below(3) as u64 - 1,
        16 => original ^ (1 << input.below(8 * width.min(8))),
        _ => original.wrapping_add(1 + input.below(64) as u64),
    };
    value & max
}

/// The end (exclusive) of the run of `frames` that starts at `index`: the frames that follow it
/// back to back with consecutive LSNs.
fn run_after(frames: &[Frame], index: usize) -> usize {
    let mut end = index + 1;
    while end < frames.len()
        && frames[end].offset == frames[end - 1].end()
        && frames[end].lsn == frames[end - 1].lsn.wrapping_add(frames[end - 1].len as u64)
    {
        end += 1;
    }
    end
}

/// Moves the LSN of every frame in `frames` (already at its final place in `bytes`) by `delta`
/// and reseals it.
fn shift_lsns(bytes: &mut [u8], frames: &[(usize, u64)], delta: i64) {
    for &(at, lsn) in frames {
        nodes::set_u64(bytes, at + 8, lsn.wrapping_add_signed(delta));
        seal_frame(bytes, at);
    }
}

/// An edit that keeps checksums valid (or one of the superblock's checkpoint reference).
pub fn structured_edit(
    image: &LogImage,
    pages: &mut [u8],
    logs: &mut [Vec<u8>; 2],
    input: &mut Input<'_>,
    summary: &mut Summary,
) -> String {
    let choice = input.below(25);
    if choice >= 21 {
        summary.tag("superblock edited");
        return superblock_edit(image, pages, logs, input);
    }
    if choice == 20 {
        return raw_edit(logs, input);
    }
    let mut file = input.below(2);
    let mut frames = index_frames(&logs[file], 0);
    if frames.is_empty() {
        file = 1 - file;
        frames = index_frames(&logs[file], 0);
    }
    if frames.is_empty() {
        return raw_edit(logs, input);
    }
    let index = input.below(frames.len());
    let frame = frames[index];
    let kind = frame.kind;
    let at = frame.offset;
    let where_ = format!("log {file} frame @{at} (kind {kind}, lsn {})", frame.lsn);
    match choice {
        // Header fields.
        0..=4 => {
            summary.tag("frame header edited");
            let bytes = &mut logs[file];
            let note = match input.below(6) {
                0 => {
                    let value = match input.below(4) {
                        0 => interesting(input, frame.payload_len as u64, 4, image),
                        1 => frame.payload_len as u64 + frame.len as u64,
                        2 => MAX_PAYLOAD as u64 + 1,
                        _ => (frame.payload_len as u64).saturating_sub(input.below(16) as u64),
                    } as u32;
                    set_le(bytes, at + 4, 4, u64::from(value));
                    format!("payload length={value}")
                }
                1 | 2 => {
                    let value = match input.below(5) {
                        0 => input.pick(&image.lsns).copied().unwrap_or(0),
                        1 => frame.lsn.wrapping_add(frame.len as u64),
                        2 => frame.lsn.wrapping_sub(input.below(3) as u64 * 8),
                        _ => interesting(input, frame.lsn, 8, image),
                    };
                    set_le(bytes, at + 8, 8, value);
                    format!("lsn={value}")
                }
                3 => {
                    let value = match input.below(4) {
                        0 => input.pick(&image.generations).copied().unwrap_or(0),
                        1 => frame.generation.wrapping_sub(1),
                        2 => frame.generation.wrapping_add(1 + input.below(3) as u32),
                        _ => interesting(input, u64::from(frame.generation), 4, image) as u32,
                    };
                    set_le(bytes, at + 16, 4, u64::from(value));
                    format!("generation={value}")
                }
                4 => {
                    let value = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 255][input.below(10)];
                    bytes[at + 20] = value;
                    format!("kind={value}")
                }
                _ => {
                    let pad = 21 + input.below(3);
                    bytes[at + pad] = input.u8() | 1;
                    format!("header byte {pad}={}", bytes[at + pad])
                }
            };
            seal_frame(bytes, at);
            format!("{where_}: {note}")
        }
        // Payload fields.
        5..=10 => {
            let decoded = decode(kind, frame_bytes(&logs[file], &frame));
            let ints: Vec<Field> = decoded
                .fields
                .iter()
                .copied()
                .filter(|f| matches!(f, Field::Int { .. }))
                .collect();
            let Some(&Field::Int {
                at: field,
                width,
                what,
            }) = input.pick(&ints)
            else {
                return format!("{where_}: no integer field");
            };
            summary.tag("frame field edited");
            let bytes = &mut logs[file];
            let original = get_le(bytes, at + field, width);
            let value = match what {
                "leaf flags" => [0, 1, 2, 3, 4, 5, 8, 255][input.below(8)],
                "durable" if input.chance(1, 2) => {
                    input.pick(&image.lsns).copied().unwrap_or(0) + 8 * input.below(4) as u64
                }
                _ => interesting(input, original, width, image),
            };
            set_le(bytes, at + field, width, value);
            seal_frame(bytes, at);
            format!("{where_}: {what} {original} -> {value}")
        }
        // Key, value and image bytes.
        11..=13 => {
            let decoded = decode(kind, frame_bytes(&logs[file], &frame));
            let mut blobs: Vec<Field> = decoded
                .fields
                .iter()
                .copied()
                .filter(|f| !matches!(f, Field::Int { .. }))
                .collect();
            // Page images half the time when the frame has any.
            if blobs.iter().any(|f| matches!(f, Field::Image { .. })) && input.chance(1, 2) {
                blobs.retain(|f| matches!(f, Field::Image { .. }));
            }
            let Some(&blob) = input.pick(&blobs) else {
                return format!("{where_}: no bytes field");
            };
            let bytes = &mut logs[file];
            let note = match blob {
                Field::Image {
                    at: field,
                    len,
                    page_id,
                    page_size,
                    gap: (start, gap),
                } if page_size == PAGE_SIZE && input.chance(3, 4) => {
                    summary.tag("image edited");
                    let context = EditContext {
                        page_size: PAGE_SIZE,
                        page_count: image.page_count,
                        page_ids: &image.page_ids,
                        file: &image.pages,
                    };
                    // The page as the reader rebuilds it, edited; what an edit puts into the
                    // gap is lost (the gap reads as zeros).
                    let stored = &mut bytes[at + field..at + field + len];
                    let mut page = vec![0u8; page_size];
                    page[..start].copy_from_slice(&stored[..start]);
                    page[start + gap..].copy_from_slice(&stored[start..]);
                    let mut notes = Vec::new();
                    for _ in 0..1 + input.below(3) {
                        notes.push(nodes::edit_node(&mut page, input, &context));
                    }
                    stored[..start].copy_from_slice(&page[..start]);
                    stored[start..].copy_from_slice(&page[start + gap..]);
                    format!("image of page {page_id}: {}", notes.join(", "))
                }
                Field::Image { at: field, len, .. } | Field::Bytes { at: field, len, .. } => {
                    summary.tag("bytes edited");
                    let what = match blob {
                        Field::Bytes { what, .. } => what,
                        _ => "image",
                    };
                    if len == 0 {
                        return format!("{where_}: empty {what}");
                    }
                    let field_bytes = &mut bytes[at + field..at + field + len];
                    match input.below(3) {
                        0 => {
                            let i = input.below(len);
                            field_bytes[i] =
                                field_bytes[i].wrapping_add(1 + input.below(255) as u8);
                            format!("{what} byte {i} changed")
                        }
                        1 => {
                            let other = input.pick(&image.keys).cloned().unwrap_or_default();
                            let n = other.len().min(len);
                            field_bytes[..n].copy_from_slice(&other[..n]);
                            format!("{what} starts with {}", nodes::show(&other[..n], 24))
                        }
                        _ => {
                            let i = input.below(len);
                            field_bytes[i..].fill(0);
                            format!("{what} zeroed from {i}")
                        }
                    }
                }
                Field::Int { .. } => unreachable!("filtered"),
            };
            seal_frame(bytes, at);
            format!("{where_}: {note}")
        }
        // A frame copied over another, or to the end of a run, or anywhere.
        14 | 15 => {
            summary.tag("frame copied");
            let source = frame_bytes(&logs[file], &frame).to_vec();
            let to_file = input.below(2);
            let targets = index_frames(&logs[to_file], 0);
            let (to, lsn, generation) = match input.below(3) {
                0 if !targets.is_empty() => {
                    let target = *input.pick(&targets).expect("not empty");
                    (target.offset, target.lsn, target.generation)
                }
                1 if !targets.is_empty() => {
                    let start = input.below(targets.len());
                    let end = run_after(&targets, start);
                    let last = targets[end - 1];
                    (
                        last.end(),
                        last.lsn.wrapping_add(last.len as u64),
                        last.generation,
                    )
                }
                _ => {
                    let len = logs[to_file].len();
                    let to = (input.below(len + 1) / FRAME_ALIGN) * FRAME_ALIGN;
                    (
                        to,
                        interesting(input, frame.lsn, 8, image),
                        frame.generation,
                    )
                }
            };
            let generation = if input.chance(1, 2) {
                generation
            } else {
                frame.generation
            };
            let bytes = &mut logs[to_file];
            let end = to + source.len().next_multiple_of(FRAME_ALIGN);
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[to..to + source.len()].copy_from_slice(&source);
            set_le(bytes, to + 8, 8, lsn);
            set_le(bytes, to + 16, 4, u64::from(generation));
            seal_frame(bytes, to);
            format!("{where_} copied to log {to_file} @{to} as lsn {lsn} generation {generation}")
        }
        // A frame dropped, duplicated or swapped with its successor; the run's later LSNs
        // follow, so the chain holds.
        16..=18 => {
            let end = run_after(&frames, index);
            let later: Vec<Frame> = frames[index + 1..end].to_vec();
            let bytes = &mut logs[file];
            let len = frame.len;
            match choice {
                16 => {
                    summary.tag("frame dropped");
                    bytes.drain(at..frame.end().min(bytes.len()));
                    let moved: Vec<(usize, u64)> =
                        later.iter().map(|f| (f.offset - len, f.lsn)).collect();
                    shift_lsns(bytes, &moved, -(len as i64));
                    format!("{where_} dropped, {} later frames moved", moved.len())
                }
                17 => {
                    summary.tag("frame duplicated");
                    let copy = bytes[at..frame.end().min(bytes.len())].to_vec();
                    let insert_at = frame.end().min(bytes.len());
                    bytes.splice(insert_at..insert_at, copy);
                    let mut moved = vec![(insert_at, frame.lsn)];
                    moved.extend(later.iter().map(|f| (f.offset + len, f.lsn)));
                    shift_lsns(bytes, &moved, len as i64);
                    format!("{where_} duplicated, {} later frames moved", later.len())
                }
                _ => {
                    let Some(next) = later.first().copied() else {
                        return format!("{where_}: no successor to swap with");
                    };
                    summary.tag("frames swapped");
                    let first = bytes[at..frame.end()].to_vec();
                    let second = bytes[next.offset..next.end().min(bytes.len())].to_vec();
                    if second.len() != next.len {
                        return format!("{where_}: successor cut short");
                    }
                    bytes[at..at + next.len].copy_from_slice(&second);
                    bytes[at + next.len..at + next.len + len].copy_from_slice(&first);
                    shift_lsns(bytes, &[(at, frame.lsn)], 0);
                    shift_lsns(bytes, &[(at + next.len, frame.lsn)], next.len as i64);
                    format!("{where_} swapped with its successor")
                }
            }
        }
        // Truncation at or inside a frame.
        _ => {
            summary.tag("truncated at a frame");
            let cut = if input.chance(1, 2) {
                at
            } else {
                at + 1 + input.below(frame.len - 1)
            };
            logs[file].truncate(cut);
            format!("{where_}: log cut at {cut}")
        }
    }
}
