//! Log records and their frames on disk.
//!
//! A frame is `[crc32c u32][payload length u32][lsn u64][generation u32][kind u8][0; 3]`
//! followed by the payload and zero padding to a multiple of 8 bytes. The CRC-32C covers
//! everything after itself up to the end of the payload. A frame's LSN is its position in the
//! log stream (bytes since the database's first record), so a frame read at the wrong place,
//! left over from an earlier pass over the file, fails the position check; the generation
//! (counted up at every open) fences frames a crashed process left beyond the point where
//! recovery cut its log.
//!
//! Records (all integers little endian):
//! * `Checkpoint`: the page count and the free page ids at the checkpoint's start;
//! * `Structure`: a structural change (split, merge, new root, new tree) as one record: the
//!   full images of every page it changed (swips as page ids) and the page ids it freed;
//! * `Put` / `Remove`: one key of one leaf, with the tree (its root page id), the batch (0:
//!   a single operation, committed by itself), for batches the value before, and the page's
//!   full image after the change when it is the page's first change since a checkpoint began;
//! * `Commit`: a batch is complete;
//! * `SyncMark`: written with every write of the log, how far the log was durable before it,
//!   so that recovery tells a damaged synced record (an error) from a torn unsynced tail.
//!
//! Invariant: decoding never trusts a length it has not checked against the bytes it holds.

/// Bytes of a frame header.
pub(crate) const FRAME_HEADER: usize = 24;
/// Frames start at multiples of this.
pub(crate) const FRAME_ALIGN: usize = 8;
/// Largest page an image may claim.
const MAX_PAGE: usize = 1 << 16;
/// Largest payload a frame may claim (a checkpoint of a huge free list stays far below).
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

const KIND_CHECKPOINT: u8 = 1;
const KIND_STRUCTURE: u8 = 2;
const KIND_PUT: u8 = 3;
const KIND_REMOVE: u8 = 4;
const KIND_COMMIT: u8 = 6;
const KIND_NEW_TREE: u8 = 7;
pub(crate) const KIND_SYNC_MARK: u8 = 8;

/// What a leaf operation changed, for undoing it if its batch never commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Before {
    /// Not recorded: a single operation, which is its own commit.
    Unrecorded,
    /// The key was absent.
    Absent,
    /// The key held this value.
    Value(Vec<u8>),
}

/// One decoded log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    Checkpoint {
        page_count: u64,
        free: Vec<u64>,
    },
    Structure {
        images: Vec<(u64, Vec<u8>)>,
        freed: Vec<u64>,
        /// The record creates a tree whose root is its one image: if the catalog entry that
        /// follows did not survive a crash, recovery frees the root again.
        new_tree: bool,
    },
    Put {
        page_id: u64,
        tree: u64,
        batch: u64,
        key: Vec<u8>,
        value: Vec<u8>,
        before: Before,
        image: Option<Vec<u8>>,
    },
    Remove {
        page_id: u64,
        tree: u64,
        batch: u64,
        key: Vec<u8>,
        before: Before,
        image: Option<Vec<u8>>,
    },
    Commit {
        batch: u64,
    },
    SyncMark {
        durable: u64,
    },
}

/// A leaf operation as the tree hands it to the log (borrowed, encoded in place).
#[derive(Debug, Clone, Copy)]
pub(crate) enum LeafOp<'a> {
    Put { key: &'a [u8], value: &'a [u8] },
    Remove { key: &'a [u8] },
}

/// Writes a page into the slice it is given and returns its free gap (start, length), which
/// the log leaves out (see [`page_image`]).
pub(crate) type FillImage<'a> = dyn FnMut(&mut [u8]) -> (usize, usize) + 'a;

/// One leaf operation as logged: the page it changed, the tree (its root page id), the batch
/// (0: on its own), the operation and, for batches, what it replaced.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafChange<'a> {
    pub(crate) page_id: u64,
    pub(crate) tree: u64,
    pub(crate) batch: u64,
    pub(crate) op: LeafOp<'a>,
    pub(crate) before: BeforeRef<'a>,
}

/// The before-image of a leaf operation, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BeforeRef<'a> {
    Unrecorded,
    Absent,
    Value(&'a [u8]),
}

/// Appends frames to a byte buffer whose first byte is at log position `base`.
pub(crate) struct FrameWriter<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) base: u64,
    pub(crate) generation: u32,
}

