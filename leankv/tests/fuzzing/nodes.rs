//! The on-disk formats, seen from outside the engine: page checksums, the superblock, the
//! free-list chain and B-tree nodes; a strict node parser (the oracle for "is this page a
//! well-formed node, and which pairs does it hold") and structure-aware page edits.
//!
//! Written from the format descriptions in `io/page.rs`, `io/superblock.rs`,
//! `buffer/page_ids.rs` and `btree/node/mod.rs`, not from the engine's code, so that it checks the
//! engine rather than repeating it.

use super::input::Input;

pub const SUPERBLOCK_SIZE: usize = 512;
pub const MAGIC: &[u8; 8] = b"LEANKV\0\n";

// Page header.
pub const TYPE: usize = 4;
pub const PAGE_ID: usize = 8;
pub const TYPE_LEAF: u8 = 1;
pub const TYPE_INNER: u8 = 2;
pub const TYPE_FREE_LIST: u8 = 3;

// Superblock fields.
pub const SB_VERSION: usize = 12;
/// The on-disk format version the engine writes.
pub const FORMAT_VERSION: u32 = 3;
pub const SB_PAGE_SIZE: usize = 16;
pub const SB_CATALOG_ROOT: usize = 20;
pub const SB_PAGE_COUNT: usize = 28;
pub const SB_FREE_HEAD: usize = 36;
pub const SB_FREE_LEN: usize = 44;

// Free-list pages.
pub const FL_NEXT: usize = 24;
pub const FL_COUNT: usize = 32;
pub const FL_IDS: usize = 40;

// Nodes.
pub const COUNT: usize = 24;
pub const LEVEL: usize = 26;
pub const LOWER_FENCE: usize = 28;
pub const UPPER_FENCE: usize = 32;
pub const HEAP_START: usize = 36;
pub const GARBAGE: usize = 40;
pub const HEAD_OFFSET: usize = 44;
pub const UPPER_SWIP: usize = 48;
pub const HINTS: usize = 56;
pub const HINT_COUNT: usize = 16;
pub const SLOTS: usize = HINTS + 4 * HINT_COUNT;
pub const SLOT_SIZE: usize = 10;
pub const NO_FENCE: u16 = u16::MAX;

pub fn get_u16(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

pub fn get_u32(page: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(page[at..at + 4].try_into().unwrap())
}

pub fn get_u64(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().unwrap())
}

pub fn set_u16(page: &mut [u8], at: usize, value: u16) {
    if at + 2 <= page.len() {
        page[at..at + 2].copy_from_slice(&value.to_le_bytes());
    }
}

