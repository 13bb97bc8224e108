//! Decoding frames read back from the log (their format is described in `record`).
//!
//! Invariant: decoding never trusts a length it has not checked against the bytes it holds, and
//! never panics on any input.

use super::record::*;
use std::ops::Bound;

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
        if frame_checksum(crc32c::crc32c(payload), header) != self.checksum {
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
            KIND_PUT | KIND_REMOVE | KIND_PATCH => reader.leaf(self.kind)?,
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

    /// A leaf record's payload (see the format in `record`).
    fn leaf(&mut self, kind: u8) -> Result<Record, String> {
        let flags = self.u8()?;
        let known = FLAG_IMAGE | 3 << BEFORE_SHIFT | if kind == KIND_PUT { FLAG_ADDED } else { 0 };
        if flags & !known != 0 {
            return Err(format!("unknown leaf record flags {flags:#x}"));
        }
        let (page_id, tree, batch) = (self.varint()?, self.varint()?, self.varint()?);
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
            (BEFORE_VALUE, None) => Before::Value(self.bytes_with_len()?),
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

    /// Frames placed at LSN 4096 of generation 3.
    fn writer<'a>(out: &'a mut Vec<u8>, scratch: &'a mut Vec<u8>) -> FrameWriter<'a> {
        FrameWriter {
            out,
            base: 4096,
            generation: 3,
            scratch,
            payload_checksum: 0,
            placed: true,
        }
    }

    #[test]
    fn every_record_roundtrips_and_a_flipped_bit_is_caught() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let mut writer = writer(&mut out, &mut scratch);
        writer.checkpoint(10, &[3, 5], &[(1, 4), (300, 0)]);
        writer.structure(
            &[(7, 0xabu8), (8, 0xcd)],
            &[5],
            false,
            None,
            64,
            |byte, page| {
                page.fill(byte);
                page[10..20].fill(0);
                (10, 10) // the gap is left out and comes back zeroed
            },
        );
        let change = |batch, op, before| LeafChange {
            page_id: 7,
            tree: 1,
            batch,
            op,
            before,
        };
        let put = |key, value, added| LeafOp::Put { key, value, added };
        writer.leaf(
            change(0, put(b"k", b"v", false), BeforeRef::Unrecorded),
            None,
        );
        let remove = LeafOp::Remove { key: b"k" };
        writer.leaf(change(9, remove, BeforeRef::Value(b"old")), None);
        let mut fill = |page: &mut [u8]| {
            page.fill(1);
            (0, 0)
        };
        writer.leaf(
            change(9, put(b"n", b"", true), BeforeRef::Absent),
            Some((64, &mut fill)),
        );
        let old = [7u8; 300];
        let mut new = old;
        new[3] = 1;
        new[5] = 2; // joins the range at 3
        new[200..208].fill(9);
        let changed = ChangedRanges::between(&old, &new).expect("a cheap patch");
        let patch = LeafOp::Patch {
            key: b"p",
            value: &new,
            changed: &changed,
        };
        writer.leaf(
            LeafChange {
                page_id: 1 << 40,
                tree: 300,
                ..change(0, patch, BeforeRef::Unrecorded)
            },
            None,
        );
        writer.leaf(change(9, patch, BeforeRef::Value(&old)), None);
        let end = writer.commit(9);
        assert_eq!(end, 4096 + out.len() as u64);
        let records = decode_all(&out, 4096);
        assert_eq!(records.len(), 8);
        assert_eq!(
            records[5].1,
            Record::Patch {
                page_id: 1 << 40,
                tree: 300,
                batch: 0,
                key: b"p".to_vec(),
                value_len: 300,
                ranges: vec![(3, vec![1, 7, 2]), (200, vec![9; 8])],
                before: Before::Unrecorded,
                image: None,
            }
        );
        assert!(
            matches!(&records[6].1, Record::Patch { batch: 9, before: Before::Ranges(old), .. }
            if old == &vec![(3, vec![7; 3]), (200, vec![7; 8])])
        );
        assert_eq!(
            records[0].1,
            Record::Checkpoint {
                page_count: 10,
                free: vec![3, 5],
                key_counts: Some(vec![(1, 4), (300, 0)]),
            }
        );
        assert!(matches!(&records[2].1, Record::Put { added: false, .. }));
        assert_eq!(
            records[1].1,
            Record::Structure {
                images: vec![(7, gapped(0xab)), (8, gapped(0xcd))],
                freed: vec![5],
                new_tree: false,
                step: None,
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
            matches!(&records[4].1, Record::Put { image: Some(image), before: Before::Absent, added: true, .. } if image == &vec![1; 64])
        );
        assert_eq!(records[7].1, Record::Commit { batch: 9 });
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

    #[test]
    fn range_removals_and_their_steps_roundtrip() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let mut writer = writer(&mut out, &mut scratch);
        let removal = RangeRemoval {
            removal: 1 << 33,
            tree: 12,
            start: Bound::Excluded(b"a".to_vec()),
            end: Bound::Unbounded,
            drop: true,
        };
        writer.range_removal(&removal);
        let step = RangeStep {
            removal: 1 << 33,
            tree: 12,
            keys: 700,
            from: Bound::Included(Vec::new()),
            through: Some(b"m".to_vec()),
        };
        writer.structure(
            &[(7, 0xabu8)],
            &[5, 6],
            false,
            Some(&step),
            64,
            |byte, page| {
                page.fill(byte);
                page[10..20].fill(0);
                (10, 10)
            },
        );
        let last = RangeStep {
            through: None,
            from: Bound::Excluded(b"m".to_vec()),
            ..step.clone()
        };
        writer.structure::<u8>(&[], &[], false, Some(&last), 64, |_, _| (0, 0));
        let records = decode_all(&out, 4096);
        assert_eq!(records[0].1, Record::RangeRemoval(removal));
        assert_eq!(
            records[1].1,
            Record::Structure {
                images: vec![(7, gapped(0xab))],
                freed: vec![5, 6],
                new_tree: false,
                step: Some(step),
            }
        );
        assert_eq!(
            records[2].1,
            Record::Structure {
                images: Vec::new(),
                freed: Vec::new(),
                new_tree: false,
                step: Some(last),
            }
        );
    }

    #[test]
    fn a_checkpoint_from_before_key_counts_decodes_without_them() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        writer(&mut out, &mut scratch).checkpoint(10, &[3], &[]);
        // The record as logs before key counts held it: without the (empty) counts' length.
        let mut header: [u8; FRAME_HEADER] = out[..FRAME_HEADER].try_into().unwrap();
        let payload_len = u32::from_le_bytes(header[4..8].try_into().unwrap()) - 8;
        let payload = out[FRAME_HEADER..FRAME_HEADER + payload_len as usize].to_vec();
        header[4..8].copy_from_slice(&payload_len.to_le_bytes());
        stamp(&mut header, 4096, 3, crc32c::crc32c(&payload));
        let record = FrameHeader::decode(&header)
            .decode_record(&header, &payload)
            .unwrap();
        let expected = Record::Checkpoint {
            page_count: 10,
            free: vec![3],
            key_counts: None,
        };
        assert_eq!(record, expected);
    }
}