impl FrameWriter<'_> {
    /// Starts a frame of `kind`; `body` writes the payload. Returns the frame's end position.
    fn frame(&mut self, kind: u8, body: impl FnOnce(&mut Vec<u8>)) -> u64 {
        let start = self.out.len();
        let lsn = self.base + start as u64;
        self.out.extend_from_slice(&[0; FRAME_HEADER]);
        body(self.out);
        let payload = self.out.len() - start - FRAME_HEADER;
        debug_assert!(payload <= MAX_PAYLOAD);
        let header = &mut self.out[start..start + FRAME_HEADER];
        header[4..8].copy_from_slice(&(payload as u32).to_le_bytes());
        header[8..16].copy_from_slice(&lsn.to_le_bytes());
        header[16..20].copy_from_slice(&self.generation.to_le_bytes());
        header[20] = kind;
        let checksum = crc32c::crc32c(&self.out[start + 4..]);
        self.out[start..start + 4].copy_from_slice(&checksum.to_le_bytes());
        let padded = self.out.len().next_multiple_of(FRAME_ALIGN);
        self.out.resize(padded, 0);
        self.base + padded as u64
    }

    pub(crate) fn checkpoint(&mut self, page_count: u64, free: &[u64]) -> u64 {
        self.frame(KIND_CHECKPOINT, |out| {
            out.extend_from_slice(&page_count.to_le_bytes());
            out.extend_from_slice(&(free.len() as u64).to_le_bytes());
            for id in free {
                out.extend_from_slice(&id.to_le_bytes());
            }
        })
    }

    /// A structural change: the images of `pages` (filled by `fill(handle, bytes)`) and the
    /// freed page ids; `new_tree` marks the creation of a tree (one image, its root).
    pub(crate) fn structure<T: Copy>(
        &mut self,
        pages: &[(u64, T)],
        freed: &[u64],
        new_tree: bool,
        page_size: usize,
        fill: impl Fn(T, &mut [u8]) -> (usize, usize),
    ) -> u64 {
        let kind = if new_tree {
            KIND_NEW_TREE
        } else {
            KIND_STRUCTURE
        };
        self.frame(kind, |out| {
            out.extend_from_slice(&(pages.len() as u32).to_le_bytes());
            for &(page_id, handle) in pages {
                out.extend_from_slice(&page_id.to_le_bytes());
                page_image(out, page_size, |image| fill(handle, image));
            }
            out.extend_from_slice(&(freed.len() as u32).to_le_bytes());
            for id in freed {
                out.extend_from_slice(&id.to_le_bytes());
            }
        })
    }

    /// A leaf operation, with the page's full image after it when `image` is given (its page
    /// size and the function that fills it).
    pub(crate) fn leaf(
        &mut self,
        change: LeafChange<'_>,
        image: Option<(usize, &mut FillImage<'_>)>,
    ) -> u64 {
        let LeafChange {
            page_id,
            tree,
            batch,
            op,
            before,
        } = change;
        let kind = match op {
            LeafOp::Put { .. } => KIND_PUT,
            LeafOp::Remove { .. } => KIND_REMOVE,
        };
        self.frame(kind, |out| {
            out.extend_from_slice(&page_id.to_le_bytes());
            out.extend_from_slice(&tree.to_le_bytes());
            out.extend_from_slice(&batch.to_le_bytes());
            let bytes = |out: &mut Vec<u8>, bytes: &[u8]| {
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(bytes);
            };
            match op {
                LeafOp::Put { key, value } => {
                    bytes(out, key);
                    bytes(out, value);
                }
                LeafOp::Remove { key } => bytes(out, key),
            }
            match before {
                BeforeRef::Unrecorded => out.push(0),
                BeforeRef::Absent => out.push(1),
                BeforeRef::Value(value) => {
                    out.push(2);
                    bytes(out, value);
                }
            }
            match image {
                None => out.push(0),
                Some((page_size, fill)) => {
                    out.push(1);
                    page_image(out, page_size, fill);
                }
            }
        })
    }

    pub(crate) fn sync_mark(&mut self, durable: u64) -> u64 {
        self.frame(KIND_SYNC_MARK, |out| {
            out.extend_from_slice(&durable.to_le_bytes())
        })
    }

    pub(crate) fn commit(&mut self, batch: u64) -> u64 {
        self.frame(KIND_COMMIT, |out| {
            out.extend_from_slice(&batch.to_le_bytes())
        })
    }
}