pub fn set_u32(page: &mut [u8], at: usize, value: u32) {
    if at + 4 <= page.len() {
        page[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }
}

pub fn set_u64(page: &mut [u8], at: usize, value: u64) {
    if at + 8 <= page.len() {
        page[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }
}

/// Stores the CRC-32C of bytes 4.. in bytes 0..4 (a page of any type).
pub fn seal_page(page: &mut [u8]) {
    let crc = crc32c::crc32c(&page[4..]);
    page[..4].copy_from_slice(&crc.to_le_bytes());
}

pub fn page_checksum_ok(page: &[u8]) -> bool {
    page.len() >= 24 && get_u32(page, 0) == crc32c::crc32c(&page[4..])
}

/// Stores the superblock's CRC-32C (of bytes 4..512).
pub fn seal_superblock(file: &mut [u8]) {
    if file.len() >= SUPERBLOCK_SIZE {
        let crc = crc32c::crc32c(&file[4..SUPERBLOCK_SIZE]);
        file[..4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The page size a superblock names, if it is one the engine accepts.
pub fn superblock_page_size(file: &[u8]) -> Option<usize> {
    if file.len() < SUPERBLOCK_SIZE || &file[4..12] != MAGIC {
        return None;
    }
    let size = get_u32(file, SB_PAGE_SIZE) as usize;
    (size.is_power_of_two() && (4096..=65536).contains(&size)).then_some(size)
}

pub fn unswizzled(page_id: u64) -> u64 {
    (page_id << 1) | 1
}

/// The page id in an on-disk swip word (None for a word that is no page id).
pub fn swip_page(word: u64) -> Option<u64> {
    (word & 1 == 1).then_some(word >> 1)
}

fn key_head(key: &[u8], offset: usize) -> u32 {
    u32::from_be_bytes(std::array::from_fn(|i| {
        key.get(offset + i).copied().unwrap_or(0)
    }))
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A node that passed [`parse_node`].
#[derive(Debug, Clone)]
pub struct ParsedNode {
    pub level: u16,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    /// Leaves: the pairs. Inner nodes: the separator keys with the 8-byte swip.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Inner nodes: the child swip words, the upper child last.
    pub children: Vec<u64>,
}

impl ParsedNode {
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }
}

/// Parses `page` (page `page_id`) as a B-tree node and checks everything a reader may rely on:
/// checksum, page id, a page type that matches the level, slot array and heap inside the page,
/// fences and entries inside the heap and not overlapping each other, correct key heads and
/// head offset, keys strictly ascending and within the fences, 8-byte aligned swips holding
/// page ids in inner nodes. Pairs of a page that passes are data that is really in the file;
/// pairs of one that does not are made-up bytes.
pub fn parse_node(page: &[u8], page_id: u64) -> Result<ParsedNode, String> {
    let len = page.len();
    if len < 4096 {
        return Err("page shorter than 4096 bytes".into());
    }
    if !page_checksum_ok(page) {
        return Err("checksum mismatch".into());
    }
    if get_u64(page, PAGE_ID) != page_id {
        return Err(format!("page id field says {}", get_u64(page, PAGE_ID)));
    }
    let level = get_u16(page, LEVEL);
    let leaf = level == 0;
    match (page[TYPE], leaf) {
        (TYPE_LEAF, true) | (TYPE_INNER, false) => {}
        (other, _) => return Err(format!("page type {other} with level {level}")),
    }
    let count = usize::from(get_u16(page, COUNT));
    let slots_end = SLOTS + count * SLOT_SIZE;
    let heap = get_u32(page, HEAP_START) as usize;
    if slots_end > len {
        return Err(format!("slot count {count} exceeds the page"));
    }
    if heap < slots_end || heap > len {
        return Err(format!("heap start {heap} outside {slots_end}..={len}"));
    }
    // Heap ranges in use: fences and entries; they must not overlap.
    let mut ranges: Vec<(usize, usize, String)> = Vec::new();
    let pad = |n: usize| if leaf { n } else { n.next_multiple_of(8) };
    let mut fence = |at: usize, what: &str| -> Result<Option<Vec<u8>>, String> {
        let fence_len = get_u16(page, at + 2);
        if fence_len == NO_FENCE {
            return Ok(None);
        }
        let offset = usize::from(get_u16(page, at));
        let fence_len = usize::from(fence_len);
        if offset < heap || offset + fence_len > len {
            return Err(format!(
                "{what} fence {offset}+{fence_len} outside the heap"
            ));
        }
        if fence_len > 0 {
            ranges.push((offset, offset + pad(fence_len), format!("{what} fence")));
        }
        Ok(Some(page[offset..offset + fence_len].to_vec()))
    };
    let lower = fence(LOWER_FENCE, "lower")?;
    let upper = fence(UPPER_FENCE, "upper")?;
    if let (Some(lower), Some(upper)) = (&lower, &upper) {
        if lower >= upper {
            return Err("lower fence not below the upper fence".into());
        }
    }
    let mut entries = Vec::with_capacity(count);
    let mut children = Vec::new();
    for index in 0..count {
        let slot = SLOTS + index * SLOT_SIZE;
        let offset = usize::from(get_u16(page, slot));
        let key_len = usize::from(get_u16(page, slot + 2));
        let value_len = usize::from(get_u16(page, slot + 4));
        let end = offset + pad(key_len) + value_len;
        if offset < heap || end > len {
            return Err(format!("entry {index} ({offset}..{end}) outside the heap"));
        }
        if end > offset {
            ranges.push((offset, end, format!("entry {index}")));
        }
        let key = page[offset..offset + key_len].to_vec();
        let value = page[offset + pad(key_len)..end].to_vec();
        if !leaf {
            if value_len != 8 || !(offset + pad(key_len)).is_multiple_of(8) {
                return Err(format!("inner entry {index} has a malformed swip"));
            }
            children.push(get_u64(page, offset + pad(key_len)));
        }
        entries.push((key, value));
    }
    if !leaf {
        children.push(get_u64(page, UPPER_SWIP));
        if let Some(bad) = children.iter().position(|&word| swip_page(word).is_none()) {
            return Err(format!("child {bad} is not a page id"));
        }
    }
    ranges.sort();
    for pair in ranges.windows(2) {
        if pair[1].0 < pair[0].1 {
            return Err(format!("{} and {} overlap", pair[0].2, pair[1].2));
        }
    }
    for index in 1..count {
        if entries[index - 1].0 >= entries[index].0 {
            return Err(format!("keys {} and {index} out of order", index - 1));
        }
    }
    if let (Some(lower), Some((first, _))) = (&lower, entries.first()) {
        if first <= lower {
            return Err("first key not above the lower fence".into());
        }
    }
    if let (Some(upper), Some((last, _))) = (&upper, entries.last()) {
        if last > upper {
            return Err("last key above the upper fence".into());
        }
    }
    let head_offset = usize::from(get_u16(page, HEAD_OFFSET));
    let widest = match (entries.first(), entries.last()) {
        (Some((first, _)), Some((last, _))) => common_prefix(first, last),
        _ => match (&lower, &upper) {
            (Some(lower), Some(upper)) => common_prefix(lower, upper),
            _ => 0,
        },
    };
    if head_offset > widest {
        return Err(format!(
            "head offset {head_offset} beyond the shared prefix {widest}"
        ));
    }
    for (index, (key, _)) in entries.iter().enumerate() {
        let head = get_u32(page, SLOTS + index * SLOT_SIZE + 6);
        if head != key_head(key, head_offset) {
            return Err(format!("entry {index} has a wrong key head"));
        }
    }
    // Hints: in a node of more than 32 entries, hint i is the head of slot (i + 1) * (count /
    // 17); otherwise zero.
    for i in 0..HINT_COUNT {
        let expected = if count > 2 * HINT_COUNT {
            get_u32(
                page,
                SLOTS + (i + 1) * (count / (HINT_COUNT + 1)) * SLOT_SIZE + 6,
            )
        } else {
            0
        };
        if get_u32(page, HINTS + 4 * i) != expected {
            return Err(format!("hint {i} does not match the slots"));
        }
    }
    Ok(ParsedNode {
        level,
        lower,
        upper,
        entries,
        children,
    })
}

/// Page ids and facts structure-aware edits draw from.
pub struct EditContext<'a> {
    pub page_size: usize,
    pub page_count: u64,
    /// Page ids worth pointing at: roots, inner nodes, leaves, free pages, the superblock.
    pub page_ids: &'a [u64],
    /// The whole file, for copying parts of other pages.
    pub file: &'a [u8],
}

impl EditContext<'_> {
    pub fn page_id(&self, input: &mut Input<'_>) -> u64 {
        match input.below(8) {
            0 => 0,
            1 => self.page_count,
            2 => self.page_count + 1 + input.below(4) as u64,
            3 => input.u64(),
            _ => input.pick(self.page_ids).copied().unwrap_or(1),
        }
    }
}

/// A value near `original` or at a boundary.
pub fn interesting_u16(input: &mut Input<'_>, original: u16, page_len: usize) -> u16 {
    let max_slots = (page_len - SLOTS) / SLOT_SIZE;
    match input.below(16) {
        0 => 0,
        1 => 1,
        2 => original.wrapping_sub(1),
        3 => original.wrapping_add(1),
        4 => original.wrapping_mul(2),
        5 => original / 2,
        6 => 0x7fff,
        7 => 0x8000,
        8 => 0xfffe,
        9 => 0xffff,
        10 => (page_len - 1) as u16,
        11 => page_len as u16,
        12 => (page_len + 1) as u16,
        13 => max_slots as u16,
        14 => (max_slots + 1) as u16,
        _ => input.u16(),
    }
}

pub fn interesting_u32(input: &mut Input<'_>, original: u32, page_len: usize) -> u32 {
    match input.below(10) {
        0 => 0,
        1 => original.wrapping_sub(1),
        2 => original.wrapping_add(1),
        3 => page_len as u32,
        4 => page_len as u32 + 1 + input.below(64) as u32,
        5 => SLOTS as u32,
        6 => u32::MAX,
        7 => original / 2,
        8 => u32::from(interesting_u16(input, original as u16, page_len)),
        _ => input.u32(),
    }
}

/// A swip word: a page id (good, bad or out of range), or words that are no page id.
pub fn interesting_swip(input: &mut Input<'_>, original: u64, context: &EditContext<'_>) -> u64 {
    match input.below(10) {
        0 => 0,
        1 => u64::MAX,
        2 => original ^ 1,
        3 => (1 + input.below(64) as u64) << 1, // looks like a frame index
        4 => unswizzled(input.u64() >> 1),
        5 => input.u64(),
        _ => unswizzled(context.page_id(input)),
    }
}

fn slot_count(page: &[u8]) -> usize {
    usize::from(get_u16(page, COUNT)).min((page.len() - SLOTS) / SLOT_SIZE)
}

/// Applies one structure-aware edit to the node `page` (whose own page id stays put unless
/// the edit is about the id). The caller reseals the page.
pub fn edit_node(page: &mut [u8], input: &mut Input<'_>, context: &EditContext<'_>) -> String {
    let len = page.len();
    let count = slot_count(page);
    let slot_index = |input: &mut Input<'_>| input.below(count + 1);
    match input.below(24) {
        0 | 1 => {
            let value = interesting_u16(input, get_u16(page, COUNT), len);
            set_u16(page, COUNT, value);
            format!("count={value}")
        }
        2 => {
            let original = get_u16(page, LEVEL);
            let value = match input.below(6) {
                0 => 0,
                1 => original.wrapping_add(1),
                2 => original.wrapping_sub(1),
                3 => 31 + input.below(4) as u16,
                4 => 0xffff,
                _ => input.u16(),
            };
            set_u16(page, LEVEL, value);
            format!("level={value}")
        }
        3 | 4 => {
            let at = if input.u8() & 1 == 0 {
                LOWER_FENCE
            } else {
                UPPER_FENCE
            };
            let name = if at == LOWER_FENCE { "lower" } else { "upper" };
            match input.below(4) {
                0 => {
                    let value = interesting_u16(input, get_u16(page, at), len);
                    set_u16(page, at, value);
                    format!("{name}_fence.offset={value}")
                }
                1 => {
                    let value = interesting_u16(input, get_u16(page, at + 2), len);
                    set_u16(page, at + 2, value);
                    format!("{name}_fence.len={value}")
                }
                2 => {
                    // The fence becomes one of the node's own keys (or an infinite one).
                    if count == 0 || input.u8().is_multiple_of(4) {
                        set_u16(page, at + 2, NO_FENCE);
                        format!("{name}_fence=none")
                    } else {
                        let index = input.below(count);
                        let slot = SLOTS + index * SLOT_SIZE;
                        let (offset, key_len) = (get_u16(page, slot), get_u16(page, slot + 2));
                        set_u16(page, at, offset);
                        set_u16(page, at + 2, key_len);
                        format!("{name}_fence=key[{index}]")
                    }
                }
                _ => {
                    // Change one byte of the fence key itself.
                    let offset = usize::from(get_u16(page, at));
                    let fence_len = usize::from(get_u16(page, at + 2));
                    if fence_len == 0 || fence_len == usize::from(NO_FENCE) {
                        return "fence byte (none)".into();
                    }
                    let position = (offset + input.below(fence_len)).min(len - 1);
                    page[position] =
                        page[position].wrapping_add(if input.u8() & 1 == 0 { 1 } else { 255 });
                    format!("{name}_fence byte at {position}")
                }
            }
        }
        5 => {
            let value = interesting_u32(input, get_u32(page, HEAP_START), len);
            set_u32(page, HEAP_START, value);
            format!("heap_start={value}")
        }
        6 => {
            let value = interesting_u32(input, get_u32(page, GARBAGE), len);
            set_u32(page, GARBAGE, value);
            format!("garbage={value}")
        }
        7 if input.u8() & 1 == 0 => {
            // A hint: off by one, another slot's head, or any value.
            let at = HINTS + 4 * input.below(HINT_COUNT);
            let original = get_u32(page, at);
            let value = match input.below(3) {
                0 => original.wrapping_add(1),
                1 if count > 0 => get_u32(page, SLOTS + input.below(count) * SLOT_SIZE + 6),
                _ => input.u64() as u32,
            };
            set_u32(page, at, value);
            format!("hint at {at}={value:#x}")
        }
        7 => {
            let original = get_u16(page, HEAD_OFFSET);
            let value = match input.below(5) {
                0 => 0,
                1 => original.wrapping_add(1),
                2 => original.wrapping_sub(1),
                3 => 0xffff,
                _ => input.u8().into(),
            };
            set_u16(page, HEAD_OFFSET, value);
            format!("head_offset={value}")
        }
        8..=11 => {
            let index = slot_index(input);
            let field = input.below(4);
            // The head is four bytes: either half of it.
            let half = if field == 3 { 2 * input.below(2) } else { 0 };
            let at = SLOTS + index * SLOT_SIZE + 2 * field + half;
            if at + 2 > len {
                return "slot field (outside)".into();
            }
            let value = interesting_u16(input, get_u16(page, at), len);
            set_u16(page, at, value);
            let name = ["key_offset", "key_len", "value_len", "head"][field];
            format!("slot[{index}].{name}={value}")
        }
        12 | 13 => {
            // A child swip (inner nodes), or the word where it would be.
            let index = slot_index(input);
            let at = if index >= count {
                UPPER_SWIP
            } else {
                let slot = SLOTS + index * SLOT_SIZE;
                let key_len = usize::from(get_u16(page, slot + 2));
                usize::from(get_u16(page, slot)) + key_len.next_multiple_of(8)
            };
            if at + 8 > len {
                return "swip (outside)".into();
            }
            let value = interesting_swip(input, get_u64(page, at), context);
            set_u64(page, at, value);
            format!("swip[{index}]@{at}={value:#x}")
        }
        14 | 15 => {
            // One byte of a key.
            if count == 0 {
                return "key byte (no keys)".into();
            }
            let index = input.below(count);
            let slot = SLOTS + index * SLOT_SIZE;
            let offset = usize::from(get_u16(page, slot));
            let key_len = usize::from(get_u16(page, slot + 2));
            if key_len == 0 {
                return format!("key byte (key {index} empty)");
            }
            let position = (offset + input.below(key_len)).min(len - 1);
            let value = match input.below(3) {
                0 => page[position].wrapping_add(1),
                1 => page[position].wrapping_sub(1),
                _ => input.u8(),
            };
            page[position] = value;
            format!("key[{index}] byte at {position}={value}")
        }
        16 => {
            if count < 2 {
                return "swap (fewer than 2 slots)".into();
            }
            let (a, b) = (input.below(count), input.below(count));
            let (a, b) = (SLOTS + a * SLOT_SIZE, SLOTS + b * SLOT_SIZE);
            let slot_a: [u8; SLOT_SIZE] = page[a..a + SLOT_SIZE].try_into().unwrap();
            page.copy_within(b..b + SLOT_SIZE, a);
            page[b..b + SLOT_SIZE].copy_from_slice(&slot_a);
            format!("swap slots at {a} and {b}")
        }
        17 => {
            // Duplicate a slot (count + 1).
            if count == 0 || SLOTS + (count + 1) * SLOT_SIZE > len {
                return "duplicate slot (none)".into();
            }
            let index = input.below(count);
            let at = SLOTS + index * SLOT_SIZE;
            page.copy_within(at..SLOTS + count * SLOT_SIZE, at + SLOT_SIZE);
            set_u16(page, COUNT, (count + 1) as u16);
            format!("duplicate slot {index}")
        }
        18 => {
            if count == 0 {
                return "drop slot (none)".into();
            }
            let index = input.below(count);
            let at = SLOTS + index * SLOT_SIZE;
            page.copy_within(at + SLOT_SIZE..SLOTS + count * SLOT_SIZE, at);
            set_u16(page, COUNT, (count - 1) as u16);
            format!("drop slot {index}")
        }
        19 => {
            let value = *input.pick(&[0u8, 1, 2, 3, 4, 255]).unwrap();
            page[TYPE] = value;
            format!("page type={value}")
        }
        20 => {
            let at = input.below(len);
            let value = input.u8();
            page[at] = value;
            format!("byte {at}={value}")
        }
        21 => {
            let end = (SLOTS + (count + 1) * SLOT_SIZE).min(len);
            let at = COUNT + input.below(end - COUNT - 1);
            let value = interesting_u16(input, get_u16(page, at), len);
            set_u16(page, at, value);
            format!("u16 at {at}={value}")
        }
        22 => {
            // Bytes of another page over this one (its own id and checksum are restored by
            // sealing; the id field is kept).
            let pages = context.file.len() / context.page_size;
            if pages < 2 {
                return "copy (no pages)".into();
            }
            let source = 1 + input.below(pages - 1);
            let from = &context.file[source * context.page_size..(source + 1) * context.page_size];
            let (start, end) = match input.below(3) {
                0 => (TYPE, len),
                1 => (COUNT, SLOTS),
                _ => {
                    let start = input.below(len);
                    (start, (start + 1 + input.below(256)).min(len))
                }
            };
            let id: [u8; 8] = page[PAGE_ID..PAGE_ID + 8].try_into().unwrap();
            page[start..end].copy_from_slice(&from[start..end]);
            page[PAGE_ID..PAGE_ID + 8].copy_from_slice(&id);
            format!("bytes {start}..{end} from page {source}")
        }
        _ => {
            let value = context.page_id(input);
            set_u64(page, PAGE_ID, value);
            format!("page id field={value}")
        }
    }
}

/// Hex-ish rendering of bytes for reports (printable ASCII kept), cut after `max` bytes.
pub fn show(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    for &byte in bytes.iter().take(max) {
        if byte.is_ascii_graphic() && byte != b'\\' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    if bytes.len() > max {
        out.push_str(&format!("...({} bytes)", bytes.len()));
    }
    out
}
