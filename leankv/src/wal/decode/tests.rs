//! Tests of decoding: every record round-trips, damage is caught, bounds are enforced.

use super::*;
use crate::wal::ChangedRanges;

/// Decodes the frames a [`FrameWriter`] encoded into `bytes` (stamping them first, as placed
/// from LSN `base` on in generation 3).
fn decode_all(bytes: &[u8], base: u64) -> Vec<(u64, Record)> {
    let mut bytes = bytes.to_vec();
    stamp_frames(&mut bytes, base, 3);
    let bytes = &bytes[..];
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

/// A writer of frames, which `decode_all` places at LSN 4096 of generation 3.
fn writer<'a>(out: &'a mut Vec<u8>, scratch: &'a mut Vec<u8>) -> FrameWriter<'a> {
    FrameWriter::new(out, scratch)
}

/// A change of page 7 of tree 1.
fn change<'a>(batch: u64, op: LeafOp<'a>, before: BeforeRef<'a>) -> LeafChange<'a> {
    LeafChange {
        page_id: 7,
        tree: 1,
        batch,
        op,
        before,
    }
}

#[test]
fn large_value_references_and_their_before_images_roundtrip() {
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    let mut writer = writer(&mut out, &mut scratch);
    let put = LeafOp::Put {
        key: b"k",
        value: b"new reference",
        blob: true,
        added: false,
    };
    // A single operation records the large value it replaces (its pages are freed with it).
    writer.leaf(change(0, put, BeforeRef::Blob(b"old reference")), None);
    let remove = LeafOp::Remove { key: b"k" };
    writer.leaf(change(9, remove, BeforeRef::Blob(b"new reference")), None);
    let records = decode_all(&out, 4096);
    assert!(
        matches!(&records[0].1, Record::Put { blob: true, batch: 0, value, before: Before::Blob(old), .. }
        if value == b"new reference" && old == b"old reference")
    );
    assert!(
        matches!(&records[1].1, Record::Remove { before: Before::Blob(old), .. }
        if old == b"new reference")
    );
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
    let put = |key, value, added| LeafOp::Put {
        key,
        value,
        blob: false,
        added,
    };
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
    writer.commit(9);
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
    stamp_frames(&mut out, 4096, 3);
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
    stamp_frames(&mut out, 4096, 3);
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
fn varints_round_trip_at_every_length() {
    let values = (0..64)
        .flat_map(|bit| {
            let power = 1u64 << bit;
            [power - 1, power, power + 1]
        })
        .chain([u64::MAX, 0x80, 0x3fff, 0x4000]);
    for value in values {
        let mut encoded = vec![0xaa];
        varint(&mut encoded, value);
        let expected_len = (64 - value.leading_zeros()).div_ceil(7).max(1) as usize;
        assert_eq!(encoded.len(), 1 + expected_len, "{value:#x}");
        let mut reader = Reader {
            bytes: &encoded[1..],
        };
        assert_eq!(reader.varint(), Ok(value));
    }
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
    let decode = |bytes: &[u8]| Reader { bytes }.leaf(KIND_PATCH, None);
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

/// The header of a frame of `kind` holding `payload` at LSN 4096, its checksum right.
fn frame_of(kind: u8, payload: &[u8]) -> (FrameHeader, [u8; FRAME_HEADER]) {
    let mut header = [0u8; FRAME_HEADER];
    header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[KIND_OFFSET] = kind;
    stamp(&mut header, 4096, 3, crc32c::crc32c(payload));
    (FrameHeader::decode(&header), header)
}

fn fill_image(page: &mut [u8]) -> (usize, usize) {
    page.fill(2);
    page[4..8].fill(0);
    (4, 4)
}

/// The header and payload of a sealed group frame, stamped at LSN 4096 in generation 3.
fn sealed(group: &mut [u8]) -> (FrameHeader, [u8; FRAME_HEADER], Vec<u8>) {
    assert_eq!(group.len() % FRAME_ALIGN, 0);
    stamp_frames(group, 4096, 3);
    let header_bytes: [u8; FRAME_HEADER] = group[..FRAME_HEADER].try_into().unwrap();
    let header = FrameHeader::decode(&header_bytes);
    let payload = group[FRAME_HEADER..FRAME_HEADER + header.payload_len].to_vec();
    assert!(header.checksum_holds(&header_bytes, &payload));
    assert_eq!(header.frame_len(), group.len());
    (header, header_bytes, payload)
}

#[test]
fn a_group_decodes_to_the_records_its_frames_would_hold_and_damage_is_refused() {
    let old = vec![5u8; 64];
    let mut new = old.clone();
    new[3] = 1;
    new[40..42].fill(2);
    let changed = ChangedRanges::between(&old, &new).unwrap();
    let changes = [
        change(
            9,
            LeafOp::Put {
                key: b"a",
                value: b"v",
                blob: false,
                added: true,
            },
            BeforeRef::Absent,
        ),
        change(
            9,
            LeafOp::Patch {
                key: b"b",
                value: &new,
                changed: &changed,
            },
            BeforeRef::Value(&old),
        ),
        change(9, LeafOp::Remove { key: b"c" }, BeforeRef::Value(b"gone")),
    ];
    let mut fill = fill_image;
    // The same changes as frames of their own, and as one group (committing or not).
    let (mut frames, mut scratch) = (Vec::new(), Vec::new());
    let mut writer = writer(&mut frames, &mut scratch);
    let mut group = Vec::new();
    for (i, &change) in changes.iter().enumerate() {
        let image = (i == 1).then_some(64);
        writer.leaf(
            change,
            image.map(|size| (size, &mut fill as &mut FillImage<'_>)),
        );
        let image = image.map(|size| (size, &mut fill as &mut FillImage<'_>));
        crate::wal::group::add(&mut group, &mut Vec::new(), change, image);
    }
    assert!(crate::wal::group::holds_batch(&group, 9));
    let expected: Vec<Record> = decode_all(&frames, 4096)
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let mut committing = group.clone();
    crate::wal::group::seal(&mut group, false);
    assert!(
        group.len() + FRAME_HEADER + FRAME_ALIGN <= frames.len(),
        "a group costs each record one byte: {} against {} as frames",
        group.len(),
        frames.len()
    );
    let (header, _, payload) = sealed(&mut group);
    assert_eq!(
        header.decode_outline(&payload),
        Ok(Outline::Change { batch: 9 })
    );
    assert_eq!(
        header.decode_records(&payload),
        Ok(Records::Group(expected.clone()))
    );

    crate::wal::group::seal(&mut committing, true);
    let (header, _, payload) = sealed(&mut committing);
    assert_eq!(
        header.decode_outline(&payload),
        Ok(Outline::CommittedChange { batch: 9 })
    );
    let mut with_commit = expected;
    with_commit.push(Record::Commit { batch: 9 });
    assert_eq!(
        header.decode_records(&payload),
        Ok(Records::Group(with_commit))
    );

    for position in [0, 5, 9, 20, 24, 25, 30, group.len() / 2, group.len() - 9] {
        let mut damaged = group.clone();
        damaged[position] ^= 8;
        let header_bytes: [u8; FRAME_HEADER] = damaged[..FRAME_HEADER].try_into().unwrap();
        let header = FrameHeader::decode(&header_bytes);
        let end = (FRAME_HEADER + header.payload_len).min(damaged.len());
        assert!(
            header.lsn != 4096
                || !header.checksum_holds(&header_bytes, &damaged[FRAME_HEADER..end]),
            "flip at {position} missed"
        );
    }
}

/// A leaf payload (a remove of batch `batch`, with its batch id if `with_batch`) and then
/// `trailing`.
fn remove_payload(batch: u64, with_batch: bool, trailing: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    let change = change(batch, LeafOp::Remove { key: b"k" }, BeforeRef::Value(b"v"));
    let batch_field = if with_batch {
        BatchField::Written
    } else {
        BatchField::InGroup
    };
    leaf_payload(&mut payload, &mut Vec::new(), change, None, batch_field);
    payload.extend_from_slice(trailing);
    payload
}

#[test]
fn checksummed_payloads_that_are_no_packed_group_are_refused() {
    let entry = |kind: u8, trailing: &[u8]| {
        let mut out = vec![kind];
        out.extend_from_slice(&remove_payload(9, false, trailing));
        out
    };
    let group_of = |flags: u8, batch: u64, entries: &[Vec<u8>]| {
        let mut payload = vec![flags];
        varint(&mut payload, batch);
        entries
            .iter()
            .for_each(|entry| payload.extend_from_slice(entry));
        payload
    };
    let remove = entry(KIND_REMOVE, &[]);
    for (payload, why) in [
        (
            group_of(0, 0, std::slice::from_ref(&remove)),
            "single operations",
        ),
        (group_of(0, 9, &[]), "empty"),
        (group_of(GROUP_COMMITS, 9, &[]), "empty"),
        (group_of(2, 9, std::slice::from_ref(&remove)), "flags"),
        (group_of(0, 9, &[entry(KIND_COMMIT, &[])]), "of kind"),
        (group_of(0, 9, &[entry(KIND_PACKED_GROUP, &[])]), "of kind"),
        // A record's trailing byte reads as the next record's kind.
        (group_of(0, 9, &[entry(KIND_REMOVE, &[1])]), "of kind"),
        (group_of(0, 9, &[remove.clone(), vec![KIND_PUT]]), "shorter"),
        (
            group_of(0, 9, &[remove[..remove.len() - 1].to_vec()]),
            "shorter",
        ),
        (vec![0; MAX_GROUP_PAYLOAD + 1], "larger"),
    ] {
        let (header, _) = frame_of(KIND_PACKED_GROUP, &payload);
        let error = header.decode_records(&payload).unwrap_err();
        assert!(error.contains(why), "{why}: {error}");
    }
}

/// Groups as written before packed groups: still read (a log written by an earlier version
/// is recovered), and damage in them refused.
#[test]
fn groups_of_earlier_versions_decode_and_malformed_ones_are_refused() {
    let entry = |kind: u8, batch: u64, trailing: &[u8]| {
        let payload = remove_payload(batch, true, trailing);
        let mut out = vec![kind];
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    };
    let group_of = |batch: u64, entries: &[Vec<u8>]| {
        let mut payload = Vec::new();
        varint(&mut payload, batch);
        entries
            .iter()
            .for_each(|entry| payload.extend_from_slice(entry));
        payload
    };
    let valid = group_of(9, &[entry(KIND_REMOVE, 9, &[]), entry(KIND_REMOVE, 9, &[])]);
    let (header, _) = frame_of(KIND_GROUP, &valid);
    assert_eq!(
        header.decode_outline(&valid),
        Ok(Outline::Change { batch: 9 })
    );
    let Ok(Records::Group(records)) = header.decode_records(&valid) else {
        panic!("an earlier version's group decodes");
    };
    assert_eq!(records.len(), 2);
    assert!(records
        .iter()
        .all(|record| matches!(record, Record::Remove { batch: 9, key, .. } if key == b"k")));

    let mut beyond = entry(KIND_REMOVE, 9, &[]);
    beyond[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
    for (payload, why) in [
        (
            group_of(0, &[entry(KIND_REMOVE, 0, &[])]),
            "single operations",
        ),
        (group_of(9, &[]), "empty"),
        (group_of(9, &[entry(KIND_COMMIT, 9, &[])]), "of kind"),
        (group_of(9, &[entry(KIND_GROUP, 9, &[])]), "of kind"),
        (group_of(9, &[entry(KIND_REMOVE, 8, &[])]), "another batch"),
        (group_of(9, &[entry(KIND_REMOVE, 9, &[1])]), "longer"),
        (group_of(9, &[beyond]), "shorter"),
        (
            group_of(9, &[entry(KIND_REMOVE, 9, &[])])[..6].to_vec(),
            "shorter",
        ),
        (vec![9; MAX_GROUP_PAYLOAD + 1], "larger"),
    ] {
        let (header, _) = frame_of(KIND_GROUP, &payload);
        let error = header.decode_records(&payload).unwrap_err();
        assert!(error.contains(why), "{why}: {error}");
    }
}