/// Appends a page image: `[page size u32][gap start u32][gap length u32]` and the page's
/// bytes without the gap (its free space, as `fill` reports after writing the whole page).
fn page_image(out: &mut Vec<u8>, page_size: usize, fill: impl FnOnce(&mut [u8]) -> (usize, usize)) {
    let header = out.len();
    out.extend_from_slice(&[0; 12]);
    let at = out.len();
    out.resize(at + page_size, 0);
    let (start, len) = fill(&mut out[at..]);
    let (start, len) = if start.checked_add(len).is_some_and(|end| end <= page_size) {
        (start, len)
    } else {
        (0, 0)
    };
    out.drain(at + start..at + start + len);
    out[header..header + 4].copy_from_slice(&(page_size as u32).to_le_bytes());
    out[header + 4..header + 8].copy_from_slice(&(start as u32).to_le_bytes());
    out[header + 8..header + 12].copy_from_slice(&(len as u32).to_le_bytes());
}

/// A frame's header, decoded (not yet checked against its payload).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameHeader {
    checksum: u32,
    pub(crate) payload_len: usize,
    pub(crate) lsn: u64,
    pub(crate) generation: u32,
    kind: u8,
}

impl FrameHeader {
    pub(crate) fn decode(bytes: &[u8; FRAME_HEADER]) -> FrameHeader {
        FrameHeader {
            checksum: u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")),
            payload_len: u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize,
            lsn: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
            generation: u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")),
            kind: bytes[20],
        }
    }

    pub(crate) fn is_sync_mark(&self) -> bool {
        self.kind == KIND_SYNC_MARK
    }

    /// Bytes the whole frame occupies, padding included.
    pub(crate) fn frame_len(&self) -> usize {
        (FRAME_HEADER + self.payload_len).next_multiple_of(FRAME_ALIGN)
    }

