//! The superblock: page 0 of the page file, describing the whole database.
//!
//! Only its first [`SUPERBLOCK_SIZE`] bytes carry data (the rest of page 0 is zero), so it can
//! be read before the page size is known. Layout (little endian):
//!
//! | bytes  | field                                                       |
//! |--------|-------------------------------------------------------------|
//! | 0..4   | CRC-32C of bytes 4..512                                     |
//! | 4..12  | magic `LEANKV\0\n`                                          |
//! | 12..16 | format version                                              |
//! | 16..20 | page size in bytes                                          |
//! | 20..28 | page id of the catalog tree's root                          |
//! | 28..36 | page count: the allocation high-water mark                  |
//! | 36..44 | first page of the free-page list (0 = empty)                |
//! | 44..52 | number of free pages (trunk pages included)                 |
//! | 52     | 1 while a process has the database open, 0 once closed      |
//! | 53     | 1 if the write-ahead log holds the last checkpoint below    |
//! | 56..64 | LSN of the last completed checkpoint's record               |
//! | 64..72 | its offset in its log file                                  |
//! | 72     | its log file (0 or 1)                                       |
//! | 76..80 | log generation: counted up by every open                    |
//! | 80..88 | log end: a new log starts at or above it (above every page LSN) |
//!
//! With the log, the free list at 36..52 is written only by a clean close (recovery takes
//! page count and free list from the checkpoint record instead).

/// Bytes of page 0 that the superblock occupies.
pub(crate) const SUPERBLOCK_SIZE: usize = 512;
const MAGIC: &[u8; 8] = b"LEANKV\0\n";
/// Byte of the open mark (see `Superblock::open`). Files written before it existed hold 0
/// there: closed.
const OPEN_MARK: usize = 52;
const LOG_MARK: usize = 53;
/// The on-disk format this build writes. 2: four-byte key heads in node slots and large values
/// in blob pages (1 had two-byte heads and no large values). 3: the log's writes each end at a
/// sync mark, with nothing after it, and may hold padding frames (threads' regions of a
/// chunk); recovery ends such a log at its last intact mark.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The oldest format this build reads (a file is rewritten as [`FORMAT_VERSION`] at open).
const OLDEST_READABLE: u32 = 2;
/// The first format whose log writes end at sync marks (see `wal::reader`).
pub(crate) const WRITES_END_AT_SYNC_MARKS: u32 = 3;

/// The decoded superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// The format it was written in: [`FORMAT_VERSION`] whenever this build writes it.
    pub(crate) version: u32,
    pub(crate) page_size: u32,
    pub(crate) catalog_root: u64,
    pub(crate) page_count: u64,
    pub(crate) free_list_head: u64,
    pub(crate) free_list_len: u64,
    /// Written as `true` at open and by `flush`, `false` by a clean close: found `true` at
    /// open, the last process ended without closing (a crash, a kill).
    pub(crate) open: bool,
    /// Where the last completed checkpoint's record is (`None`: no log).
    pub(crate) checkpoint: Option<CheckpointRef>,
    pub(crate) generation: u32,
    pub(crate) log_end: u64,
}

/// The position of a checkpoint record in the log files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CheckpointRef {
    pub(crate) file: u8,
    pub(crate) offset: u64,
    pub(crate) lsn: u64,
}

impl Superblock {
    /// Writes the superblock into the first bytes of `page` (the rest is zeroed).
    pub(crate) fn encode(&self, page: &mut [u8]) {
        page.fill(0);
        page[4..12].copy_from_slice(MAGIC);
        page[12..16].copy_from_slice(&self.version.to_le_bytes());
        page[16..20].copy_from_slice(&self.page_size.to_le_bytes());
        page[20..28].copy_from_slice(&self.catalog_root.to_le_bytes());
        page[28..36].copy_from_slice(&self.page_count.to_le_bytes());
        page[36..44].copy_from_slice(&self.free_list_head.to_le_bytes());
        page[44..52].copy_from_slice(&self.free_list_len.to_le_bytes());
        page[OPEN_MARK] = u8::from(self.open);
        if let Some(checkpoint) = self.checkpoint {
            page[LOG_MARK] = 1;
            page[56..64].copy_from_slice(&checkpoint.lsn.to_le_bytes());
            page[64..72].copy_from_slice(&checkpoint.offset.to_le_bytes());
            page[72] = checkpoint.file;
        }
        page[76..80].copy_from_slice(&self.generation.to_le_bytes());
        page[80..88].copy_from_slice(&self.log_end.to_le_bytes());
        let checksum = crc32c::crc32c(&page[4..SUPERBLOCK_SIZE]);
        page[..4].copy_from_slice(&checksum.to_le_bytes());
    }

