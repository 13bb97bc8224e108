//! The log's format as the target reads and edits it: frames found, decoded and sealed as the
//! engine's reader would see them (decoding more leniently), and the superblock's log fields.

use crate::fuzzing::nodes::{get_u32, get_u64};
use std::borrow::Cow;

// The frame format (`leankv/src/wal/record.rs`).
pub const FRAME_HEADER: usize = 24;
pub const FRAME_ALIGN: usize = 8;
pub const MAX_PAYLOAD: usize = 1 << 30;
pub const KIND_CHECKPOINT: u8 = 1;
pub const KIND_STRUCTURE: u8 = 2;
pub const KIND_PUT: u8 = 3;
pub const KIND_REMOVE: u8 = 4;
pub const KIND_PATCH: u8 = 5;
pub const KIND_COMMIT: u8 = 6;
pub const KIND_NEW_TREE: u8 = 7;
pub const KIND_SYNC_MARK: u8 = 8;
pub const KIND_SPLIT: u8 = 9;
pub const KIND_GROUP: u8 = 12;
pub const KIND_PACKED_GROUP: u8 = 13;
/// Largest page an image may claim.
const MAX_PAGE: usize = 1 << 16;
/// The reader reads whole sectors; a partial last sector reads as zeros.
pub const SECTOR: usize = 512;

// The superblock's log fields (`leankv/src/io/superblock.rs`).
pub const SB_OPEN_MARK: usize = 52;
pub const SB_LOG_MARK: usize = 53;
pub const SB_CHECKPOINT_LSN: usize = 56;
pub const SB_CHECKPOINT_OFFSET: usize = 64;
pub const SB_CHECKPOINT_FILE: usize = 72;
pub const SB_GENERATION: usize = 76;
pub const SB_LOG_END: usize = 80;

/// Writes the `width` low bytes of `value` at `at`, little-endian (fields are 1, 4 or 8 wide).
pub fn set_le(bytes: &mut [u8], at: usize, width: usize, value: u64) {
    bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

/// The little-endian integer of `width` bytes at `at`.
pub fn get_le(bytes: &[u8], at: usize, width: usize) -> u64 {
    let mut value = [0u8; 8];
    value[..width].copy_from_slice(&bytes[at..at + width]);
    u64::from_le_bytes(value)
}

/// A frame whose checksum holds (wherever it lies, whatever its LSN and generation).
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub offset: usize,
    /// Bytes it occupies, padding included.
    pub len: usize,
    pub payload_len: usize,
    pub lsn: u64,
    pub generation: u32,
    pub kind: u8,
}

impl Frame {
    pub fn end(&self) -> usize {
        self.offset + self.len
    }
}

fn crc_of(bytes: &[u8], at: usize, payload_len: usize) -> Option<u32> {
    let header = bytes.get(at + 4..at + FRAME_HEADER)?;
    let payload = bytes.get(at + FRAME_HEADER..(at + FRAME_HEADER).checked_add(payload_len)?)?;
    // The payload first, then the header's fields (so a record encodes before its position
    // is known).
    Some(crc32c::crc32c_append(crc32c::crc32c(payload), header))
}

/// The frame at `at`, if its kind is one the reader decodes and its checksum holds.
pub fn frame_at(bytes: &[u8], at: usize) -> Option<Frame> {
    let header = bytes.get(at..at + FRAME_HEADER)?;
    let payload_len = get_u32(header, 4) as usize;
    let kind = header[20];
    if payload_len > MAX_PAYLOAD
        || !matches!(
            kind,
            KIND_CHECKPOINT
                | KIND_STRUCTURE
                | KIND_PUT
                | KIND_REMOVE
                | KIND_PATCH
                | KIND_COMMIT
                | KIND_NEW_TREE
                | KIND_SYNC_MARK
                | KIND_SPLIT
                | KIND_GROUP
                | KIND_PACKED_GROUP
        )
    {
        return None;
    }
    (crc_of(bytes, at, payload_len)? == get_u32(header, 0)).then(|| Frame {
        offset: at,
        len: (FRAME_HEADER + payload_len).next_multiple_of(FRAME_ALIGN),
        payload_len,
        lsn: get_u64(header, 8),
        generation: get_u32(header, 16),
        kind,
    })
}

