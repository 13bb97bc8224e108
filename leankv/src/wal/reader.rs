//! Reading the log back at recovery, from the last completed checkpoint to the end of what
//! survived.
//!
//! The log is read frame by frame from the checkpoint's position. A frame belongs to the log
//! if its checksum holds, its LSN is the position it was expected at, and its generation is
//! not below the previous frame's (a process that crashed left frames behind the point where
//! the next one continued; they carry an older generation). Where the frames stop, the log may
//! go on at the start of the other file, with the next checkpoint's record. The first frame
//! that fails is the end: a torn or unsynced tail is cut there, and so recovery restores a
//! prefix of the log.
//!
//! A torn or unsynced tail is expected after a crash; damage to records that had been synced is
//! not. Every write of the log carries a sync mark saying how far the log was durable before
//! it; if any intact mark of this generation or later, anywhere in the files, says the log was
//! durable beyond the point where reading stopped, synced records were lost, and recovery fails
//! with an error saying which LSNs, instead of silently dropping them.
//!
//! Invariant: no record is returned that did not pass every check above.

use super::decode::FrameHeader;
use super::record::{Record, FRAME_ALIGN, FRAME_HEADER, MAX_PAYLOAD};
use super::{LogPosition, Tail, MAX_LSN};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, IO_ALIGNMENT};
use std::sync::Arc;

/// Where the log read at recovery ended: the next record goes there.
#[derive(Debug, Clone)]
pub(crate) struct LogEnd {
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) lsn: u64,
    /// The partial sector at the end, which the next write writes again.
    pub(crate) tail: Tail,
}

/// The records from a checkpoint on, in log order, each with its end LSN.
pub(crate) struct ReadLog {
    pub(crate) records: Vec<(u64, Record)>,
    pub(crate) end: LogEnd,
    /// The generation of the last record read.
    pub(crate) generation: u32,
}

/// Reads the log from the checkpoint at `start`, whose record must be there.
pub(crate) fn read_log(files: &[Arc<dyn Storage>; 2], start: LogPosition) -> Result<ReadLog> {
    if start.lsn > MAX_LSN {
        return Err(Error::corruption(
            0,
            "superblock: checkpoint LSN out of range",
        ));
    }
    let first = read_file(files[start.file].as_ref())?;
    let mut records = Vec::new();
    let (mut lsn, mut generation) = (start.lsn, 0);
    let offset = read_frames(
        &first,
        start.offset,
        &mut lsn,
        &mut generation,
        &mut records,
    );
    if !matches!(records.first(), Some((_, Record::Checkpoint { .. }))) {
        return Err(Error::corruption(
            0,
            format!(
                "the log holds no checkpoint record at LSN {} (log file {}, offset {}): \
                 the log is damaged or missing, and with it every change since that checkpoint",
                start.lsn, start.file, start.offset
            ),
        ));
    }
    let mut end = LogEnd {
        file: start.file,
        offset,
        lsn,
        tail: tail_of(&first, start.file, offset),
    };
    // The next checkpoint may have gone on at the start of the other file.
    let other = 1 - start.file;
    let second = read_file(files[other].as_ref())?;
    let mut more = Vec::new();
    let (mut more_lsn, mut more_generation) = (lsn, generation);
    let more_end = read_frames(&second, 0, &mut more_lsn, &mut more_generation, &mut more);
    if matches!(more.first(), Some((_, Record::Checkpoint { .. }))) {
        records.extend(more);
        generation = more_generation;
        end = LogEnd {
            file: other,
            offset: more_end,
            lsn: more_lsn,
            tail: tail_of(&second, other, more_end),
        };
    }
    for bytes in [&first, &second] {
        if let Some(durable) = furthest_mark(bytes, generation) {
            if durable > end.lsn {
                return Err(Error::corruption(
                    0,
                    format!(
                        "the write-ahead log is damaged at LSN {}, but records up to LSN \
                         {durable} had been synced: the changes logged between them are lost",
                        end.lsn
                    ),
                ));
            }
        }
    }
    Ok(ReadLog {
        records,
        end,
        generation,
    })
}

/// The largest `durable` of the intact sync marks of generation `generation` or later in
/// `bytes` (frames start at multiples of 8).
fn furthest_mark(bytes: &[u8], generation: u32) -> Option<u64> {
    let mut furthest = None;
    for at in (0..bytes.len().saturating_sub(FRAME_HEADER)).step_by(FRAME_ALIGN) {
        let header_bytes: &[u8; FRAME_HEADER] = bytes[at..at + FRAME_HEADER]
            .try_into()
            .expect("header length");
        let header = FrameHeader::decode(header_bytes);
        if !header.is_sync_mark() || header.payload_len != 8 || header.generation < generation {
            continue;
        }
        let Some(payload) = bytes.get(at + FRAME_HEADER..at + FRAME_HEADER + 8) else {
            continue;
        };
        if let Ok(Record::SyncMark { durable }) = header.decode_record(header_bytes, payload) {
            furthest = furthest.max(Some(durable));
        }
    }
    furthest
}

