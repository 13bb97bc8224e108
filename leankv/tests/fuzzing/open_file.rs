//! Target `open_file`: arbitrary bytes become a page file; open it and read everything.
//!
//! The first byte picks the mode:
//! * raw (0): the bytes are the file;
//! * paged (1, 2): a superblock and pages assembled from the bytes, checksums made valid, so
//!   random bytes get past the checksums to the fields and node structures behind them;
//! * structured (3..): a valid image (`image::file_images`) with edits of superblock fields,
//!   free-list pages, catalog entries and nodes, page headers, the file length and whole
//!   pages, checksums recomputed (unless an edit breaks one on purpose).
//!
//! Then: open, `tree_names`, open and fully scan every tree, look up keys, one range scan per
//! tree, `check_integrity`; optionally insert/remove/flush, reopen and read everything again.

use super::image::{self, Image, PageKind, CATALOG};
use super::input::Input;
use super::nodes::{self, get_u16, get_u32, get_u64, set_u32, set_u64, EditContext};
use super::read_back::{read_everything, ReadLimits};
use super::{lock_dir, Allowed, CaseResult, Oracle, Pairs, Summary};
use leankv::testing::{MemoryStorage, Storage};
use leankv::{Db, Options, MIN_POOL_FRAMES};
use std::collections::BTreeSet;
use std::sync::Arc;

/// How much of an opened file a case reads back.
const OPEN_FILE_READS: ReadLimits = ReadLimits {
    trees: 200,
    keys_from_scan: 4,
    picked_keys: 4,
};

pub fn run(data: &[u8]) -> CaseResult {
    let mut input = Input::new(data);
    let mut summary = Summary::default();
    let mut context = String::new();
    let mode = input.u8() % 8;
    let (file, base, keys) = match mode {
        0 => {
            summary.tag("raw");
            context.push_str("raw file");
            (
                input.rest().to_vec(),
                Arc::new(Pairs::default()),
                Vec::new(),
            )
        }
        1 | 2 => {
            summary.tag("paged");
            context.push_str("paged file");
            (
                paged(&mut input, mode == 2),
                Arc::new(Pairs::default()),
                Vec::new(),
            )
        }
        _ => {
            let images = image::file_images();
            let image = &images[input.below(images.len())];
            context.push_str(&format!("image {:?}, edits:", image.name));
            let file = structured(image, &mut input, &mut summary, &mut context);
            (file, image.all.clone(), image.keys.clone())
        }
    };
    let mut global = Allowed::new(base);
    // Pairs of well-formed leaves of the file as it is, at the page size its superblock names.
    let page_size = nodes::superblock_page_size(&file);
    if let Some(page_size) = page_size {
        let mut found = Pairs::default();
        found.add_wellformed_leaves(&file, page_size);
        for key in found.keys() {
            for value in found.map_values(key) {
                global.add(key, value);
            }
        }
    }
    let mut oracle = Oracle {
        global,
        tree: None,
        context,
    };
    if super::verbose() {
        eprintln!("case: {}", oracle.context);
    }
    let frames = MIN_POOL_FRAMES + 64 * input.below(4);
    // Opened as a salvage would: a file marked open (crashed) goes through every check too.
    let options = Options::default()
        .page_size(4096)
        .pool_size(frames * (page_size.unwrap_or(4096) + 512))
        .background_writer(false)
        .open_after_crash(true);
    let storage = Arc::new(MemoryStorage::new());
    if !file.is_empty() {
        storage.write_at(&file, 0).expect("memory write");
    }
    let dir = lock_dir();
    let open = |summary: &mut Summary| {
        summary.calls += 1;
        match Db::open_with_storage(dir.path(), options.clone(), storage.clone()) {
            Ok(db) => Some(db),
            Err(error) => {
                summary.error(&error);
                None
            }
        }
    };
    let Some(db) = open(&mut summary) else {
        return Ok(summary);
    };
    summary.opened = true;
    read_everything(
        &db,
        &oracle,
        &mut input,
        &keys,
        OPEN_FILE_READS,
        &mut summary,
    )?;
    if input.is_empty() || input.chance(1, 2) {
        return Ok(summary);
    }
    // Write through whatever was opened, then reopen and read again.
    summary.tag("written");
    let names = db.tree_names().unwrap_or_default();
    let name = input.pick(&names).cloned().unwrap_or_else(|| "fuzz".into());
    // The catalog may get this name now (its value, a root page id, is not checked).
    oracle
        .global
        .add(name.as_bytes(), b"(tree created by the case)");
    if let Ok(tree) = db.open_tree(&name) {
        for n in 0..1 + input.below(16) {
            let key = match input.pick(&keys) {
                Some(key) if input.chance(1, 2) => key.clone(),
                _ => format!("fuzz-key-{n}").into_bytes(),
            };
            let value = format!("fuzz-value-{n}").into_bytes();
            summary.calls += 1;
            match tree.insert(&key, &value) {
                Ok(()) => oracle.add(&key, &value),
                Err(error) => summary.error(&error),
            }
            if input.chance(1, 3) {
                summary.calls += 1;
                if let Err(error) = tree.remove(&key) {
                    summary.error(&error);
                }
            }
        }
    }
    if let Err(error) = db.flush() {
        summary.error(&error);
    }
    drop(db);
    let Some(db) = open(&mut summary) else {
        return Ok(summary);
    };
    read_everything(
        &db,
        &oracle,
        &mut input,
        &keys,
        OPEN_FILE_READS,
        &mut summary,
    )?;
    Ok(summary)
}

