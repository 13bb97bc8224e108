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
//! Invariant: no record is returned that did not pass every check above.

use super::record::{FrameHeader, Record, FRAME_HEADER, MAX_PAYLOAD};
use super::{LogPosition, Tail};
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
    Ok(ReadLog {
        records,
        end,
        generation,
    })
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
        let at = offset as usize;
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
        *generation = header.generation;
        let len = header.frame_len() as u64;
        *lsn += len;
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
