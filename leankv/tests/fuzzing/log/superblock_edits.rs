//! Edits of the superblock's checkpoint reference (mark, LSN, offset, file, generation, log end),
//! its checksum recomputed: recovery starts where the superblock points.

use super::format::{
    index_frames, set_le, Frame, KIND_CHECKPOINT, SB_CHECKPOINT_FILE, SB_CHECKPOINT_LSN,
    SB_CHECKPOINT_OFFSET, SB_GENERATION, SB_LOG_END, SB_LOG_MARK, SB_OPEN_MARK,
};
use super::frame_edits::interesting;
use super::images::LogImage;
use crate::fuzzing::input::Input;
use crate::fuzzing::nodes::{self, get_u32, get_u64};

/// Points the superblock's checkpoint reference elsewhere; its checksum is recomputed.
pub fn superblock_edit(
    image: &LogImage,
    pages: &mut [u8],
    logs: &[Vec<u8>; 2],
    input: &mut Input<'_>,
) -> String {
    if pages.len() < nodes::SUPERBLOCK_SIZE {
        return "no superblock".into();
    }
    let note = match input.below(9) {
        0 | 1 => {
            // Another checkpoint record, referenced consistently.
            let file = input.below(2);
            let checkpoints: Vec<Frame> = index_frames(&logs[file], 0)
                .into_iter()
                .filter(|f| f.kind == KIND_CHECKPOINT)
                .collect();
            let Some(frame) = input.pick(&checkpoints).copied() else {
                return format!("superblock: no checkpoint in log {file}");
            };
            pages[SB_CHECKPOINT_FILE] = file as u8;
            set_le(pages, SB_CHECKPOINT_OFFSET, 8, frame.offset as u64);
            set_le(pages, SB_CHECKPOINT_LSN, 8, frame.lsn);
            format!(
                "superblock checkpoint -> log {file} @{} lsn {}",
                frame.offset, frame.lsn
            )
        }
        2 => {
            let original = get_u64(pages, SB_CHECKPOINT_LSN);
            let value = match input.below(3) {
                0 => input.pick(&image.lsns).copied().unwrap_or(0),
                _ => interesting(input, original, 8, image),
            };
            set_le(pages, SB_CHECKPOINT_LSN, 8, value);
            format!("superblock checkpoint lsn={value}")
        }
        3 => {
            let original = get_u64(pages, SB_CHECKPOINT_OFFSET);
            let file = usize::from(pages[SB_CHECKPOINT_FILE] & 1);
            let value = match input.below(4) {
                0 => original.wrapping_add(1 + input.below(7) as u64),
                1 => logs[file].len() as u64 + input.below(16) as u64,
                _ => interesting(input, original, 8, image),
            };
            set_le(pages, SB_CHECKPOINT_OFFSET, 8, value);
            format!("superblock checkpoint offset={value}")
        }
        4 => {
            let value = [0u8, 1, 2, 255][input.below(4)];
            pages[SB_CHECKPOINT_FILE] = value;
            format!("superblock checkpoint file={value}")
        }
        5 => {
            let value = [0u8, 1, 2][input.below(3)];
            pages[SB_LOG_MARK] = value;
            format!("superblock log mark={value}")
        }
        6 => {
            let value = [0u8, 1][input.below(2)];
            pages[SB_OPEN_MARK] = value;
            format!("superblock open mark={value}")
        }
        7 => {
            let original = get_u32(pages, SB_GENERATION);
            let value = interesting(input, u64::from(original), 4, image);
            set_le(pages, SB_GENERATION, 4, value);
            format!("superblock generation={value}")
        }
        _ => {
            let original = get_u64(pages, SB_LOG_END);
            let value = interesting(input, original, 8, image);
            set_le(pages, SB_LOG_END, 8, value);
            format!("superblock log end={value}")
        }
    };
    nodes::seal_superblock(pages);
    note
}
