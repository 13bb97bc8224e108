use super::*;
use crate::btree::node::NodeMut;
use crate::buffer::PageMut;
use crate::io::{page as page_format, MemoryStorage};

/// Recovery's two passes over `records`, with room for `memory` bytes of pages.
fn redo_in(
    storage: &dyn Storage,
    page_size: usize,
    memory: usize,
    records: &[(u64, Record)],
) -> Result<Redone> {
    let mut outcomes = BatchOutcomes::default();
    for (_, record) in records {
        match record {
            Record::Commit { batch } => outcomes.note(Outline::Commit { batch: *batch }),
            _ => match leaf_change_of(record) {
                Some((_, batch, ..)) => outcomes.note(Outline::Change { batch }),
                None => outcomes.note(Outline::Other),
            },
        }
    }
    replay(
        storage,
        page_size,
        memory,
        &outcomes.incomplete(),
        |visit| {
            records
                .iter()
                .try_for_each(|(lsn, record)| visit(*lsn, record))
        },
    )
}

fn redo(storage: &dyn Storage, page_size: usize, records: &[(u64, Record)]) -> Result<Redone> {
    redo_in(storage, page_size, 1 << 30, records)
}

fn undo_list(
    records: &[(u64, Record)],
    incomplete: &HashSet<u64>,
    page_size: usize,
) -> Result<(Vec<Undo>, Vec<BlobRef>)> {
    let mut scan = UndoScan::new(incomplete, page_size);
    records.iter().for_each(|(_, record)| scan.note(record));
    scan.finish()
}

/// An empty leaf image of page `page_id`.
fn empty_leaf(page_size: usize, page_id: u64) -> Vec<u8> {
    let mut leaf = vec![0u8; page_size];
    page_format::init_header(&mut leaf, page_format::PageType::BTreeLeaf, page_id);
    NodeMut::new(PageMut::from_slice(&mut leaf)).init(0, None, None);
    leaf
}

fn put(batch: u64, key: &str, value: &str, before: Before) -> (u64, Record) {
    let record = Record::Put {
        page_id: 5,
        tree: 1,
        batch,
        key: key.into(),
        value: value.into(),
        blob: false,
        added: before == Before::Absent,
        before,
        image: None,
    };
    (0, record)
}

#[test]
fn pages_allocated_since_the_checkpoint_that_no_record_describes_are_free() {
    const PAGE: usize = 4096;
    let leaf = empty_leaf(PAGE, 12);
    // Pages 10 and 11 were allocated after the checkpoint; only 12's record survived.
    let records = vec![
        (
            100,
            Record::Checkpoint {
                page_count: 10,
                free: vec![3],
                key_counts: None,
            },
        ),
        (
            200,
            Record::Structure {
                images: vec![(12, leaf)],
                freed: Vec::new(),
                new_tree: false,
                step: None,
            },
        ),
    ];
    let storage = MemoryStorage::new();
    let redone = redo(&storage, PAGE, &records).unwrap();
    assert_eq!(redone.page_count, 13);
    assert_eq!(redone.free, vec![3, 10, 11]);
}

#[test]
fn a_drop_takes_over_the_removals_on_its_tree_before_and_after_its_start() {
    let removal = |id: u64, tree: u64, drop: bool| {
        (
            id * 100,
            Record::RangeRemoval(RangeRemoval {
                removal: id,
                tree,
                start: Bound::Unbounded,
                end: Bound::Excluded(b"m".to_vec()),
                drop,
            }),
        )
    };
    let checkpoint = Record::Checkpoint {
        page_count: 10,
        free: Vec::new(),
        key_counts: None,
    };
    let records = vec![
        (1, checkpoint),
        removal(1, 7, false), // cut off by the drop
        removal(2, 8, false), // another tree: finished
        removal(3, 7, true),
        removal(4, 7, false), // started after the drop (lost the race)
    ];
    let storage = MemoryStorage::new();
    let redone = redo(&storage, 4096, &records).unwrap();
    let mut pending: Vec<(u64, bool)> = redone
        .range_removals
        .iter()
        .map(|removal| (removal.removal, removal.drop))
        .collect();
    pending.sort_unstable();
    assert_eq!(pending, vec![(2, false), (3, true)]);
}

#[test]
fn undo_restores_last_first_and_leaves_keys_a_later_commit_wrote() {
    let old = |value: &str| Before::Value(value.into());
    let records = vec![
        put(7, "a", "a1", old("a0")),
        put(7, "b", "b1", Before::Absent),
        put(0, "a", "a2", Before::Unrecorded), // committed after batch 7 changed "a"
        put(7, "c", "c1", old("c0")),
        put(7, "c", "c2", old("c1")),
        put(8, "d", "d1", old("d0")),
        (0, Record::Commit { batch: 8 }),
    ];
    let (undo, _) = undo_list(&records, &HashSet::from([7]), 4096).unwrap();
    let undo: Vec<(&[u8], &Restore)> = undo.iter().map(|u| (u.key.as_slice(), &u.before)).collect();
    let value = |v: &str| Restore::Value(v.into());
    assert_eq!(
        undo,
        vec![
            (&b"c"[..], &value("c1")),
            (&b"c"[..], &value("c0")),
            (&b"b"[..], &Restore::Absent),
        ]
    );
}

#[test]
fn pages_beyond_the_memory_budget_are_written_early_and_read_back_to_the_same_end() {
    const PAGE: usize = 4096;
    let pages = 10..34u64;
    let mut records = vec![(
        100,
        Record::Checkpoint {
            page_count: 10,
            free: Vec::new(),
            key_counts: None,
        },
    )];
    for page_id in pages.clone() {
        let images = vec![(page_id, empty_leaf(PAGE, page_id))];
        let structure = Record::Structure {
            images,
            freed: Vec::new(),
            new_tree: false,
            step: None,
        };
        records.push((200 + page_id, structure));
    }
    // Changes to every page, the spilled ones last: they are read back.
    for page_id in pages.clone().rev() {
        let put = Record::Put {
            page_id,
            tree: 1,
            batch: 0,
            key: format!("{page_id:03}").into_bytes(),
            value: vec![7; 100],
            blob: false,
            added: true,
            before: Before::Unrecorded,
            image: None,
        };
        records.push((1000 + page_id, put));
    }
    let roomy = MemoryStorage::new();
    let all_in_memory = redo_in(&roomy, PAGE, 1 << 30, &records).unwrap();
    let tight = MemoryStorage::new();
    let spilling = redo_in(&tight, PAGE, 16 * PAGE, &records).unwrap();
    assert_eq!(all_in_memory.pages_spilled, 0);
    // Half of 16 pages written when the images came in, half again when the spilled ones
    // were read back to be changed.
    assert_eq!(spilling.pages_spilled, 16);
    assert_eq!(spilling.pages, all_in_memory.pages);
    assert_eq!(spilling.free, all_in_memory.free);
    let file = |storage: &MemoryStorage| {
        let mut bytes = vec![0u8; storage.len().unwrap() as usize];
        storage.read_at(&mut bytes, 0).unwrap();
        bytes
    };
    assert_eq!(file(&tight), file(&roomy));
}
