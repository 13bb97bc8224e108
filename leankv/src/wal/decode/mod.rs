//! Decoding frames read back from the log (their format is described in `record`).
//!
//! Invariant: decoding never trusts a length it has not checked against the bytes it holds, and
//! never panics on any input.

use super::record::*;
use std::ops::Bound;

/// What recovery's first pass reads of a frame: enough to find where the log ends and which
/// batches committed, without decoding whole records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outline {
    /// A checkpoint record (decoded whole: the log starts, or goes on, with one).
    Checkpoint,
    /// A leaf change of the batch (0: a single operation).
    Change {
        batch: u64,
    },
    /// Leaf changes of the batch and its commit (a committing group).
    CommittedChange {
        batch: u64,
    },
    /// The batch (or range removal) committed.
    Commit {
        batch: u64,
    },
    /// A sync mark: a write of the log's writer ends here (see `reader`).
    SyncMark,
    Other,
}

/// The records of one frame: most frames hold one, a group several (see `record`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Records {
    One(Record),
    Group(Vec<Record>),
}

impl Records {
    /// Hands each record to `visit`, in order.
    pub(crate) fn try_for_each<E>(
        self,
        mut visit: impl FnMut(Record) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Records::One(record) => visit(record),
            Records::Group(records) => records.into_iter().try_for_each(visit),
        }
    }
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
            kind: bytes[KIND_OFFSET],
        }
    }

    /// Whether undecoded header bytes are a sync mark's (checked before decoding them).
    pub(crate) fn is_sync_mark_header(bytes: &[u8; FRAME_HEADER]) -> bool {
        bytes[KIND_OFFSET] == KIND_SYNC_MARK
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
        if !self.checksum_holds(header, payload) {
            return Err("log frame checksum mismatch".into());
        }
        self.decode_payload(payload)
    }

    /// Whether the checksum over header and payload holds.
    pub(crate) fn checksum_holds(&self, header: &[u8; FRAME_HEADER], payload: &[u8]) -> bool {
        frame_checksum(crc32c::crc32c(payload), header) == self.checksum
    }

    /// Reads what recovery's first pass needs of a frame whose checksum holds (see
    /// [`Outline`]). A record whose outline reads but whose rest does not is found when the
    /// whole record is decoded.
    pub(crate) fn decode_outline(&self, payload: &[u8]) -> Result<Outline, String> {
        let mut reader = Reader { bytes: payload };
        Ok(match self.kind {
            KIND_CHECKPOINT => {
                self.decode_payload(payload)?;
                Outline::Checkpoint
            }
            KIND_PUT | KIND_REMOVE | KIND_PATCH => {
                // `[flags][page id][tree][batch]...` (see `record`).
                reader.u8()?;
                reader.varint()?;
                reader.varint()?;
                Outline::Change {
                    batch: reader.varint()?,
                }
            }
            KIND_GROUP => Outline::Change {
                batch: reader.varint()?,
            },
            KIND_PACKED_GROUP => {
                let flags = reader.u8()?;
                let batch = reader.varint()?;
                if flags & GROUP_COMMITS != 0 {
                    Outline::CommittedChange { batch }
                } else {
                    Outline::Change { batch }
                }
            }
            KIND_COMMIT => Outline::Commit {
                batch: reader.u64()?,
            },
            KIND_SYNC_MARK => Outline::SyncMark,
            KIND_PADDING => Outline::Other,
            KIND_STRUCTURE | KIND_NEW_TREE | KIND_RANGE_STEP | KIND_SPLIT | KIND_RANGE_REMOVAL => {
                Outline::Other
            }
            other => return Err(format!("unknown log record kind {other}")),
        })
    }

    /// Decodes the records of a frame whose checksum holds.
    pub(crate) fn decode_records(&self, payload: &[u8]) -> Result<Records, String> {
        if !matches!(self.kind, KIND_GROUP | KIND_PACKED_GROUP) {
            return self.decode_payload(payload).map(Records::One);
        }
        if payload.len() > MAX_GROUP_PAYLOAD {
            return Err("a group larger than a slot publishes".into());
        }
        if self.kind == KIND_GROUP {
            return decode_unpacked_group(payload);
        }
        let mut reader = Reader { bytes: payload };
        let flags = reader.u8()?;
        if flags & !GROUP_COMMITS != 0 {
            return Err(format!("unknown group flags {flags:#x}"));
        }
        let batch = group_batch(&mut reader)?;
        let mut records = Vec::new();
        while !reader.bytes.is_empty() {
            let kind = group_entry_kind(&mut reader)?;
            records.push(reader.leaf(kind, Some(batch))?);
        }
        if records.is_empty() {
            return Err("an empty group".into());
        }
        if flags & GROUP_COMMITS != 0 {
            records.push(Record::Commit { batch });
        }
        Ok(Records::Group(records))
    }

    /// Decodes the payload of a frame whose checksum holds.
    pub(crate) fn decode_payload(&self, payload: &[u8]) -> Result<Record, String> {
        let mut reader = Reader { bytes: payload };
        let record = match self.kind {
            KIND_CHECKPOINT => {
                let page_count = reader.u64()?;
                let len = reader.u64()?;
                if len > (reader.bytes.len() / 8) as u64 {
                    return Err("checkpoint free list longer than its record".into());
                }
                let free = (0..len).map(|_| reader.u64()).collect::<Result<_, _>>()?;
                // A log written before key counts ends here.
                let key_counts = if reader.bytes.is_empty() {
                    None
                } else {
                    let len = reader.u64()?;
                    if len > (reader.bytes.len() / 16) as u64 {
                        return Err("checkpoint key counts longer than its record".into());
                    }
                    let count = (0..len).map(|_| Ok((reader.u64()?, reader.u64()?)));
                    Some(count.collect::<Result<_, String>>()?)
                };
                Record::Checkpoint {
                    page_count,
                    free,
                    key_counts,
                }
            }
            KIND_RANGE_REMOVAL => Record::RangeRemoval(RangeRemoval {
                removal: reader.u64()?,
                tree: reader.u64()?,
                start: reader.key_bound()?,
                end: reader.key_bound()?,
                drop: match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("unknown range removal flags {other:#x}")),
                },
            }),
            KIND_STRUCTURE | KIND_NEW_TREE | KIND_RANGE_STEP => {
                let step = if self.kind == KIND_RANGE_STEP {
                    let (removal, tree, keys) = (reader.u64()?, reader.u64()?, reader.u64()?);
                    let from = reader.key_bound()?;
                    let through = match reader.key_bound()? {
                        Bound::Unbounded => None,
                        Bound::Included(key) => Some(key),
                        Bound::Excluded(_) => {
                            return Err("a range step through an excluded key".into())
                        }
                    };
                    Some(RangeStep {
                        removal,
                        tree,
                        keys,
                        from,
                        through,
                    })
                } else {
                    None
                };
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
                    step,
                }
            }
            KIND_PUT | KIND_REMOVE | KIND_PATCH => reader.leaf(self.kind, None)?,
            KIND_SPLIT => {
                let (page_id, left, parent) =
                    (reader.varint()?, reader.varint()?, reader.varint()?);
                let left_count = reader.at_most(MAX_PAGE)?;
                let right_start = reader.at_most(MAX_PAGE)?;
                Record::Split(Split {
                    page_id,
                    left,
                    parent,
                    left_count,
                    right_start,
                    separator: reader.bytes_with_len()?,
                })
            }
            KIND_COMMIT => Record::Commit {
                batch: reader.u64()?,
            },
            KIND_SYNC_MARK => Record::SyncMark {
                durable: reader.u64()?,
            },
            KIND_PADDING => {
                reader.bytes = &[];
                Record::Padding
            }
            other => return Err(format!("unknown log record kind {other}")),
        };
        if !reader.bytes.is_empty() {
            return Err("log record longer than its contents".into());
        }
        Ok(record)
    }
}