/// A file assembled from the input: a superblock (magic, version, page size and references
/// mostly valid) and pages with the input's bytes, ids and checksums mostly valid.
fn paged(input: &mut Input<'_>, always_valid: bool) -> Vec<u8> {
    let page_size = 4096usize << input.below(5);
    let pages = 2 + input.below(7);
    let mut file = vec![0u8; pages * page_size];
    let chunk = input.below(52);
    for byte in &mut file[4..4 + chunk] {
        *byte = input.u8();
    }
    let keep = |input: &mut Input<'_>| always_valid || input.below(8) != 0;
    if keep(input) {
        file[4..12].copy_from_slice(nodes::MAGIC);
    }
    if keep(input) {
        set_u32(&mut file, nodes::SB_VERSION, nodes::FORMAT_VERSION);
    }
    if keep(input) {
        set_u32(&mut file, nodes::SB_PAGE_SIZE, page_size as u32);
    }
    if keep(input) {
        set_u64(&mut file, nodes::SB_PAGE_COUNT, pages as u64);
    }
    if keep(input) {
        set_u64(
            &mut file,
            nodes::SB_CATALOG_ROOT,
            1 + input.below(pages - 1) as u64,
        );
    }
    if keep(input) {
        let free = input.below(pages) as u64;
        set_u64(&mut file, nodes::SB_FREE_HEAD, free);
        set_u64(
            &mut file,
            nodes::SB_FREE_LEN,
            u64::from(free != 0) * input.below(3) as u64,
        );
    }
    nodes::seal_superblock(&mut file);
    for id in 1..pages {
        let page = &mut file[id * page_size..(id + 1) * page_size];
        let len = input.below(page_size.min(1024) + 1);
        for byte in &mut page[4..4 + len.min(page_size - 4)] {
            *byte = input.u8();
        }
        if always_valid || input.below(8) != 0 {
            page[nodes::TYPE] = [1, 1, 2, 3][input.below(4)];
            page[8..16].copy_from_slice(&(id as u64).to_le_bytes());
            // A heap start inside the page and fences that are mostly none.
            if input.chance(3, 4) {
                set_u32(
                    page,
                    nodes::HEAP_START,
                    (page_size - input.below(64)) as u32,
                );
                nodes::set_u16(page, nodes::LOWER_FENCE + 2, nodes::NO_FENCE);
                nodes::set_u16(page, nodes::UPPER_FENCE + 2, nodes::NO_FENCE);
            }
        }
        if always_valid || input.below(8) != 0 {
            nodes::seal_page(page);
        }
    }
    file
}

fn interesting_u64(input: &mut Input<'_>, original: u64, image: &Image, ids: &[u64]) -> u64 {
    let page_size = image.page_size as u64;
    let count = image.page_count;
    match input.below(16) {
        0 => 0,
        1 => 1,
        2 => original.wrapping_sub(1),
        3 => original.wrapping_add(1),
        4 => original.wrapping_mul(2),
        5 => count,
        6 => count - 1,
        7 => count + 1,
        8 => u64::MAX,
        9 => u64::MAX / page_size + 1 + input.below(4) as u64,
        10 => 1 << (32 + input.below(31)),
        11 => input.u64(),
        _ => input.pick(ids).copied().unwrap_or(1),
    }
}