#[cfg(test)]
mod leaf_encoding_tests {
    use super::*;

    #[test]
    fn changed_ranges_are_taken_only_when_cheaper_than_the_value() {
        let old = vec![0u8; 64];
        assert_eq!(
            ChangedRanges::between(&old, &old).unwrap().iter().count(),
            0
        );
        let mut scattered = old.clone();
        for at in (0..64).step_by(6) {
            scattered[at] = 1; // 11 ranges: more than a patch takes
        }
        assert!(ChangedRanges::between(&old, &scattered).is_none());
        assert!(ChangedRanges::between(&old, &[1; 64]).is_none());
        let mut tail = old.clone();
        tail[63] = 5;
        let ranges: Vec<_> = ChangedRanges::between(&old, &tail)
            .unwrap()
            .iter()
            .collect();
        assert_eq!(ranges, vec![(63, 1)]);
    }

    #[test]
    fn varints_beyond_64_bits_or_10_bytes_are_refused() {
        let decode = |bytes: &[u8]| Reader { bytes }.varint();
        assert_eq!(decode(&[0x80, 0x01]), Ok(128));
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(decode(&max), Ok(u64::MAX));
        max[9] = 0x02;
        assert!(decode(&max).is_err());
        assert!(decode(&[0x80; 11]).is_err());
        assert!(decode(&[0x80]).is_err());
    }

    #[test]
    fn patches_out_of_their_value_or_without_their_batchs_old_bytes_are_refused() {
        // Flags (before tag), page 5, tree 1, batch, key "k", value length 4, one range at
        // `gap` of 2 bytes (and, tagged 3, its 2 old bytes).
        let payload = |tag: u8, batch: u8, gap: u8| {
            let mut bytes = vec![tag << 1, 5, 1, batch, 1, b'k', 4, 1, gap, 2, 9, 9];
            if tag == BEFORE_RANGES {
                bytes.extend([1, 1]);
            }
            bytes
        };
        let decode = |bytes: &[u8]| Reader { bytes }.leaf(KIND_PATCH);
        assert!(decode(&payload(0, 0, 2)).is_ok());
        assert!(decode(&payload(BEFORE_RANGES, 7, 2)).is_ok());
        assert!(decode(&payload(0, 0, 3)).is_err());
        assert!(decode(&payload(0, 7, 2)).is_err());
        assert!(decode(&payload(BEFORE_RANGES, 0, 2)).is_err());
        assert!(decode(&payload(BEFORE_VALUE, 7, 2)).is_err());
        assert!(decode(&payload(BEFORE_ABSENT, 7, 2)).is_err());
        // A length beyond the record.
        assert!(decode(&[0, 5, 1, 0, 200, b'k']).is_err());
    }
}
