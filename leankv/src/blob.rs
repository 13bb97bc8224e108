//! Large values (blobs): a value longer than a leaf holds lives in extents of whole pages of
//! the page file, and the leaf keeps a small reference to it (flagged in the slot, see
//! `btree/node`). This module is the format: the reference and the blob pages. Writing,
//! reading and freeing them is the buffer manager's (`buffer/blob.rs`).
//!
//! **Extents.** A blob's pages are a few runs of consecutive page ids, so it is written and
//! read with large sequential I/O, and a reference stays short however long the value: the
//! allocator takes runs of at least [`MIN_EXTENT_PAGES`] from freed blob space or else one run
//! from the end of the file. (Nguyen and Leis, "Why Files If You Have a DBMS?", grow extents
//! because a blob may grow while it is written; leankv's values arrive whole, so it takes
//! each extent as large as it can, which needs fewer of them.)
//!
//! **Reference** (little endian): `[format u8 = 1][length u64][blob id u64][extents u16]`, then
//! per extent `[first page u64][pages u32]`. The extents hold exactly the pages the length
//! needs, in value order.
//!
//! **Blob page:** the page header of `io/page.rs` (CRC-32C, type `Blob`, page id) whose LSN
//! field holds the blob id instead, then payload. Blob ids are unique over the life of the
//! file (the log generation of the open that wrote the blob, then a counter), and a blob's
//! pages are never changed once written: a new value is a new blob. So a reader that finds
//! every page it reads sealed with its reference's id read that value, even if a concurrent
//! writer replaced it meanwhile; if the pages were freed and reused meanwhile, they fail the
//! id check (or the checksum, read halfway through a write) and the reader looks again.
//!
//! Invariant: a reference is trusted only after [`BlobRef::decode`] accepted it, and a blob
//! page only after its checksum, page id, type and blob id matched.

use crate::io::page::{PageType, PAGE_HEADER_SIZE};

const FORMAT: u8 = 1;
const HEADER: usize = 1 + 8 + 8 + 2;
const EXTENT_SIZE: usize = 8 + 4;
/// Extents shorter than this are not taken from freed blob space (the file grows instead), so
/// a blob never ends up in many small pieces.
pub(crate) const MIN_EXTENT_PAGES: u64 = 16;

/// A run of consecutive pages of a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    pub(crate) first: u64,
    pub(crate) pages: u64,
}

impl Extent {
    pub(crate) fn page_ids(self) -> std::ops::Range<u64> {
        self.first..self.first + self.pages
    }
}

/// A leaf's reference to a blob, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobRef {
    pub(crate) len: u64,
    pub(crate) id: u64,
    pub(crate) extents: Vec<Extent>,
}

/// Value bytes each blob page holds.
pub(crate) fn payload_per_page(page_size: usize) -> usize {
    page_size - PAGE_HEADER_SIZE
}

/// Pages a blob of `len` bytes takes.
pub(crate) fn pages_for(len: u64, page_size: usize) -> u64 {
    len.div_ceil(payload_per_page(page_size) as u64)
}

/// Most extents a reference may have so that it fits a leaf value of `max_inline` bytes.
pub(crate) fn max_extents(max_inline: usize) -> usize {
    ((max_inline - HEADER) / EXTENT_SIZE).min(u16::MAX as usize)
}

/// The type byte blob pages carry.
pub(crate) const PAGE_TYPE: PageType = PageType::Blob;

impl BlobRef {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + EXTENT_SIZE * self.extents.len());
        out.push(FORMAT);
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&(self.extents.len() as u16).to_le_bytes());
        for extent in &self.extents {
            out.extend_from_slice(&extent.first.to_le_bytes());
            out.extend_from_slice(&(extent.pages as u32).to_le_bytes());
        }
        out
    }

    /// Decodes and checks a reference stored with pages of `page_size` bytes: the length is
    /// within [`crate::MAX_VALUE_SIZE`], the extents hold exactly the pages it needs, none
    /// is page 0, none reaches past the last page a file offset can address.
    pub(crate) fn decode(bytes: &[u8], page_size: usize) -> Result<BlobRef, String> {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        if bytes.len() < HEADER || bytes[0] != FORMAT {
            return Err("malformed large-value reference".into());
        }
        let len = u64_at(1);
        if len > crate::MAX_VALUE_SIZE as u64 {
            return Err(format!("large value of {len} bytes, beyond the limit"));
        }
        // Every page's byte offset must be a file offset.
        let page_limit = i64::MAX as u64 / page_size as u64;
        let id = u64_at(9);
        let count = u16::from_le_bytes([bytes[17], bytes[18]]) as usize;
        if bytes.len() != HEADER + count * EXTENT_SIZE {
            return Err("large-value reference of the wrong length".into());
        }
        let mut extents = Vec::with_capacity(count);
        let mut pages = 0u64;
        for index in 0..count {
            let at = HEADER + index * EXTENT_SIZE;
            let first = u64_at(at);
            let extent_pages = u64::from(u32::from_le_bytes(
                bytes[at + 8..at + 12].try_into().expect("4"),
            ));
            if first == 0 || extent_pages == 0 || first.saturating_add(extent_pages) > page_limit {
                return Err(format!("large-value extent {first}+{extent_pages} invalid"));
            }
            pages = pages
                .checked_add(extent_pages)
                .ok_or("large-value reference too long")?;
            extents.push(Extent {
                first,
                pages: extent_pages,
            });
        }
        if len == 0 || pages != pages_for(len, page_size) {
            return Err(format!(
                "large value of {len} bytes in {pages} pages of {page_size} bytes"
            ));
        }
        Ok(BlobRef { len, id, extents })
    }

    /// Every page id of the blob, in value order.
    pub(crate) fn page_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.extents.iter().flat_map(|extent| extent.page_ids())
    }
}

