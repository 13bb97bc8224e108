//! What a case may return: the pairs the edited log claims (the oracle's log side), and how
//! much of the recovered database it reads back (`read_back` does the reading).

use super::format::{decode, frame_bytes, index_frames, reader_view, Patch, FRAME_ALIGN};
use crate::fuzzing::nodes;
use crate::fuzzing::read_back::ReadLimits;
use std::collections::{HashMap, HashSet};

/// The pairs of a page image in a log record, if it is a well-formed leaf once sealed as the
/// engine seals it (its page id and checksum).
fn image_leaf_pairs(image: &[u8], page_id: u64, add: &mut impl FnMut(&[u8], &[u8])) {
    if image.len() < 4096 {
        return;
    }
    let mut page = image.to_vec();
    page[8..16].copy_from_slice(&page_id.to_le_bytes());
    nodes::seal_page(&mut page);
    if let Ok(node) = nodes::parse_node(&page, page_id) {
        if node.is_leaf() {
            for (key, value) in &node.entries {
                add(key, value);
            }
        }
    }
}

/// Every pair a valid frame of the two log files claims (puts, before-images, leaf images, and
/// values patches make of claimed ones or of `known(key)`), at the positions the reader may
/// look at: the files as it reads them, frames at any offset of the superblock's checkpoint
/// residue modulo 8 or a multiple of 8.
pub fn log_pairs(
    logs: &[Vec<u8>; 2],
    residue: usize,
    known: impl Fn(&[u8]) -> Vec<Vec<u8>>,
    mut add: impl FnMut(&[u8], &[u8]),
) {
    let mut claimed: HashMap<Vec<u8>, HashSet<Vec<u8>>> = HashMap::new();
    let mut claim = |key: &[u8], value: &[u8]| {
        claimed
            .entry(key.to_vec())
            .or_default()
            .insert(value.to_vec());
    };
    let mut patches = Vec::new();
    for file in logs {
        let view = reader_view(file);
        let mut residues = vec![0];
        if !residue.is_multiple_of(FRAME_ALIGN) {
            residues.push(residue % FRAME_ALIGN);
        }
        for residue in residues {
            for frame in index_frames(&view, residue) {
                let bytes = frame_bytes(&view, &frame);
                let decoded = decode(frame.kind, bytes);
                for (key, value) in &decoded.pairs {
                    claim(key, value);
                }
                for (page_id, page) in &decoded.images {
                    image_leaf_pairs(page, *page_id, &mut claim);
                }
                patches.extend(decoded.patches);
            }
        }
    }
    for patch in &patches {
        for value in known(&patch.key) {
            claimed.entry(patch.key.clone()).or_default().insert(value);
        }
    }
    add_patched(&mut claimed, &patches);
    for (key, values) in &claimed {
        for value in values {
            add(key, value);
        }
    }
}

/// Adds to `claimed` every value the `patches` make of values claimed for their keys: as many
/// rounds as there are patches (at most), so that chains of patches in any order are covered.
fn add_patched(claimed: &mut HashMap<Vec<u8>, HashSet<Vec<u8>>>, patches: &[Patch]) {
    for _ in 0..patches.len() {
        let mut grew = false;
        for patch in patches {
            let Some(values) = claimed.get_mut(&patch.key) else {
                continue;
            };
            let patched: Vec<Vec<u8>> = values.iter().filter_map(|v| patch.apply(v)).collect();
            for value in patched {
                grew |= values.insert(value);
            }
        }
        if !grew {
            break;
        }
    }
}

/// How much of a recovered database a case reads back.
pub const LOG_READS: ReadLimits = ReadLimits {
    trees: 64,
    keys_from_scan: 3,
    picked_keys: 5,
};
