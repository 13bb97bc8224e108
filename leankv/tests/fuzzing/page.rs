//! Target `page`: a valid database (tree "t", 4 KiB pages, two or three levels) with one page
//! replaced by a structure-aware edit of itself (slot count, offsets, lengths, fences, level,
//! head offset, swips, key bytes, slots swapped or duplicated, bytes of other pages...),
//! checksum recomputed; then get, range, scan, insert, remove, update, flush, reopen and
//! check_integrity through it.
//!
//! Every returned pair must be one written to "t" (ever: removed and overwritten values
//! count) or, if the edited page is a well-formed leaf, one of its entries. A pair of another
//! tree (the catalog) is reported as foreign, anything else as invented.

use super::image::{self, PageKind};
use super::input::Input;
use super::nodes::{self, parse_node, show, EditContext};
use super::{finding, lock_dir, Allowed, CaseResult, Kind, Oracle, Summary};
use leankv::testing::{MemoryStorage, Storage};
use leankv::{Db, Options, Tree, MIN_POOL_FRAMES};
use std::ops::Bound;
use std::sync::Arc;

const TREE: &str = "t";
const MAX_OPS: usize = 48;

pub fn run(data: &[u8]) -> CaseResult {
    let mut input = Input::new(data);
    let mut summary = Summary::default();
    let images = image::page_images();
    let image = &images[input.below(images.len())];
    let page_size = image.page_size;
    let pages = &image.pages;
    let of_tree = image.pages_owned_by(TREE);
    let root = *of_tree.iter().find(|&&id| pages[id as usize].root).unwrap();
    let inner: Vec<u64> = of_tree
        .iter()
        .copied()
        .filter(|&id| pages[id as usize].kind == PageKind::Inner && id != root)
        .collect();
    let leaves: Vec<u64> = of_tree
        .iter()
        .copied()
        .filter(|&id| pages[id as usize].kind == PageKind::Leaf)
        .collect();
    let target = match input.below(16) {
        0..=2 => root,
        3..=5 => input.pick(&inner).copied().unwrap_or(root),
        6..=13 => *input.pick(&leaves).unwrap(),
        14 => image.catalog_root,
        _ => 1 + input.below(image.page_count as usize - 1) as u64,
    };
    let meta = &pages[target as usize];
    let original = parse_node(image.page(target), target).ok();
    let mut file = image.bytes.clone();
    let range = target as usize * page_size..(target as usize + 1) * page_size;
    let edit_context = EditContext {
        page_size,
        page_count: image.page_count,
        page_ids: &image.interesting,
        file: &image.bytes,
    };
    let mut notes = Vec::new();
    for _ in 0..1 + input.below(6) {
        notes.push(nodes::edit_node(
            &mut file[range.clone()],
            &mut input,
            &edit_context,
        ));
    }
    if input.below(32) != 0 {
        nodes::seal_page(&mut file[range.clone()]);
    } else {
        notes.push("checksum left stale".into());
    }
    let mut global = Allowed::new(image.all.clone());
    let mut tree_allowed = Allowed::new(image.written[TREE].clone());
    let verdict = match parse_node(&file[range.clone()], target) {
        Ok(node) => {
            summary.tag("edited page well-formed");
            if node.is_leaf() {
                for (key, value) in &node.entries {
                    global.add(key, value);
                    tree_allowed.add(key, value);
                }
            }
            "the edited page is well-formed".to_string()
        }
        Err(reason) => {
            summary.tag("edited page malformed");
            format!("the edited page is malformed: {reason}")
        }
    };
    let mut oracle = Oracle {
        global,
        tree: Some(tree_allowed),
        context: format!(
            "image {:?}, page {target} ({:?} of {:?}, level {}{}) edited: {}; {verdict}",
            image.name,
            meta.kind,
            meta.owner.as_deref().unwrap_or("-"),
            meta.level,
            if meta.root { ", root" } else { "" },
            notes.join(", ")
        ),
    };
    if super::verbose() {
        eprintln!("case: {}", oracle.context);
    }
    // Keys near the edited page first: its entries and fences.
    let mut near: Vec<Vec<u8>> = Vec::new();
    if let Some(node) = &original {
        near.extend(node.entries.iter().map(|(k, _)| k.clone()));
        near.extend(node.lower.iter().cloned());
        near.extend(node.upper.iter().cloned());
    }
    let all_keys: Vec<Vec<u8>> = image.trees[TREE].keys().cloned().collect();
    if near.is_empty() {
        near = all_keys.clone();
    }
    let frames = MIN_POOL_FRAMES + if input.chance(1, 4) { 40 } else { 0 };
    let options = Options::default()
        .page_size(page_size)
        .pool_size(frames * (page_size + 512))
        .background_writer(false);
    let storage = Arc::new(MemoryStorage::new());
    storage.write_at(&file, 0).expect("memory write");
    let dir = lock_dir();
    let open = |summary: &mut Summary| -> Option<(Db, Tree)> {
        summary.calls += 1;
        let db = Db::open_with_storage(dir.path(), options.clone(), storage.clone())
            .map_err(|e| summary.error(&e))
            .ok()?;
        let tree = db.open_tree(TREE).map_err(|e| summary.error(&e)).ok()?;
        Some((db, tree))
    };
    let Some((mut db, mut tree)) = open(&mut summary) else {
        return Ok(summary);
    };
    summary.opened = true;
    let mut written = 0usize;
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        summary.calls += 1;
        let key = pick_key(&mut input, &near, &all_keys);
        match input.below(16) {
            0..=3 => match tree.get(&key) {
                Ok(Some(value)) => {
                    summary.pairs += 1;
                    oracle.check_pair("get", &key, &value)?;
                }
                Ok(None) => {}
                Err(error) => summary.error(&error),
            },
            4 | 5 => {
                let other = pick_key(&mut input, &near, &all_keys);
                let (low, high) = if key <= other {
                    (key, other)
                } else {
                    (other, key)
                };
                let start = match input.below(3) {
                    0 => Bound::Included(low.as_slice()),
                    1 => Bound::Excluded(low.as_slice()),
                    _ => Bound::Unbounded,
                };
                let end = match input.below(3) {
                    0 => Bound::Included(high.as_slice()),
                    1 => Bound::Excluded(high.as_slice()),
                    _ => Bound::Unbounded,
                };
                oracle.check_scan(
                    "range",
                    tree.range::<&[u8], _>((start, end)),
                    start,
                    end,
                    &mut summary,
                )?;
            }
            6 => {
                oracle.check_scan(
                    "iter",
                    tree.iter(),
                    Bound::Unbounded,
                    Bound::Unbounded,
                    &mut summary,
                )?;
            }
            7 => {
                let stop = input.below(64);
                let limit = oracle.scan_limit() + 1;
                let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let result = tree.scan(key.as_slice().., |k, v| {
                    seen.push((k.to_vec(), v.to_vec()));
                    seen.len() != stop && seen.len() <= limit
                });
                let items = seen.into_iter().map(Ok);
                let start = Bound::Included(key.as_slice());
                oracle.check_scan("scan", items, start, Bound::Unbounded, &mut summary)?;
                if let Err(error) = result {
                    summary.error(&error);
                }
            }
            8 | 9 => {
                written += 1;
                let mut value = format!("page-fuzz-{written}-").into_bytes();
                let len = input.below(200);
                value.resize(len.max(value.len()), b'v');
                match tree.insert(&key, &value) {
                    Ok(()) => oracle.add(&key, &value),
                    Err(error) => summary.error(&error),
                }
            }
            10 => {
                if let Err(error) = tree.remove(&key) {
                    summary.error(&error);
                }
            }
            11 => {
                written += 1;
                let fill = written as u8;
                let mut seen = None;
                let result = tree.update_in_place(&key, |bytes| {
                    seen = Some((bytes.to_vec(), bytes.len()));
                    bytes.fill(fill);
                });
                match result {
                    Ok(Some(())) => {
                        let (old, len) = seen.expect("update called the closure");
                        summary.pairs += 1;
                        oracle.check_pair("update_in_place (old value)", &key, &old)?;
                        oracle.add(&key, &vec![fill; len]);
                    }
                    Ok(None) => {
                        if seen.is_some() {
                            return Err(finding(
                                Kind::Invented,
                                format!(
                                    "update_in_place called the closure on {} but said absent; {}",
                                    show(&key, 48),
                                    oracle.context
                                ),
                            ));
                        }
                    }
                    Err(error) => {
                        summary.error(&error);
                        // A value changed before the error may still be there.
                        if let Some((_, len)) = seen {
                            oracle.add(&key, &vec![fill; len]);
                        }
                    }
                }
            }
            12 => {
                if let Err(error) = db.flush() {
                    summary.error(&error);
                }
            }
            13 => {
                drop(tree);
                drop(db);
                match open(&mut summary) {
                    Some((new_db, new_tree)) => (db, tree) = (new_db, new_tree),
                    None => return Ok(summary),
                }
            }
            14 => match db.check_integrity() {
                Ok(report) if report.is_ok() => summary.tag("integrity ok"),
                Ok(_) => summary.tag("integrity problems"),
                Err(error) => summary.error(&error),
            },
            _ => match tree.contains_key(&key) {
                Ok(true) => {
                    if !oracle.global.has_key(&key) {
                        return Err(finding(
                            Kind::Invented,
                            format!(
                                "contains_key({}) is true for a key never written; {}",
                                show(&key, 48),
                                oracle.context
                            ),
                        ));
                    }
                }
                Ok(false) => {}
                Err(error) => summary.error(&error),
            },
        }
    }
    oracle.check_scan(
        "final iter",
        tree.iter(),
        Bound::Unbounded,
        Bound::Unbounded,
        &mut summary,
    )?;
    Ok(summary)
}

fn pick_key(input: &mut Input<'_>, near: &[Vec<u8>], all: &[Vec<u8>]) -> Vec<u8> {
    match input.below(10) {
        0..=4 => input.pick(near).cloned().unwrap_or_default(),
        5 | 6 => input.pick(all).cloned().unwrap_or_default(),
        7 => {
            // Just above or below a key near the page.
            let mut key = input.pick(near).cloned().unwrap_or_default();
            if input.chance(1, 2) {
                key.push(0);
            } else if let Some(last) = key.last_mut() {
                *last = last.wrapping_sub(1);
            }
            key
        }
        8 => Vec::new(),
        _ => {
            let len = input.below(12);
            (0..len).map(|_| input.u8()).collect()
        }
    }
}