/// Every valid frame at an offset of `residue` modulo 8, in file order (after a frame, the
/// search goes on behind it).
pub fn index_frames(bytes: &[u8], residue: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut at = residue % FRAME_ALIGN;
    while at + FRAME_HEADER <= bytes.len() {
        match frame_at(bytes, at) {
            Some(frame) => {
                at = frame.end();
                frames.push(frame);
            }
            None => at += FRAME_ALIGN,
        }
    }
    frames
}

/// Recomputes the checksum of the frame at `at` over its header and the payload its header
/// claims (as far as the file holds it).
pub fn seal_frame(bytes: &mut [u8], at: usize) {
    if at + FRAME_HEADER > bytes.len() {
        return;
    }
    let claimed = get_u32(bytes, at + 4) as usize;
    let available = bytes.len() - at - FRAME_HEADER;
    let crc = crc_of(bytes, at, claimed.min(available)).expect("in bounds");
    bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The bytes the log reader sees of a file: whole sectors, a partial last sector as zeros.
pub fn reader_view(file: &[u8]) -> Cow<'_, [u8]> {
    let readable = file.len() - file.len() % SECTOR;
    if readable == file.len() {
        Cow::Borrowed(file)
    } else {
        let mut bytes = file[..readable].to_vec();
        bytes.resize(file.len().next_multiple_of(SECTOR), 0);
        Cow::Owned(bytes)
    }
}

/// A field of a frame, at a position relative to the frame's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Int {
        at: usize,
        width: usize,
        what: &'static str,
    },
    Bytes {
        at: usize,
        len: usize,
        what: &'static str,
    },
    /// A page image's bytes without its gap (`[page size u32][gap start u32][gap length
    /// u32]` before them; the gap reads as zeros).
    Image {
        at: usize,
        len: usize,
        page_id: u64,
        page_size: usize,
        gap: (usize, usize),
    },
}

/// What a payload holds, decoded as far as it goes (more leniently than the engine: pairs of
/// a record the engine refuses are still listed).
#[derive(Debug, Default)]
pub struct Decoded {
    pub fields: Vec<Field>,
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Page id and the page as the reader rebuilds it.
    pub images: Vec<(u64, Vec<u8>)>,
    pub page_ids: Vec<u64>,
    pub batch: Option<u64>,
    pub patches: Vec<Patch>,
}

/// A logged in-place rewrite of a value: its length and the ranges `(offset, bytes)` replaced.
#[derive(Debug, Clone)]
pub struct Patch {
    pub key: Vec<u8>,
    pub value_len: usize,
    pub ranges: Vec<(usize, Vec<u8>)>,
}

impl Patch {
    /// `value` with the patch applied, if the patch fits it.
    pub fn apply(&self, value: &[u8]) -> Option<Vec<u8>> {
        if value.len() != self.value_len {
            return None;
        }
        let mut patched = value.to_vec();
        for (offset, bytes) in &self.ranges {
            patched
                .get_mut(*offset..offset.checked_add(bytes.len())?)?
                .copy_from_slice(bytes);
        }
        Some(patched)
    }
}