/// Decodes a group as written before packed groups (see `record`).
fn decode_unpacked_group(payload: &[u8]) -> Result<Records, String> {
    let mut reader = Reader { bytes: payload };
    let batch = group_batch(&mut reader)?;
    let mut records = Vec::new();
    while !reader.bytes.is_empty() {
        let kind = group_entry_kind(&mut reader)?;
        let len = reader.u32()? as usize;
        let mut entry = Reader {
            bytes: reader.take(len)?,
        };
        let record = entry.leaf(kind, None)?;
        if !entry.bytes.is_empty() {
            return Err("log record longer than its contents".into());
        }
        let of_batch = matches!(
            &record,
            Record::Put { batch: of, .. }
            | Record::Remove { batch: of, .. }
            | Record::Patch { batch: of, .. } if *of == batch
        );
        if !of_batch {
            return Err("a group holds a record of another batch".into());
        }
        records.push(record);
    }
    if records.is_empty() {
        return Err("an empty group".into());
    }
    Ok(Records::Group(records))
}

/// A group's batch (never 0: single operations are not staged).
fn group_batch(reader: &mut Reader<'_>) -> Result<u64, String> {
    match reader.varint()? {
        0 => Err("a group of single operations".into()),
        batch => Ok(batch),
    }
}

/// The kind of a group's next record: a leaf change.
fn group_entry_kind(reader: &mut Reader<'_>) -> Result<u8, String> {
    match reader.u8()? {
        kind @ (KIND_PUT | KIND_REMOVE | KIND_PATCH) => Ok(kind),
        kind => Err(format!("a group holds a record of kind {kind}")),
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

    /// A LEB128 varint of at most 10 bytes whose value fits 64 bits.
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for index in 0..10 {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if index == 9 && bits > 1 {
                return Err("log varint beyond 64 bits".into());
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("log varint longer than 10 bytes".into())
    }

    /// A varint of at most `max`.
    fn at_most(&mut self, max: usize) -> Result<usize, String> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|&value| value <= max)
            .ok_or_else(|| format!("log record field {value} above its limit {max}"))
    }

    /// A varint that counts bytes of this record (so it is at most the bytes left).
    fn length(&mut self) -> Result<usize, String> {
        let len = self.varint()?;
        usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.bytes.len())
            .ok_or_else(|| "log record shorter than its contents".into())
    }

    fn bytes_with_len(&mut self) -> Result<Vec<u8>, String> {
        let len = self.length()?;
        Ok(self.take(len)?.to_vec())
    }

    /// A key bound as `record::key_bound` wrote it.
    fn key_bound(&mut self) -> Result<Bound<Vec<u8>>, String> {
        Ok(match self.u8()? {
            BOUND_UNBOUNDED => Bound::Unbounded,
            BOUND_INCLUDED => Bound::Included(self.bytes_with_len()?),
            BOUND_EXCLUDED => Bound::Excluded(self.bytes_with_len()?),
            other => return Err(format!("unknown key bound tag {other}")),
        })
    }

    /// A leaf record's payload (see the format in `record`) of `kind`; `batch`: the batch of
    /// the packed group it is in (its payload names none).
    fn leaf(&mut self, kind: u8, batch: Option<u64>) -> Result<Record, String> {
        let flags = self.u8()?;
        let known = FLAG_IMAGE
            | 3 << BEFORE_SHIFT
            | match kind {
                KIND_PUT => FLAG_ADDED | FLAG_BLOB | FLAG_BEFORE_BLOB,
                KIND_REMOVE => FLAG_BEFORE_BLOB,
                _ => 0,
            };
        if flags & !known != 0 {
            return Err(format!("unknown leaf record flags {flags:#x}"));
        }
        let (page_id, tree) = (self.varint()?, self.varint()?);
        let batch = match batch {
            Some(batch) => batch,
            None => self.varint()?,
        };
        let key = self.bytes_with_len()?;
        let before_tag = (flags >> BEFORE_SHIFT) & 3;
        let mut value = None;
        let mut patch = None;
        match kind {
            KIND_PUT => value = Some(self.bytes_with_len()?),
            KIND_PATCH => {
                let value_len = self.varint()?;
                let count = self.length()?;
                let mut ranges = Vec::with_capacity(count);
                let mut old_ranges = Vec::new();
                let mut end = 0u64;
                for _ in 0..count {
                    let offset = end
                        .checked_add(self.varint()?)
                        .ok_or("patch range beyond its value")?;
                    let bytes = self.bytes_with_len()?;
                    end = offset
                        .checked_add(bytes.len() as u64)
                        .ok_or("patch range beyond its value")?;
                    if end > value_len {
                        return Err("patch range beyond its value".into());
                    }
                    if before_tag == BEFORE_RANGES {
                        old_ranges.push((offset as usize, self.take(bytes.len())?.to_vec()));
                    }
                    ranges.push((offset as usize, bytes));
                }
                patch = Some((value_len as usize, ranges, old_ranges));
            }
            _ => {}
        }
        let before = match (before_tag, &mut patch) {
            (BEFORE_UNRECORDED, _) => Before::Unrecorded,
            (BEFORE_ABSENT, None) => Before::Absent,
            (BEFORE_VALUE, None) if flags & FLAG_BEFORE_BLOB != 0 => {
                Before::Blob(self.bytes_with_len()?)
            }
            (BEFORE_VALUE, None) => Before::Value(self.bytes_with_len()?),
            _ if flags & FLAG_BEFORE_BLOB != 0 => {
                return Err("a large value before without the value".into())
            }
            (BEFORE_RANGES, Some((_, _, old_ranges))) => Before::Ranges(std::mem::take(old_ranges)),
            (other, _) => return Err(format!("before-image tag {other} on a {kind} record")),
        };
        let image = (flags & FLAG_IMAGE != 0)
            .then(|| self.page_image())
            .transpose()?;
        Ok(match (value, patch) {
            (Some(value), _) => Record::Put {
                page_id,
                tree,
                batch,
                key,
                value,
                blob: flags & FLAG_BLOB != 0,
                added: flags & FLAG_ADDED != 0,
                before,
                image,
            },
            (None, Some((value_len, ranges, _))) => {
                if (batch == 0) != (before == Before::Unrecorded) {
                    return Err("a patch whose old bytes do not match its batch".into());
                }
                Record::Patch {
                    page_id,
                    tree,
                    batch,
                    key,
                    value_len,
                    ranges,
                    before,
                    image,
                }
            }
            (None, None) => Record::Remove {
                page_id,
                tree,
                batch,
                key,
                before,
                image,
            },
        })
    }
}

#[cfg(test)]
mod tests;
