//! The header every data page carries on disk, and the check applied to every page read.
//!
//! Layout (little endian):
//!
//! | bytes  | field                                                  |
//! |--------|--------------------------------------------------------|
//! | 0..4   | CRC-32C of bytes 4..page_size                          |
//! | 4      | page type (see [`PageType`])                           |
//! | 5..8   | reserved, zero                                         |
//! | 8..16  | page id (guards against misdirected reads and writes)  |
//! | 16..24 | page LSN: end of the last log record describing it     |
//!
//! Invariant: a page image is trusted only after `verify` accepted its checksum, its page id
//! (the id it was read for) and its type; `seal` is the last thing done to an image before it
//! is written.

/// Bytes at the start of every page that belong to this header.
pub(crate) const PAGE_HEADER_SIZE: usize = 24;
const TYPE_OFFSET: usize = 4;
const PAGE_ID_OFFSET: usize = 8;
pub(crate) const LSN_OFFSET: usize = 16;

/// Page sizes leankv reads and writes: powers of two from 4 KiB to 64 KiB (slot offsets are
/// 16-bit).
pub(crate) fn valid_page_size(page_size: usize) -> bool {
    page_size.is_power_of_two() && (4096..=65536).contains(&page_size)
}

/// What a page holds; decides which structure's child-iteration callback applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PageType {
    BTreeLeaf = 1,
    BTreeInner = 2,
    FreeList = 3,
    /// A page of a large value (see `blob`).
    Blob = 4,
}

impl PageType {
    pub(crate) const COUNT: usize = 5;

    pub(crate) fn from_byte(byte: u8) -> Option<PageType> {
        match byte {
            1 => Some(PageType::BTreeLeaf),
            2 => Some(PageType::BTreeInner),
            3 => Some(PageType::FreeList),
            4 => Some(PageType::Blob),
            _ => None,
        }
    }
}

/// Writes the page type and id into a fresh page.
pub(crate) fn init_header(page: &mut [u8], page_type: PageType, page_id: u64) {
    page[..PAGE_HEADER_SIZE].fill(0);
    page[TYPE_OFFSET] = page_type as u8;
    page[PAGE_ID_OFFSET..PAGE_ID_OFFSET + 8].copy_from_slice(&page_id.to_le_bytes());
}

/// Reads the page type byte, if it names a known type.
pub(crate) fn page_type(page: &[u8]) -> Option<PageType> {
    PageType::from_byte(*page.get(TYPE_OFFSET)?)
}

/// The page LSN: the end of the last log record describing the page (0: none).
pub(crate) fn lsn(page: &[u8]) -> u64 {
    u64::from_le_bytes(
        page[LSN_OFFSET..LSN_OFFSET + 8]
            .try_into()
            .expect("8 bytes"),
    )
}

pub(crate) fn set_lsn(page: &mut [u8], lsn: u64) {
    page[LSN_OFFSET..LSN_OFFSET + 8].copy_from_slice(&lsn.to_le_bytes());
}

/// Stamps the page id and checksum into a page image about to be written.
pub(crate) fn seal(page: &mut [u8], page_id: u64) {
    page[PAGE_ID_OFFSET..PAGE_ID_OFFSET + 8].copy_from_slice(&page_id.to_le_bytes());
    let checksum = crc32c::crc32c(&page[4..]);
    page[..4].copy_from_slice(&checksum.to_le_bytes());
}

/// Checks a page image just read for `page_id`: checksum, id and type. Returns the type.
pub(crate) fn verify(page: &[u8], page_id: u64) -> Result<PageType, String> {
    if page.len() < PAGE_HEADER_SIZE {
        return Err("page shorter than its header".into());
    }
    let stored = u32::from_le_bytes(page[..4].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&page[4..]);
    if stored != computed {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let found = u64::from_le_bytes(
        page[PAGE_ID_OFFSET..PAGE_ID_OFFSET + 8]
            .try_into()
            .expect("8 bytes"),
    );
    if found != page_id {
        return Err(format!("page claims to be page {found}"));
    }
    page_type(page).ok_or_else(|| format!("unknown page type {}", page[TYPE_OFFSET]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_page_verifies_and_any_flipped_bit_is_caught() {
        let mut page = vec![0u8; 4096];
        init_header(&mut page, PageType::BTreeLeaf, 7);
        page[100..110].copy_from_slice(b"some bytes");
        seal(&mut page, 7);
        assert_eq!(verify(&page, 7), Ok(PageType::BTreeLeaf));
        assert!(verify(&page, 8)
            .unwrap_err()
            .contains("claims to be page 7"));
        for position in [0, 4, 9, 100, 4095] {
            let mut damaged = page.clone();
            damaged[position] ^= 0x10;
            assert!(verify(&damaged, 7).is_err(), "flip at {position} missed");
        }
    }

    #[test]
    fn zeroed_page_is_rejected() {
        assert!(verify(&[0u8; 4096], 3).is_err());
    }
}