struct Cursor<'a> {
    frame: &'a [u8],
    at: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn int(&mut self, width: usize, what: &'static str, decoded: &mut Decoded) -> Option<u64> {
        if self.at + width > self.end {
            return None;
        }
        let value = get_le(self.frame, self.at, width);
        decoded.fields.push(Field::Int {
            at: self.at,
            width,
            what,
        });
        self.at += width;
        Some(value)
    }

    fn take(&mut self, len: usize) -> Option<usize> {
        if self.end - self.at < len {
            return None;
        }
        self.at += len;
        Some(self.at - len)
    }

    /// A page image: page size, gap start and length, the page without the gap.
    fn image(&mut self, page_id: u64, decoded: &mut Decoded) -> Option<()> {
        let page_size = self.int(4, "image page size", decoded)? as usize;
        let start = self.int(4, "image gap start", decoded)? as usize;
        let len = self.int(4, "image gap length", decoded)? as usize;
        if page_size > MAX_PAGE || start.checked_add(len).is_none_or(|end| end > page_size) {
            return None;
        }
        let at = self.take(page_size - len)?;
        decoded.fields.push(Field::Image {
            at,
            len: page_size - len,
            page_id,
            page_size,
            gap: (start, len),
        });
        let bytes = &self.frame[at..at + page_size - len];
        let mut page = vec![0; page_size];
        page[..start].copy_from_slice(&bytes[..start]);
        page[start + len..].copy_from_slice(&bytes[start..]);
        decoded.images.push((page_id, page));
        Some(())
    }

    /// A LEB128 varint (an integer field as wide as its encoding).
    fn varint(&mut self, what: &'static str, decoded: &mut Decoded) -> Option<u64> {
        let mut value = 0u64;
        for index in 0..10 {
            let byte = *self.frame[..self.end].get(self.at + index)?;
            value |= u64::from(byte & 0x7f).checked_shl(7 * index as u32)?;
            if byte & 0x80 == 0 {
                let width = index + 1;
                // A 9- or 10-byte varint is wider than an integer field can be edited as.
                if width <= 8 {
                    self.int(width, what, decoded)?;
                } else {
                    self.take(width)?;
                }
                return Some(value);
            }
        }
        None
    }

    /// A varint length and that many bytes.
    fn blob(&mut self, what: &'static str, decoded: &mut Decoded) -> Option<&'a [u8]> {
        let len = self.varint(what, decoded)? as usize;
        let at = self.take(len)?;
        decoded.fields.push(Field::Bytes { at, len, what });
        Some(&self.frame[at..at + len])
    }
}

/// Decodes the payload of `frame_bytes` (a whole frame: header and payload).
pub fn decode(kind: u8, frame_bytes: &[u8]) -> Decoded {
    let mut decoded = Decoded::default();
    let mut cursor = Cursor {
        frame: frame_bytes,
        at: FRAME_HEADER,
        end: frame_bytes.len(),
    };
    let d = &mut decoded;
    let _ = (|| -> Option<()> {
        match kind {
            KIND_CHECKPOINT => {
                let count = cursor.int(8, "page count", d)?;
                d.page_ids.push(count);
                let len = cursor.int(8, "free list length", d)?;
                for _ in 0..len.min(1 << 20) {
                    let id = cursor.int(8, "free page id", d)?;
                    d.page_ids.push(id);
                }
                // Key counts (absent in logs from before them): root page ids and counts.
                if cursor.at < cursor.end {
                    let trees = cursor.int(8, "key count length", d)?;
                    for _ in 0..trees.min(1 << 20) {
                        let root = cursor.int(8, "key count root", d)?;
                        d.page_ids.push(root);
                        cursor.int(8, "key count", d)?;
                    }
                }
            }
            KIND_STRUCTURE | KIND_NEW_TREE => {
                let count = cursor.int(4, "image count", d)?;
                for _ in 0..count {
                    let page_id = cursor.int(8, "image page id", d)?;
                    d.page_ids.push(page_id);
                    cursor.image(page_id, d)?;
                }
                let count = cursor.int(4, "freed count", d)?;
                for _ in 0..count.min(1 << 20) {
                    let id = cursor.int(8, "freed page id", d)?;
                    d.page_ids.push(id);
                }
            }
            KIND_PUT | KIND_REMOVE | KIND_PATCH => leaf(&mut cursor, kind, true, d)?,
            KIND_GROUP => {
                d.batch = Some(cursor.varint("group batch", d)?);
                while cursor.at < cursor.end {
                    let kind = cursor.int(1, "group entry kind", d)? as u8;
                    let len = cursor.int(4, "group entry length", d)? as usize;
                    let end = cursor.at.saturating_add(len).min(cursor.end);
                    let mut entry = Cursor {
                        frame: cursor.frame,
                        at: cursor.at,
                        end,
                    };
                    if matches!(kind, KIND_PUT | KIND_REMOVE | KIND_PATCH) {
                        // An entry that does not decode may still hold pairs before its
                        // damage; the next entry starts where its length says.
                        let _ = leaf(&mut entry, kind, true, d);
                    }
                    cursor.at = end;
                }
            }
            KIND_PACKED_GROUP => {
                cursor.int(1, "group flags", d)?;
                d.batch = Some(cursor.varint("group batch", d)?);
                // Entries delimit themselves: one that does not decode ends the group.
                while cursor.at < cursor.end {
                    let kind = cursor.int(1, "group entry kind", d)? as u8;
                    if !matches!(kind, KIND_PUT | KIND_REMOVE | KIND_PATCH) {
                        break;
                    }
                    leaf(&mut cursor, kind, false, d)?;
                }
            }
            KIND_SPLIT => {
                for what in ["split page id", "split left page id", "split parent id"] {
                    let page_id = cursor.varint(what, d)?;
                    d.page_ids.push(page_id);
                }
                cursor.varint("split left count", d)?;
                cursor.varint("split right start", d)?;
                cursor.blob("split separator", d)?;
            }
            KIND_COMMIT => {
                d.batch = Some(cursor.int(8, "batch", d)?);
            }
            KIND_SYNC_MARK => {
                cursor.int(8, "durable", d)?;
            }
            _ => {}
        }
        Some(())
    })();
    decoded
}

