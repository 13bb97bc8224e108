//! Raw edits of the log files' bytes: checksums are left as they are, so most edits end the log
//! where they land.

use super::format::{FRAME_ALIGN, SECTOR};
use crate::fuzzing::input::Input;

/// A position in `len` bytes, biased to frame-sized steps and the first bytes.
fn position(input: &mut Input<'_>, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    match input.below(4) {
        0 => input.below(len.min(256)),
        1 => (input.below(len) / FRAME_ALIGN) * FRAME_ALIGN,
        _ => input.below(len),
    }
}

/// An edit of the log files' bytes that leaves checksums as they are.
pub fn raw_edit(logs: &mut [Vec<u8>; 2], input: &mut Input<'_>) -> String {
    let file = input.below(2);
    let len = logs[file].len();
    match input.below(10) {
        0..=2 => {
            if len == 0 {
                return format!("log {file} empty, nothing to flip");
            }
            let at = position(input, len);
            let bit = input.below(8);
            logs[file][at] ^= 1 << bit;
            format!("log {file} byte {at} bit {bit} flipped")
        }
        3 => {
            let at = position(input, len);
            let count = 1 + input.below(64);
            let fill = input.below(3);
            let end = (at + count).min(len);
            for byte in &mut logs[file][at..end] {
                *byte = match fill {
                    0 => 0,
                    1 => 0xff,
                    _ => input.u8(),
                };
            }
            format!("log {file} bytes {at}..{end} overwritten ({fill})")
        }
        4 => {
            let at = match input.below(3) {
                0 => (input.below(len / SECTOR + 1)) * SECTOR,
                1 => len.saturating_sub(1 + input.below(SECTOR)),
                _ => position(input, len + 1),
            };
            logs[file].truncate(at);
            format!("log {file} truncated to {at}")
        }
        5 => {
            let extra = 1 + input.below(2 * SECTOR);
            let garbage = input.chance(1, 2);
            for _ in 0..extra {
                let byte = if garbage { input.u8() } else { 0 };
                logs[file].push(byte);
            }
            format!("log {file} extended by {extra} bytes (garbage: {garbage})")
        }
        6 | 7 => {
            let from = input.below(2);
            let source_len = logs[from].len();
            if source_len == 0 {
                return format!("log {from} empty, nothing to copy");
            }
            let count = 8 + input.below(4096);
            let at = (input.below(source_len) / FRAME_ALIGN) * FRAME_ALIGN;
            let chunk = logs[from][at..(at + count).min(source_len)].to_vec();
            let to = (input.below(len + 1) / FRAME_ALIGN) * FRAME_ALIGN;
            let target = &mut logs[file];
            if target.len() < to + chunk.len() {
                target.resize(to + chunk.len(), 0);
            }
            target[to..to + chunk.len()].copy_from_slice(&chunk);
            format!(
                "log {from} bytes {at}..+{} copied to log {file} at {to}",
                chunk.len()
            )
        }
        8 => {
            logs.swap(0, 1);
            "log files swapped".into()
        }
        _ => {
            logs[file].clear();
            format!("log {file} emptied")
        }
    }
}