    /// Decodes and checks a superblock. Errors say whether the file is foreign
    /// (`Foreign`) or a damaged leankv file (`Damaged`).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Superblock, SuperblockError> {
        if bytes.len() < SUPERBLOCK_SIZE {
            return Err(SuperblockError::Foreign(
                "file shorter than a superblock".into(),
            ));
        }
        if &bytes[4..12] != MAGIC {
            return Err(SuperblockError::Foreign("no leankv magic number".into()));
        }
        let stored = u32_at(bytes, 0);
        let computed = crc32c::crc32c(&bytes[4..SUPERBLOCK_SIZE]);
        if stored != computed {
            return Err(SuperblockError::Damaged(format!(
                "superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            )));
        }
        let version = u32_at(bytes, 12);
        if !(OLDEST_READABLE..=FORMAT_VERSION).contains(&version) {
            return Err(SuperblockError::Foreign(format!(
                "format version {version}, this build reads versions {OLDEST_READABLE} to \
                 {FORMAT_VERSION}"
            )));
        }
        let superblock = Superblock {
            version,
            page_size: u32_at(bytes, 16),
            catalog_root: u64_at(bytes, 20),
            page_count: u64_at(bytes, 28),
            free_list_head: u64_at(bytes, 36),
            free_list_len: u64_at(bytes, 44),
            open: match bytes[OPEN_MARK] {
                0 => false,
                1 => true,
                other => {
                    return Err(SuperblockError::Damaged(format!(
                        "open mark {other} (0 or 1 expected)"
                    )))
                }
            },
            checkpoint: match (bytes[LOG_MARK], bytes[72]) {
                (0, _) => None,
                (1, file @ (0 | 1)) => Some(CheckpointRef {
                    file,
                    offset: u64_at(bytes, 64),
                    lsn: u64_at(bytes, 56),
                }),
                _ => {
                    return Err(SuperblockError::Damaged(
                        "log checkpoint reference malformed".into(),
                    ))
                }
            },
            generation: u32_at(bytes, 76),
            log_end: u64_at(bytes, 80),
        };
        if !crate::io::page::valid_page_size(superblock.page_size as usize) {
            return Err(SuperblockError::Damaged(format!(
                "invalid page size {}",
                superblock.page_size
            )));
        }
        // Page ids become file offsets (and swips keep one bit for a tag): a count whose last
        // page's offset does not fit in 63 bits cannot be real.
        if superblock
            .page_count
            .checked_mul(u64::from(superblock.page_size))
            .is_none_or(|bytes| bytes > i64::MAX as u64)
        {
            return Err(SuperblockError::Damaged(format!(
                "page count {} of {} bytes overflows a file offset",
                superblock.page_count, superblock.page_size
            )));
        }
        let in_range = |page: u64| page > 0 && page < superblock.page_count;
        if !in_range(superblock.catalog_root)
            || (superblock.free_list_head != 0 && !in_range(superblock.free_list_head))
            || superblock.free_list_len >= superblock.page_count
        {
            return Err(SuperblockError::Damaged(
                "superblock page references out of range".into(),
            ));
        }
        Ok(superblock)
    }
}

/// Why a superblock was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SuperblockError {
    /// Not a leankv file (or another format version).
    Foreign(String),
    /// A leankv superblock that fails its checks.
    Damaged(String),
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Superblock {
        Superblock {
            version: FORMAT_VERSION,
            page_size: 16384,
            catalog_root: 1,
            page_count: 10,
            free_list_head: 4,
            free_list_len: 3,
            open: false,
            checkpoint: Some(CheckpointRef {
                file: 1,
                offset: 4096,
                lsn: 1 << 40,
            }),
            generation: 7,
            log_end: 1 << 41,
        }
    }

    #[test]
    fn roundtrip() {
        let mut page = vec![0u8; 4096];
        sample().encode(&mut page);
        assert_eq!(Superblock::decode(&page), Ok(sample()));
    }

    #[test]
    fn foreign_and_damaged_files_are_told_apart() {
        let mut page = vec![0u8; 4096];
        assert!(matches!(
            Superblock::decode(&page),
            Err(SuperblockError::Foreign(_))
        ));
        sample().encode(&mut page);
        page[30] ^= 1;
        assert!(matches!(
            Superblock::decode(&page),
            Err(SuperblockError::Damaged(_))
        ));
    }
}