/// A valid image with edits; returns the file.
fn structured(
    image: &Image,
    input: &mut Input<'_>,
    summary: &mut Summary,
    context: &mut String,
) -> Vec<u8> {
    let mut file = image.bytes.clone();
    let page_size = image.page_size;
    let ids = &image.interesting;
    let nodes_all: Vec<u64> = (1..image.page_count)
        .filter(|&id| {
            matches!(
                image.pages[id as usize].kind,
                PageKind::Leaf | PageKind::Inner
            )
        })
        .collect();
    let catalog_pages = image.pages_owned_by(CATALOG);
    let catalog_leaves: Vec<u64> = catalog_pages
        .iter()
        .copied()
        .filter(|&id| image.pages[id as usize].kind == PageKind::Leaf)
        .collect();
    let trunks = image.pages_of(PageKind::FreeListTrunk);
    let mut touched = BTreeSet::new();
    let mut unsealed = BTreeSet::new();
    let mut superblock_sealed = true;
    let edits = 1 + input.below(8);
    for _ in 0..edits {
        let page_range = |file: &Vec<u8>, id: u64| {
            let start = id as usize * page_size;
            (start + page_size <= file.len()).then_some(start..start + page_size)
        };
        let note = match input.below(16) {
            0..=4 => {
                if file.len() < nodes::SUPERBLOCK_SIZE {
                    continue;
                }
                summary.tag("superblock edited");
                let (at, name) = [
                    (nodes::SB_VERSION, "version"),
                    (nodes::SB_PAGE_SIZE, "page_size"),
                    (nodes::SB_CATALOG_ROOT, "catalog_root"),
                    (nodes::SB_PAGE_COUNT, "page_count"),
                    (nodes::SB_FREE_HEAD, "free_list_head"),
                    (nodes::SB_FREE_LEN, "free_list_len"),
                    (4, "magic"),
                    (52, "reserved bytes"),
                ][input.below(8)];
                match name {
                    "version" => {
                        let value = [0, 1, 2, u32::MAX][input.below(4)];
                        set_u32(&mut file, at, value);
                        format!("superblock version={value}")
                    }
                    "page_size" => {
                        let value = [
                            0u32, 512, 2048, 3000, 4096, 8192, 16384, 32768, 65536, 131072,
                        ][input.below(10)];
                        set_u32(&mut file, at, value);
                        format!("superblock page_size={value}")
                    }
                    "magic" | "reserved bytes" => {
                        let at = at + input.below(if name == "magic" { 8 } else { 460 });
                        file[at] ^= 1 << input.below(8);
                        format!("superblock {name} byte {at} flipped")
                    }
                    _ => {
                        let value = interesting_u64(input, get_u64(&file, at), image, ids);
                        set_u64(&mut file, at, value);
                        format!("superblock {name}={value}")
                    }
                }
            }
            5 | 6 => {
                let Some(&trunk) = input.pick(&trunks) else {
                    continue;
                };
                summary.tag("free list edited");
                let Some(range) = page_range(&file, trunk) else {
                    continue;
                };
                touched.insert(trunk);
                let page = &mut file[range];
                let count = get_u32(page, nodes::FL_COUNT);
                match input.below(4) {
                    0 => {
                        let value =
                            interesting_u64(input, get_u64(page, nodes::FL_NEXT), image, ids);
                        set_u64(page, nodes::FL_NEXT, value);
                        format!("free-list page {trunk} next={value}")
                    }
                    1 => {
                        let per_page = ((page_size - nodes::FL_IDS) / 8) as u32;
                        let value = [
                            0,
                            count.wrapping_sub(1),
                            count.wrapping_add(1),
                            per_page,
                            per_page + 1,
                            u32::MAX,
                        ][input.below(6)];
                        set_u32(page, nodes::FL_COUNT, value);
                        format!("free-list page {trunk} count={value}")
                    }
                    _ => {
                        let index = input.below(count.max(1) as usize + 1);
                        let at = nodes::FL_IDS + 8 * index;
                        if at + 8 > page_size {
                            continue;
                        }
                        let value = interesting_u64(input, get_u64(page, at), image, ids);
                        set_u64(page, at, value);
                        format!("free-list page {trunk} id[{index}]={value}")
                    }
                }
            }
            7 | 8 => {
                let Some(&id) = input.pick(&catalog_pages) else {
                    continue;
                };
                summary.tag("catalog edited");
                let Some(range) = page_range(&file, id) else {
                    continue;
                };
                touched.insert(id);
                let edit_context = EditContext {
                    page_size,
                    page_count: image.page_count,
                    page_ids: ids,
                    file: &image.bytes,
                };
                let what = nodes::edit_node(&mut file[range], input, &edit_context);
                format!("catalog page {id}: {what}")
            }
            9 => {
                // A catalog entry names another root.
                let Some(&id) = input.pick(&catalog_leaves) else {
                    continue;
                };
                summary.tag("catalog edited");
                let Some(range) = page_range(&file, id) else {
                    continue;
                };
                touched.insert(id);
                let page = &mut file[range];
                let count = usize::from(get_u16(page, nodes::COUNT))
                    .min((page_size - nodes::SLOTS) / nodes::SLOT_SIZE);
                if count == 0 {
                    continue;
                }
                let index = input.below(count);
                let slot = nodes::SLOTS + index * nodes::SLOT_SIZE;
                let at = usize::from(get_u16(page, slot)) + usize::from(get_u16(page, slot + 2));
                if at + 8 > page_size {
                    continue;
                }
                let value = interesting_u64(input, get_u64(page, at), image, ids);
                set_u64(page, at, value);
                format!("catalog page {id} entry {index} root={value}")
            }
            10 | 11 => {
                let Some(&id) = input.pick(&nodes_all) else {
                    continue;
                };
                summary.tag("node edited");
                let Some(range) = page_range(&file, id) else {
                    continue;
                };
                touched.insert(id);
                let edit_context = EditContext {
                    page_size,
                    page_count: image.page_count,
                    page_ids: ids,
                    file: &image.bytes,
                };
                let what = nodes::edit_node(&mut file[range], input, &edit_context);
                format!("page {id}: {what}")
            }
            12 => {
                let id = 1 + input.below(image.page_count as usize - 1) as u64;
                let Some(range) = page_range(&file, id) else {
                    continue;
                };
                touched.insert(id);
                let page = &mut file[range];
                if input.chance(1, 2) {
                    let value = [0u8, 1, 2, 3, 4][input.below(5)];
                    page[nodes::TYPE] = value;
                    format!("page {id} type={value}")
                } else {
                    let value = interesting_u64(input, id, image, ids);
                    set_u64(page, nodes::PAGE_ID, value);
                    format!("page {id} id field={value}")
                }
            }
            13 => {
                summary.tag("length edited");
                let pages = file.len() / page_size;
                let length = match input.below(4) {
                    0 => input.below(pages + 1) * page_size,
                    1 => (input.below(pages) * page_size + 1 + input.below(page_size - 1)).max(1),
                    2 => file.len() + page_size,
                    _ => input.below(4096),
                };
                file.resize(length, 0);
                format!("file length={length}")
            }
            14 => {
                let from = 1 + input.below(image.page_count as usize - 1) as u64;
                let to = 1 + input.below(image.page_count as usize - 1) as u64;
                let (Some(source), Some(target)) = (page_range(&file, from), page_range(&file, to))
                else {
                    continue;
                };
                touched.insert(to);
                let id: [u8; 8] = file[target.start + 8..target.start + 16]
                    .try_into()
                    .unwrap();
                file.copy_within(source, target.start);
                file[target.start + 8..target.start + 16].copy_from_slice(&id);
                format!("page {from} copied over page {to}")
            }
            _ => {
                if input.chance(1, 4) {
                    superblock_sealed = false;
                    "superblock checksum left stale".to_string()
                } else {
                    let id = 1 + input.below(image.page_count as usize - 1) as u64;
                    unsealed.insert(id);
                    if let Some(range) = page_range(&file, id) {
                        file[range.start + 100] ^= 0x40;
                    }
                    format!("page {id} checksum broken")
                }
            }
        };
        context.push_str(&format!(" {note};"));
    }
    for id in touched.difference(&unsealed) {
        let start = *id as usize * page_size;
        if start + page_size <= file.len() {
            nodes::seal_page(&mut file[start..start + page_size]);
        }
    }
    if superblock_sealed {
        nodes::seal_superblock(&mut file);
    }
    file
}