    /// Checks the checksum over header and payload and decodes the record.
    pub(crate) fn decode_record(
        &self,
        header: &[u8; FRAME_HEADER],
        payload: &[u8],
    ) -> Result<Record, String> {
        let mut hasher = crc32c::crc32c(&header[4..]);
        hasher = crc32c::crc32c_append(hasher, payload);
        if hasher != self.checksum {
            return Err("log frame checksum mismatch".into());
        }
        let mut reader = Reader { bytes: payload };
        let record = match self.kind {
            KIND_CHECKPOINT => {
                let page_count = reader.u64()?;
                let len = reader.u64()?;
                if len > (reader.bytes.len() / 8) as u64 {
                    return Err("checkpoint free list longer than its record".into());
                }
                let free = (0..len).map(|_| reader.u64()).collect::<Result<_, _>>()?;
                Record::Checkpoint { page_count, free }
            }
            KIND_STRUCTURE | KIND_NEW_TREE => {
                let count = reader.u32()?;
                let mut images = Vec::new();
                for _ in 0..count {
                    let page_id = reader.u64()?;
                    images.push((page_id, reader.page_image()?));
                }
                let count = reader.u32()? as usize;
                if count > reader.bytes.len() / 8 {
                    return Err("structure record frees more pages than it holds".into());
                }
                let freed: Vec<u64> = (0..count).map(|_| reader.u64()).collect::<Result<_, _>>()?;
                let new_tree = self.kind == KIND_NEW_TREE;
                if new_tree && (images.len() != 1 || !freed.is_empty()) {
                    return Err("a tree creation record that is not one root image".into());
                }
                Record::Structure {
                    images,
                    freed,
                    new_tree,
                }
            }
            KIND_PUT | KIND_REMOVE => {
                let (page_id, tree, batch) = (reader.u64()?, reader.u64()?, reader.u64()?);
                let key = reader.bytes_with_len()?;
                let value = (self.kind == KIND_PUT)
                    .then(|| reader.bytes_with_len())
                    .transpose()?;
                let before = match reader.u8()? {
                    0 => Before::Unrecorded,
                    1 => Before::Absent,
                    2 => Before::Value(reader.bytes_with_len()?),
                    other => return Err(format!("unknown before-image tag {other}")),
                };
                let image = match reader.u8()? {
                    0 => None,
                    1 => Some(reader.page_image()?),
                    other => return Err(format!("unknown image tag {other}")),
                };
                match value {
                    Some(value) => Record::Put {
                        page_id,
                        tree,
                        batch,
                        key,
                        value,
                        before,
                        image,
                    },
                    None => Record::Remove {
                        page_id,
                        tree,
                        batch,
                        key,
                        before,
                        image,
                    },
                }
            }
            KIND_COMMIT => Record::Commit {
                batch: reader.u64()?,
            },
            KIND_SYNC_MARK => Record::SyncMark {
                durable: reader.u64()?,
            },
            other => return Err(format!("unknown log record kind {other}")),
        };
        if !reader.bytes.is_empty() {
            return Err("log record longer than its contents".into());
        }
        Ok(record)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, len: usize) -> Result<&[u8], String> {
        if self.bytes.len() < len {
            return Err("log record shorter than its contents".into());
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A page image as `page_image` wrote it, with its gap zeroed again.
    fn page_image(&mut self) -> Result<Vec<u8>, String> {
        let (page_size, start, len) = (
            self.u32()? as usize,
            self.u32()? as usize,
            self.u32()? as usize,
        );
        if page_size > MAX_PAGE || start.checked_add(len).is_none_or(|end| end > page_size) {
            return Err("page image with an impossible size or gap".into());
        }
        let bytes = self.take(page_size - len)?;
        let mut page = vec![0; page_size];
        page[..start].copy_from_slice(&bytes[..start]);
        page[start + len..].copy_from_slice(&bytes[start..]);
        Ok(page)
    }

    fn bytes_with_len(&mut self) -> Result<Vec<u8>, String> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        Ok(self.take(len)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8], base: u64) -> Vec<(u64, Record)> {
        let mut at = 0;
        let mut records = Vec::new();
        while at + FRAME_HEADER <= bytes.len() {
            let header_bytes: [u8; FRAME_HEADER] = bytes[at..at + FRAME_HEADER].try_into().unwrap();
            let header = FrameHeader::decode(&header_bytes);
            assert_eq!(header.lsn, base + at as u64);
            let payload = &bytes[at + FRAME_HEADER..at + FRAME_HEADER + header.payload_len];
            records.push((
                header.lsn,
                header.decode_record(&header_bytes, payload).unwrap(),
            ));
            at += header.frame_len();
        }
        records
    }

    fn gapped(byte: u8) -> Vec<u8> {
        let mut page = vec![byte; 64];
        page[10..20].fill(0);
        page
    }

    #[test]
    fn every_record_roundtrips_and_a_flipped_bit_is_caught() {
        let mut out = Vec::new();
        let mut writer = FrameWriter {
            out: &mut out,
            base: 4096,
            generation: 3,
        };
        writer.checkpoint(10, &[3, 5]);
        writer.structure(&[(7, 0xabu8), (8, 0xcd)], &[5], false, 64, |byte, page| {
            page.fill(byte);
            page[10..20].fill(0);
            (10, 10) // the gap is left out and comes back zeroed
        });
        let change = |batch, op, before| LeafChange {
            page_id: 7,
            tree: 1,
            batch,
            op,
            before,
        };
        let put = |key, value| LeafOp::Put { key, value };
        writer.leaf(change(0, put(b"k", b"v"), BeforeRef::Unrecorded), None);
        let remove = LeafOp::Remove { key: b"k" };
        writer.leaf(change(9, remove, BeforeRef::Value(b"old")), None);
        let mut fill = |page: &mut [u8]| {
            page.fill(1);
            (0, 0)
        };
        writer.leaf(
            change(9, put(b"n", b""), BeforeRef::Absent),
            Some((64, &mut fill)),
        );
        let end = writer.commit(9);
        assert_eq!(end, 4096 + out.len() as u64);
        let records = decode_all(&out, 4096);
        assert_eq!(records.len(), 6);
        assert_eq!(
            records[0].1,
            Record::Checkpoint {
                page_count: 10,
                free: vec![3, 5]
            }
        );
        assert_eq!(
            records[1].1,
            Record::Structure {
                images: vec![(7, gapped(0xab)), (8, gapped(0xcd))],
                freed: vec![5],
                new_tree: false,
            }
        );
        assert_eq!(
            records[3].1,
            Record::Remove {
                page_id: 7,
                tree: 1,
                batch: 9,
                key: b"k".to_vec(),
                before: Before::Value(b"old".to_vec()),
                image: None,
            }
        );
        assert!(
            matches!(&records[4].1, Record::Put { image: Some(image), before: Before::Absent, .. } if image == &vec![1; 64])
        );
        assert_eq!(records[5].1, Record::Commit { batch: 9 });
        for position in [0, 5, 9, 17, 20, 30] {
            let mut damaged = out.clone();
            damaged[position] ^= 4;
            let header_bytes: [u8; FRAME_HEADER] = damaged[..FRAME_HEADER].try_into().unwrap();
            let header = FrameHeader::decode(&header_bytes);
            let payload_end = (FRAME_HEADER + header.payload_len).min(damaged.len());
            assert!(
                header.lsn != 4096
                    || header
                        .decode_record(&header_bytes, &damaged[FRAME_HEADER..payload_end])
                        .is_err(),
                "flip at {position} missed"
            );
        }
    }
}