/// The whole file, rounded up to whole sectors.
fn read_file(file: &dyn Storage) -> Result<AlignedBuf> {
    let len = file
        .len()
        .map_err(|e| Error::io("reading the log's size", e))?;
    let aligned = (len as usize).next_multiple_of(IO_ALIGNMENT);
    let mut bytes = AlignedBuf::new(aligned);
    let readable = len as usize - len as usize % IO_ALIGNMENT;
    if readable > 0 {
        file.read_at(&mut bytes[..readable], 0)
            .map_err(|e| Error::io("reading the log", e))?;
    }
    Ok(bytes)
}

/// Reads frames from `offset` while they pass; returns the offset after the last good one.
fn read_frames(
    bytes: &[u8],
    mut offset: u64,
    lsn: &mut u64,
    generation: &mut u32,
    records: &mut Vec<(u64, Record)>,
) -> u64 {
    loop {
        let Some(at) = usize::try_from(offset).ok().filter(|&at| at <= bytes.len()) else {
            return offset;
        };
        let Some(header_bytes) = bytes.get(at..at + FRAME_HEADER) else {
            return offset;
        };
        let header_bytes: &[u8; FRAME_HEADER] = header_bytes.try_into().expect("header length");
        let header = FrameHeader::decode(header_bytes);
        if header.lsn != *lsn || header.generation < *generation || header.payload_len > MAX_PAYLOAD
        {
            return offset;
        }
        let Some(payload) = bytes.get(at + FRAME_HEADER..at + FRAME_HEADER + header.payload_len)
        else {
            return offset;
        };
        let Ok(record) = header.decode_record(header_bytes, payload) else {
            return offset;
        };
        let len = header.frame_len() as u64;
        let Some(next) = lsn.checked_add(len).filter(|&next| next <= MAX_LSN) else {
            return offset;
        };
        *generation = header.generation;
        *lsn = next;
        offset += len;
        records.push((*lsn, record));
    }
}

fn tail_of(bytes: &[u8], file: usize, end: u64) -> Tail {
    let partial = (end % IO_ALIGNMENT as u64) as usize;
    let sector = end - partial as u64;
    Tail {
        file,
        offset: sector,
        bytes: bytes[sector as usize..end as usize].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;

    /// A log with a checkpoint and `commits` synced commit records, shut down.
    fn written_log(commits: u64) -> ([Arc<dyn Storage>; 2], LogPosition) {
        let files: [Arc<dyn Storage>; 2] = [
            Arc::new(MemoryStorage::new()),
            Arc::new(MemoryStorage::new()),
        ];
        let log = crate::wal::tests::new_log(files.clone(), 1 << 20);
        let start = log.begin_checkpoint(1, &[], Vec::new);
        for batch in 1..=commits {
            let (_, end) = log.append(|writer, _| writer.commit(batch));
            log.wait_durable(end).unwrap();
        }
        log.shut_down().unwrap();
        (files, start)
    }

    fn commits(read: &ReadLog) -> usize {
        read.records
            .iter()
            .filter(|(_, record)| matches!(record, Record::Commit { .. }))
            .count()
    }

    #[test]
    fn a_torn_tail_is_cut_but_a_damaged_synced_record_is_an_error() {
        let (files, start) = written_log(20);
        assert_eq!(commits(&read_log(&files, start).unwrap()), 20);
        let bytes = read_file(files[0].as_ref()).unwrap();
        let end = read_log(&files, start).unwrap().end.offset as usize;
        // The last write torn off (its sectors old): a shorter prefix, no error.
        let torn: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        torn.write_at(&bytes[..end - end % 512], 0).unwrap();
        let cut = read_log(&[torn, files[1].clone()], start).unwrap();
        assert!(commits(&cut) < 20);
        // A byte of an early, synced commit flipped: recovery must not silently stop there.
        let mut damaged = AlignedBuf::new(bytes.len());
        damaged.copy_from_slice(&bytes);
        damaged[start.offset as usize + 200] ^= 1;
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        storage.write_at(&damaged, 0).unwrap();
        let error = read_log(&[storage, files[1].clone()], start).err().unwrap();
        assert!(error.to_string().contains("had been synced"), "{error}");
    }
}
