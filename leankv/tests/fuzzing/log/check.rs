//! What a case may return: the pairs the edited log claims (the oracle's log side), and the
//! reads that check every pair and tree name against the oracle.

use super::format::{decode, frame_bytes, index_frames, reader_view, FRAME_ALIGN};
use crate::fuzzing::input::Input;
use crate::fuzzing::nodes;
use crate::fuzzing::{finding, Finding, Kind, Oracle, Summary};
use leankv::Db;
use std::ops::Bound;

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

/// Every pair a valid frame of the two log files claims (puts, before-images, leaf images),
/// at the positions the reader may look at: the files as it reads them, frames at any offset
/// of the superblock's checkpoint residue modulo 8 or a multiple of 8.
pub fn log_pairs(logs: &[Vec<u8>; 2], residue: usize, mut add: impl FnMut(&[u8], &[u8])) {
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
                    add(key, value);
                }
                for (page_id, page) in &decoded.images {
                    image_leaf_pairs(page, *page_id, &mut add);
                }
            }
        }
    }
}

/// Reads every tree the catalog names, checking every pair and name.
pub fn read_everything(
    db: &Db,
    oracle: &Oracle,
    input: &mut Input<'_>,
    keys: &[Vec<u8>],
    summary: &mut Summary,
) -> Result<(), Finding> {
    summary.calls += 1;
    let names = match db.tree_names() {
        Ok(names) => names,
        Err(error) => {
            summary.error(&error);
            Vec::new()
        }
    };
    for name in &names {
        if !name.contains('\u{FFFD}') && !oracle.global.has_key(name.as_bytes()) {
            return Err(finding(
                Kind::Invented,
                format!(
                    "tree_names returned {name:?}, a key never written; {}",
                    oracle.context
                ),
            ));
        }
    }
    for name in names.iter().take(64) {
        summary.calls += 1;
        let tree = match db.open_tree(name) {
            Ok(tree) => tree,
            Err(error) => {
                summary.error(&error);
                continue;
            }
        };
        summary.calls += 1;
        let pairs = oracle.check_scan(
            &format!("tree {name:?} iter"),
            tree.iter(),
            Bound::Unbounded,
            Bound::Unbounded,
            summary,
        )?;
        let mut probes: Vec<Vec<u8>> = pairs.iter().take(3).map(|(k, _)| k.clone()).collect();
        for _ in 0..5 {
            if let Some(key) = input.pick(keys) {
                probes.push(key.clone());
            }
        }
        for key in &probes {
            summary.calls += 1;
            match tree.get(key) {
                Ok(Some(value)) => {
                    summary.pairs += 1;
                    oracle.check_pair(&format!("tree {name:?} get"), key, &value)?;
                }
                Ok(None) => {}
                Err(error) => summary.error(&error),
            }
        }
        if probes.len() >= 2 {
            let (a, b) = (&probes[0], &probes[probes.len() - 1]);
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            summary.calls += 1;
            oracle.check_scan(
                &format!("tree {name:?} range"),
                tree.range(low.clone()..=high.clone()),
                Bound::Included(low),
                Bound::Included(high),
                summary,
            )?;
        }
    }
    summary.calls += 1;
    match db.check_integrity() {
        Ok(report) if report.is_ok() => summary.tag("integrity ok"),
        Ok(_) => summary.tag("integrity problems"),
        Err(error) => summary.error(&error),
    }
    Ok(())
}