/// The large values a batch stopped and started referencing, in order: its commit frees those
/// whose last event was being replaced or removed. (A batch puts back a value it replaced only
/// when it is rolled back, or when it is recovery's undo; a value it wrote and then replaced
/// is freed too.)
#[derive(Debug, Default)]
pub(crate) struct BlobChanges {
    last: std::collections::HashMap<u64, (BlobRef, bool)>,
}

impl BlobChanges {
    /// A change replaced or removed `blob`.
    pub(crate) fn dropped(&mut self, blob: BlobRef) {
        self.last.insert(blob.id, (blob, false));
    }

    /// A change stored a reference to `blob`.
    pub(crate) fn put(&mut self, blob: BlobRef) {
        self.last.insert(blob.id, (blob, true));
    }

    /// What the batch's commit frees.
    pub(crate) fn unreferenced(self) -> Vec<BlobRef> {
        let last = self.last.into_values();
        last.filter(|(_, referenced)| !referenced)
            .map(|(blob, _)| blob)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_frees_what_it_replaced_last_and_keeps_what_it_put_back() {
        let blob = |id| BlobRef {
            len: 1,
            id,
            extents: vec![Extent {
                first: id,
                pages: 1,
            }],
        };
        let mut changes = BlobChanges::default();
        // Replaced 1 by 2, then rolled back: 2 replaced by 1 again. 3 replaced for good.
        changes.dropped(blob(1));
        changes.dropped(blob(2));
        changes.put(blob(1));
        changes.dropped(blob(3));
        let mut freed: Vec<u64> = changes.unreferenced().iter().map(|b| b.id).collect();
        freed.sort_unstable();
        assert_eq!(freed, [2, 3]);
    }

    #[test]
    fn references_round_trip_and_damage_is_refused() {
        let page_size = 4096;
        let len = 3 * payload_per_page(page_size) as u64 + 1;
        let blob = BlobRef {
            len,
            id: 7 << 32 | 3,
            extents: vec![
                Extent {
                    first: 10,
                    pages: 3,
                },
                Extent {
                    first: 40,
                    pages: 1,
                },
            ],
        };
        let bytes = blob.encode();
        assert_eq!(BlobRef::decode(&bytes, page_size), Ok(blob.clone()));
        assert_eq!(blob.page_ids().collect::<Vec<_>>(), [10, 11, 12, 40]);
        // One page short of the length, a wrong format, a truncated reference, page 0.
        assert!(BlobRef::decode(&bytes, page_size * 2).is_err());
        let mut wrong = bytes.clone();
        wrong[0] = 2;
        assert!(BlobRef::decode(&wrong, page_size).is_err());
        assert!(BlobRef::decode(&bytes[..bytes.len() - 1], page_size).is_err());
        let mut zero = blob.clone();
        zero.extents[1].first = 0;
        assert!(BlobRef::decode(&zero.encode(), page_size).is_err());
        let mut overflow = blob.clone();
        overflow.extents[1].first = u64::MAX / 4096;
        assert!(BlobRef::decode(&overflow.encode(), page_size).is_err());
        let mut too_long = blob;
        too_long.len = 1 << 40;
        too_long.extents[1].pages = pages_for(1 << 40, page_size) - 3;
        assert!(BlobRef::decode(&too_long.encode(), page_size).is_err());
    }

    #[test]
    fn a_maximal_reference_fits_a_leaf_value() {
        for page_size in [4096usize, 16384, 65536] {
            let max_inline = crate::btree::node::max_value_size(page_size);
            assert!(HEADER + max_extents(max_inline) * EXTENT_SIZE <= max_inline);
            assert!(max_extents(max_inline) >= 8);
        }
    }
}