/// Decodes a leaf record's payload of `kind` from `cursor` (a frame of its own or a group's
/// entry); `with_batch`: the payload names its batch (all but a packed group's).
fn leaf(cursor: &mut Cursor<'_>, kind: u8, with_batch: bool, d: &mut Decoded) -> Option<()> {
    let flags = cursor.int(1, "leaf flags", d)?;
    let page_id = cursor.varint("page id", d)?;
    d.page_ids.push(page_id);
    cursor.varint("tree", d)?;
    if with_batch {
        d.batch = Some(cursor.varint("batch", d)?);
    }
    let key = cursor.blob("key", d)?.to_vec();
    match kind {
        KIND_PUT => {
            let value = cursor.blob("value", d)?;
            d.pairs.push((key.clone(), value.to_vec()));
        }
        KIND_PATCH => {
            let value_len = cursor.varint("patched value length", d)?;
            let count = cursor.varint("patch range count", d)?;
            let mut ranges = Vec::new();
            let mut old_ranges = Vec::new();
            let mut end = 0u64;
            for _ in 0..count.min(1 << 10) {
                let offset = end.checked_add(cursor.varint("patch range gap", d)?)?;
                let bytes = cursor.blob("patch range", d)?;
                end = offset.checked_add(bytes.len() as u64)?;
                ranges.push((offset as usize, bytes.to_vec()));
                if (flags >> 1) & 3 == 3 {
                    let at = cursor.take(bytes.len())?;
                    let old = &cursor.frame[at..at + bytes.len()];
                    old_ranges.push((offset as usize, old.to_vec()));
                }
            }
            let value_len: usize = value_len.try_into().ok()?;
            // A batch's patch may be rolled back: its old bytes are values too.
            for ranges in [ranges, old_ranges] {
                d.patches.push(Patch {
                    key: key.clone(),
                    value_len,
                    ranges,
                });
            }
        }
        _ => {}
    }
    if (flags >> 1) & 3 == 2 {
        let before = cursor.blob("before value", d)?;
        d.pairs.push((key, before.to_vec()));
    }
    if flags & 1 == 1 {
        cursor.image(page_id, d)?;
    }
    Some(())
}

/// The frame's bytes (header and payload) within `bytes`.
pub fn frame_bytes<'a>(bytes: &'a [u8], frame: &Frame) -> &'a [u8] {
    &bytes[frame.offset..frame.offset + FRAME_HEADER + frame.payload_len]
}
