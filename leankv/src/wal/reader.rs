//! Reading the log back at recovery, from the last completed checkpoint to the end of what
//! survived.
//!
//! The log is read frame by frame from the checkpoint's position, through a window of a few
//! MiB (recovery's memory does not grow with the log). A frame belongs to the log if its
//! checksum holds, its LSN is the position it was expected at, and its generation is not below
//! the previous frame's (a process that crashed left frames behind the point where the next one
//! continued; they carry an older generation). Where the frames stop, the log may go on at the
//! start of the other file, with the next checkpoint's record. The log ends at the last sync
//! mark before the first frame that fails: every write of the log's writer ends with a mark and
//! a sync covers whole writes, so the frames after the last intact mark were never synced (a
//! torn or unsynced tail), and each write is kept whole or not at all. Recovery thus restores
//! a prefix of the log made of whole writes. The first pass holds the outlines read since the
//! last mark (at most what the log buffer held unwritten) until a mark follows them. (Logs of
//! format 2 could hold records after a write's mark, reserved before its chunk was sealed:
//! they end at their last intact frame, [`LogEnding::LastFrame`].)
//!
//! A torn or unsynced tail is expected after a crash; damage to records that had been synced is
//! not. Every write of the log carries a sync mark saying how far the log was durable before
//! it; if any intact mark of this generation or later, anywhere in the files, says the log was
//! durable beyond the point where reading stopped, synced records were lost, and recovery fails
//! with an error saying which LSNs, instead of silently dropping them.
//!
//! Recovery reads the log twice: once to find its end and check it ([`read_log`]), decoding of
//! each record only its outline (its kind, and a change's batch), then to replay it
//! ([`reread_log`]), decoding whole records in a thread that reads ahead. So nothing is written
//! before the log's framing, checksums and sync marks are checked. A frame whose outline reads
//! but whose record does not (its checksum holds: a bug or a forgery, not a torn write) is an
//! error of the second pass, not the end of the log.
//!
//! Invariant: no record is handed on that did not pass every check above.

use super::decode::{FrameHeader, Outline, Records};
use super::record::{Record, FRAME_ALIGN, FRAME_HEADER, MAX_PAYLOAD};
use super::{LogPosition, Tail, LOG_BLOCK, MAX_LSN};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, IO_ALIGNMENT};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bytes of a log file read at a time (more for a frame that is larger).
const WINDOW: usize = 8 << 20;
/// Records a reading thread hands to the visitor at a time, and how many such chunks it reads
/// ahead: decoding overlaps what the visitor does with the records.
const CHUNK_RECORDS: usize = 1024;
const CHUNKS_AHEAD: usize = 4;

/// Where the log read at recovery ended: the next record goes there.
#[derive(Debug, Clone)]
pub(crate) struct LogEnd {
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) lsn: u64,
    /// The partial block at the end, which the next write writes again.
    pub(crate) tail: Tail,
}

/// What reading the log found.
#[derive(Debug, Clone)]
pub(crate) struct LogScan {
    pub(crate) end: LogEnd,
    /// The generation of the last record read.
    pub(crate) generation: u32,
    /// Records read.
    pub(crate) records: u64,
}

/// Where the log read at recovery ends (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogEnding {
    /// At the last intact sync mark: each write is kept whole.
    LastSyncMark,
    /// At the last intact frame (a log written in format 2).
    LastFrame,
}

/// Reads the log from the checkpoint at `start`, whose record must be there, to the end of
/// what survived (`ending`), handing the outline of each record to `visit` with its end LSN;
/// then checks that no synced record was lost.
pub(crate) fn read_log(
    files: &[Arc<dyn Storage>; 2],
    start: LogPosition,
    ending: LogEnding,
    visit: impl FnMut(u64, Outline) -> Result<()>,
) -> Result<LogScan> {
    let (scan, marks) = std::thread::scope(|scope| {
        // The marks are scanned beside the walk.
        let marks = spawn_in(scope, "leankv-log-marks", || {
            files
                .iter()
                .map(|file| sync_marks(file.as_ref(), WINDOW))
                .collect::<Result<Vec<_>>>()
        })?;
        let scan = walk(files, start, Until::Ending(ending), WINDOW, visit);
        Ok::<_, Error>((scan, joined(marks)))
    })?;
    let scan = scan?;
    let durable = marks?
        .into_iter()
        .flat_map(|marks| marks.into_iter())
        .filter(|&(generation, _)| generation >= scan.generation)
        .map(|(_, durable)| durable)
        .max();
    if let Some(durable) = durable.filter(|&durable| durable > scan.end.lsn) {
        return Err(Error::corruption(
            0,
            format!(
                "the write-ahead log is damaged at LSN {}, but records up to LSN {durable} had \
                 been synced: the changes logged between them are lost",
                scan.end.lsn
            ),
        ));
    }
    Ok(scan)
}

/// Reads the log's records from `start` again, up to `end`, which [`read_log`] found. A record
/// whose outline read but which does not decode whole is an error.
pub(crate) fn reread_log(
    files: &[Arc<dyn Storage>; 2],
    start: LogPosition,
    end: &LogEnd,
    visit: impl FnMut(u64, &Record) -> Result<()>,
) -> Result<()> {
    walk_ahead(files, start, end.lsn, visit).map(|_| ())
}

/// [`walk`] up to `stop` in a thread of its own, which reads and decodes ahead of `visit`. The
/// records go back to that thread to be dropped: freeing memory another thread allocated
/// contends for the allocator's locks.
fn walk_ahead(
    files: &[Arc<dyn Storage>; 2],
    start: LogPosition,
    stop: u64,
    mut visit: impl FnMut(u64, &Record) -> Result<()>,
) -> Result<LogScan> {
    type Chunk = Vec<(u64, Record)>;
    std::thread::scope(|scope| {
        let (read, to_visit) = std::sync::mpsc::sync_channel::<Chunk>(CHUNKS_AHEAD);
        let (visited, to_drop) = std::sync::mpsc::channel::<Chunk>();
        let reader = spawn_in(scope, "leankv-log-reader", move || {
            let mut chunk = Vec::with_capacity(CHUNK_RECORDS);
            // A group's records all end where its frame does.
            let scan = walk(
                files,
                start,
                Until::Lsn(stop),
                WINDOW,
                |lsn, records: Records| {
                    records.try_for_each(|record| {
                        chunk.push((lsn, record));
                        if chunk.len() == CHUNK_RECORDS {
                            let next = match to_drop.try_recv() {
                                Ok(mut done) => {
                                    done.clear();
                                    done
                                }
                                Err(_) => Vec::with_capacity(CHUNK_RECORDS),
                            };
                            // The visitor failed and hung up: stop (its error is the one returned).
                            read.send(std::mem::replace(&mut chunk, next))
                                .map_err(|_| Error::Closed)?;
                        }
                        Ok(())
                    })
                },
            )?;
            _ = read.send(chunk);
            Ok(scan)
        })?;
        let mut outcome = Ok(());
        for chunk in &to_visit {
            outcome = chunk
                .iter()
                .try_for_each(|(lsn, record)| visit(*lsn, record));
            _ = visited.send(chunk);
            if outcome.is_err() {
                break;
            }
        }
        drop(to_visit);
        let scan = joined(reader);
        outcome?;
        scan
    })
}

/// Starts `work` in a thread of `scope` named `name` (failing, not panicking, when the system
/// cannot start one).
fn spawn_in<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    work: impl FnOnce() -> T + Send + 'scope,
) -> Result<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, work)
        .map_err(|e| Error::io("starting a thread to read the log", e))
}

/// What a scoped thread returned; its panic goes on in this thread.
fn joined<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A log file read through a window of its bytes. Past its last whole sector (up to the
/// next multiple of [`IO_ALIGNMENT`]) it reads as zeros, as a partial sector is never read.
struct FileWindow<'a> {
    file: &'a dyn Storage,
    /// The file's length rounded up to whole sectors: nothing lies beyond.
    size: u64,
    /// The file's length rounded down to whole sectors: what can be read.
    readable: u64,
    /// The file offset of `bytes[0]`, and how many of `bytes` hold the file's.
    start: u64,
    len: usize,
    bytes: AlignedBuf,
    window: usize,
}

impl<'a> FileWindow<'a> {
    fn open(file: &'a dyn Storage, window: usize) -> Result<Self> {
        debug_assert!(window.is_multiple_of(IO_ALIGNMENT) && window > 0);
        let len = file
            .len()
            .map_err(|e| Error::io("reading the log's size", e))?;
        Ok(FileWindow {
            file,
            size: len.next_multiple_of(IO_ALIGNMENT as u64),
            readable: len - len % IO_ALIGNMENT as u64,
            start: 0,
            len: 0,
            bytes: AlignedBuf::new(0),
            window,
        })
    }

    /// The `len` bytes at `offset`, or `None` if they reach beyond the file.
    fn get(&mut self, offset: u64, len: usize) -> Result<Option<&[u8]>> {
        let Some(end) = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.size)
        else {
            return Ok(None);
        };
        if offset < self.start || end > self.start + self.len as u64 {
            self.fill(offset, len)?;
        }
        let at = (offset - self.start) as usize;
        Ok(Some(&self.bytes[at..at + len]))
    }

    /// Reads a window that holds `offset..offset + len` (which lies within `size`).
    fn fill(&mut self, offset: u64, len: usize) -> Result<()> {
        let start = offset - offset % IO_ALIGNMENT as u64;
        let wanted = ((offset - start) as usize + len)
            .max(self.window)
            .next_multiple_of(IO_ALIGNMENT);
        let window = wanted.min((self.size - start) as usize);
        if self.bytes.len() < window {
            self.bytes = AlignedBuf::new(window);
        }
        let readable = self.readable.saturating_sub(start).min(window as u64) as usize;
        if readable > 0 {
            self.file
                .read_at(&mut self.bytes[..readable], start)
                .map_err(|e| Error::io("reading the log", e))?;
        }
        self.bytes[readable..window].fill(0);
        self.start = start;
        self.len = window;
        Ok(())
    }
}

/// What a pass decodes of each frame: whole records, or their outlines (the first pass).
trait FrameContent: Sized {
    fn decode(header: &FrameHeader, payload: &[u8]) -> std::result::Result<Self, String>;
    fn is_checkpoint(&self) -> bool;
    fn is_sync_mark(&self) -> bool;
}

impl FrameContent for Records {
    fn decode(header: &FrameHeader, payload: &[u8]) -> std::result::Result<Self, String> {
        header.decode_records(payload)
    }

    fn is_checkpoint(&self) -> bool {
        matches!(self, Records::One(Record::Checkpoint { .. }))
    }

    fn is_sync_mark(&self) -> bool {
        matches!(self, Records::One(Record::SyncMark { .. }))
    }
}

impl FrameContent for Outline {
    fn decode(header: &FrameHeader, payload: &[u8]) -> std::result::Result<Self, String> {
        header.decode_outline(payload)
    }

    fn is_checkpoint(&self) -> bool {
        *self == Outline::Checkpoint
    }

    fn is_sync_mark(&self) -> bool {
        *self == Outline::SyncMark
    }
}

/// What lies where the next frame would be.
enum Next<T> {
    /// A frame that passed every check.
    Frame {
        content: T,
        len: u64,
        generation: u32,
    },
    /// A frame at its place with its checksum holding, whose content does not decode.
    Undecodable(String),
    /// No frame of the log.
    End,
}

impl<T: FrameContent> Next<T> {
    fn is_checkpoint(&self) -> bool {
        matches!(self, Next::Frame { content, .. } if content.is_checkpoint())
    }
}

/// The frame at `offset`, if it is the log's next one: expected at `lsn`, of generation
/// `generation` or later, whole and intact.
fn next_frame<T: FrameContent>(
    window: &mut FileWindow,
    offset: u64,
    lsn: u64,
    generation: u32,
) -> Result<Next<T>> {
    let Some(header_bytes) = window.get(offset, FRAME_HEADER)? else {
        return Ok(Next::End);
    };
    let header_bytes: [u8; FRAME_HEADER] = header_bytes.try_into().expect("header length");
    let header = FrameHeader::decode(&header_bytes);
    if header.lsn != lsn || header.generation < generation || header.payload_len > MAX_PAYLOAD {
        return Ok(Next::End);
    }
    let len = header.frame_len() as u64;
    if lsn.checked_add(len).is_none_or(|next| next > MAX_LSN) {
        return Ok(Next::End);
    }
    let Some(payload) = window.get(offset + FRAME_HEADER as u64, header.payload_len)? else {
        return Ok(Next::End);
    };
    if !header.checksum_holds(&header_bytes, payload) {
        return Ok(Next::End);
    }
    Ok(match T::decode(&header, payload) {
        Ok(content) => Next::Frame {
            content,
            len,
            generation: header.generation,
        },
        Err(reason) => Next::Undecodable(reason),
    })
}

/// How far [`walk`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// To the end of what survived, as the log's format ends it.
    Ending(LogEnding),
    /// To this LSN, where a frame ends (an earlier walk found it): a frame before it that does
    /// not decode is an error.
    Lsn(u64),
}

/// Hands what `T` decodes of the log's frames from the checkpoint at `start` to `visit`, as far
/// as `until` says.
fn walk<T: FrameContent>(
    files: &[Arc<dyn Storage>; 2],
    start: LogPosition,
    until: Until,
    window_len: usize,
    mut visit: impl FnMut(u64, T) -> Result<()>,
) -> Result<LogScan> {
    let stop = match until {
        Until::Lsn(lsn) => Some(lsn),
        Until::Ending(_) => None,
    };
    if start.lsn > MAX_LSN {
        return Err(Error::corruption(
            0,
            "superblock: checkpoint LSN out of range",
        ));
    }
    if !start.offset.is_multiple_of(FRAME_ALIGN as u64) {
        return Err(Error::corruption(
            0,
            "superblock: checkpoint offset not at a frame boundary",
        ));
    }
    let (mut file, mut offset, mut lsn, mut generation) = (start.file, start.offset, start.lsn, 0);
    let mut window = FileWindow::open(files[file].as_ref(), window_len)?;
    let mut next = next_frame::<T>(&mut window, offset, lsn, generation)?;
    if !next.is_checkpoint() {
        return Err(Error::corruption(
            0,
            format!(
                "the log holds no checkpoint record at LSN {} (log file {}, offset {}): \
                 the log is damaged or missing, and with it every change since that checkpoint",
                start.lsn, start.file, start.offset
            ),
        ));
    }
    let mut records = 0;
    let mut switched = false;
    // Read to the end of what survived, frames are handed on only once a sync mark follows
    // them (see the module notes); the starting checkpoint's record at once.
    let mut held: Vec<(u64, T)> = Vec::new();
    let mut kept: Option<Kept> = None;
    loop {
        loop {
            let (content, len, of) = match next {
                Next::Frame {
                    content,
                    len,
                    generation,
                } => (content, len, generation),
                Next::Undecodable(reason) if stop.is_some() => {
                    return Err(Error::corruption(
                        0,
                        format!(
                            "the write-ahead log record at LSN {lsn} passes its checksum but \
                             cannot be read: {reason}"
                        ),
                    ));
                }
                Next::Undecodable(_) | Next::End => break,
            };
            if stop.is_some_and(|stop| lsn + len > stop) {
                return Err(reread_differently(lsn));
            }
            generation = of;
            lsn += len;
            offset += len;
            records += 1;
            if stop.is_some() {
                visit(lsn, content)?;
            } else {
                let ends_a_write = kept.is_none()
                    || until == Until::Ending(LogEnding::LastFrame)
                    || content.is_sync_mark();
                held.push((lsn, content));
                if ends_a_write {
                    held.drain(..)
                        .try_for_each(|(lsn, content)| visit(lsn, content))?;
                    kept = Some(Kept {
                        file,
                        offset,
                        lsn,
                        generation,
                        records,
                    });
                }
            }
            if stop == Some(lsn) {
                break;
            }
            next = next_frame(&mut window, offset, lsn, generation)?;
        }
        if switched || stop == Some(lsn) {
            break;
        }
        // The next checkpoint may have gone on at the start of the other file.
        let mut other = FileWindow::open(files[1 - file].as_ref(), window_len)?;
        next = next_frame(&mut other, 0, lsn, generation)?;
        if !next.is_checkpoint() {
            break;
        }
        (window, file, offset, switched) = (other, 1 - file, 0, true);
    }
    if stop.is_some_and(|stop| lsn != stop) {
        return Err(reread_differently(lsn));
    }
    // The frames held since the last mark were never synced: the log ends at the mark.
    if let Some(kept) = kept.filter(|kept| kept.lsn != lsn) {
        if kept.file != file {
            window = FileWindow::open(files[kept.file].as_ref(), window_len)?;
        }
        Kept {
            file,
            offset,
            lsn,
            generation,
            records,
        } = kept;
    }
    let partial = (offset % LOG_BLOCK as u64) as usize;
    let block = offset - partial as u64;
    let bytes = window.get(block, partial)?.unwrap_or_default().to_vec();
    Ok(LogScan {
        end: LogEnd {
            file,
            offset,
            lsn,
            tail: Tail {
                file,
                offset: block,
                bytes,
            },
        },
        generation,
        records,
    })
}

/// Where the part of the log that recovery keeps ends (see [`walk`]).
#[derive(Debug, Clone, Copy)]
struct Kept {
    file: usize,
    offset: u64,
    lsn: u64,
    generation: u32,
    records: u64,
}

fn reread_differently(lsn: u64) -> Error {
    Error::corruption(
        0,
        format!("the write-ahead log read differently the second time (at LSN {lsn})"),
    )
}

/// The largest `durable` of the intact sync marks in the file, by generation (frames start at
/// multiples of 8).
fn sync_marks(file: &dyn Storage, window_len: usize) -> Result<BTreeMap<u32, u64>> {
    const MARK: usize = FRAME_HEADER + 8;
    let mut window = FileWindow::open(file, window_len)?;
    let mut furthest = BTreeMap::new();
    let mut from = 0;
    while from < window.size {
        let len = (window_len + MARK).min((window.size - from) as usize);
        let bytes = window.get(from, len)?.expect("within the file");
        for at in (0..window_len.min(len.saturating_sub(FRAME_HEADER))).step_by(FRAME_ALIGN) {
            let header_bytes: &[u8; FRAME_HEADER] = bytes[at..at + FRAME_HEADER]
                .try_into()
                .expect("header length");
            if !FrameHeader::is_sync_mark_header(header_bytes) {
                continue;
            }
            let header = FrameHeader::decode(header_bytes);
            if header.payload_len != 8 {
                continue;
            }
            let Some(payload) = bytes.get(at + FRAME_HEADER..at + MARK) else {
                continue;
            };
            if let Ok(Record::SyncMark { durable }) = header.decode_record(header_bytes, payload) {
                let of_generation = furthest.entry(header.generation).or_insert(durable);
                *of_generation = durable.max(*of_generation);
            }
        }
        from += window_len as u64;
    }
    Ok(furthest)
}

/// Every record from the checkpoint at `start`, read as recovery reads them.
#[cfg(test)]
pub(crate) fn records_from(
    files: &[Arc<dyn Storage>; 2],
    start: LogPosition,
) -> Result<(Vec<(u64, Record)>, LogScan)> {
    let scan = read_log(files, start, LogEnding::LastSyncMark, |_, _| Ok(()))?;
    let mut records = Vec::new();
    reread_log(files, start, &scan.end, |lsn, record| {
        records.push((lsn, record.clone()));
        Ok(())
    })?;
    Ok((records, scan))
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

    fn commits(records: &[(u64, Record)]) -> usize {
        records
            .iter()
            .filter(|(_, record)| matches!(record, Record::Commit { .. }))
            .count()
    }

    /// The whole file, rounded up to whole sectors.
    fn file_bytes(file: &dyn Storage) -> AlignedBuf {
        let mut window = FileWindow::open(file, IO_ALIGNMENT).unwrap();
        let size = window.size as usize;
        let mut bytes = AlignedBuf::new(size);
        bytes.copy_from_slice(window.get(0, size).unwrap().unwrap());
        bytes
    }

    #[test]
    fn a_torn_tail_is_cut_but_a_damaged_synced_record_is_an_error() {
        let (files, start) = written_log(20);
        let (records, scan) = records_from(&files, start).unwrap();
        assert_eq!(commits(&records), 20);
        let bytes = file_bytes(files[0].as_ref());
        let end = scan.end.offset as usize;
        // The last write torn off (its sectors old): a shorter prefix, no error.
        let torn: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        torn.write_at(&bytes[..end - end % 512], 0).unwrap();
        let (cut, _) = records_from(&[torn, files[1].clone()], start).unwrap();
        assert!(commits(&cut) < 20);
        // A byte of an early, synced commit flipped: recovery must not silently stop there.
        let mut damaged = AlignedBuf::new(bytes.len());
        damaged.copy_from_slice(&bytes);
        damaged[start.offset as usize + 200] ^= 1;
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        storage.write_at(&damaged, 0).unwrap();
        let error = records_from(&[storage, files[1].clone()], start)
            .err()
            .unwrap();
        assert!(error.to_string().contains("had been synced"), "{error}");
    }

    #[test]
    fn a_checkpoint_position_off_a_frame_boundary_is_an_error() {
        let (files, start) = written_log(1);
        let skewed = LogPosition {
            offset: start.offset + 4,
            ..start
        };
        let error = records_from(&files, skewed).err().unwrap();
        assert!(error.to_string().contains("frame boundary"), "{error}");
    }

    #[test]
    fn a_record_that_passes_its_checksum_but_does_not_decode_is_an_error_not_an_end() {
        use crate::wal::record::{stamp, KIND_COMMIT, KIND_OFFSET};
        let (files, start) = written_log(3);
        let (_, scan) = records_from(&files, start).unwrap();
        // A commit record with a byte too many after its batch, checksummed as the writer
        // would: its outline (the batch) reads, the whole record does not.
        let payload = [7, 0, 0, 0, 0, 0, 0, 0, 0xff];
        let mut header = [0u8; FRAME_HEADER];
        header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        header[KIND_OFFSET] = KIND_COMMIT;
        let payload_checksum = crc32c::crc32c(&payload);
        stamp(&mut header, scan.end.lsn, scan.generation, payload_checksum);
        let mut bytes = file_bytes(files[scan.end.file].as_ref());
        let at = scan.end.offset as usize;
        if bytes.len() < at + 512 {
            let mut longer = AlignedBuf::new(at + 512);
            longer[..bytes.len()].copy_from_slice(&bytes);
            bytes = longer;
        }
        bytes[at..at + FRAME_HEADER].copy_from_slice(&header);
        bytes[at + FRAME_HEADER..at + FRAME_HEADER + payload.len()].copy_from_slice(&payload);
        // A sync mark after it, as the write that held it would end: the frame lies in the
        // part of the log that recovery keeps.
        let commit_len = (FRAME_HEADER + payload.len()).next_multiple_of(FRAME_ALIGN);
        let mut mark = Vec::new();
        crate::wal::FrameWriter::new(&mut mark, &mut Vec::new()).sync_mark(0);
        crate::wal::record::stamp_frames(
            &mut mark,
            scan.end.lsn + commit_len as u64,
            scan.generation,
        );
        bytes[at + commit_len..at + commit_len + mark.len()].copy_from_slice(&mark);
        let edited: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        edited.write_at(&bytes, 0).unwrap();
        let mut files = files;
        files[scan.end.file] = edited;
        let error = records_from(&files, start).err().unwrap();
        assert!(error.to_string().contains("passes its checksum"), "{error}");
    }

    #[test]
    fn frames_after_the_last_sync_mark_are_dropped_and_a_write_ending_in_one_is_kept() {
        let (files, start) = written_log(3);
        let (records, scan) = records_from(&files, start).unwrap();
        // Two intact commits after the log's end, as a write torn before its mark leaves them.
        let (mut frames, mut scratch) = (Vec::new(), Vec::new());
        let mut writer = crate::wal::FrameWriter::new(&mut frames, &mut scratch);
        writer.commit(41);
        writer.commit(42);
        let torn_len = frames.len();
        crate::wal::record::stamp_frames(&mut frames, scan.end.lsn, scan.generation);
        let with = |frames: &[u8]| {
            let mut bytes = file_bytes(files[scan.end.file].as_ref());
            let at = scan.end.offset as usize;
            let len = (at + frames.len())
                .next_multiple_of(IO_ALIGNMENT)
                .max(bytes.len());
            let mut longer = AlignedBuf::new(len);
            longer[..bytes.len()].copy_from_slice(&bytes);
            bytes = longer;
            bytes[at..at + frames.len()].copy_from_slice(frames);
            let edited: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
            edited.write_at(&bytes, 0).unwrap();
            let mut files = files.clone();
            files[scan.end.file] = edited;
            let mut outlines = Vec::new();
            read_log(&files, start, LogEnding::LastSyncMark, |lsn, outline| {
                outlines.push((lsn, outline));
                Ok(())
            })
            .unwrap();
            let read = records_from(&files, start).unwrap();
            (files, read, outlines)
        };
        let (torn_files, (torn, torn_scan), outlines) = with(&frames);
        assert_eq!(torn, records, "a write without its mark is dropped whole");
        assert_eq!(torn_scan.end.lsn, scan.end.lsn);
        assert_eq!(torn_scan.end.tail.bytes, scan.end.tail.bytes);
        assert!(!outlines
            .iter()
            .any(|(_, o)| matches!(o, Outline::Commit { batch: 41 | 42 })));
        // A log of format 2, whose writes could hold records after their mark, ends at its
        // last intact frame.
        let format_2 = read_log(&torn_files, start, LogEnding::LastFrame, |_, _| Ok(())).unwrap();
        assert_eq!(format_2.end.lsn, scan.end.lsn + torn_len as u64);
        // The same write with its mark: kept whole.
        let mut mark = Vec::new();
        crate::wal::FrameWriter::new(&mut mark, &mut Vec::new()).sync_mark(scan.end.lsn);
        crate::wal::record::stamp_frames(
            &mut mark,
            scan.end.lsn + torn_len as u64,
            scan.generation,
        );
        frames.extend_from_slice(&mark);
        let (_, (whole, whole_scan), outlines) = with(&frames);
        assert_eq!(whole.len(), records.len() + 3);
        assert_eq!(whole_scan.end.lsn, scan.end.lsn + frames.len() as u64);
        assert!(outlines
            .iter()
            .any(|(_, o)| *o == Outline::Commit { batch: 42 }));
    }

    #[test]
    fn records_read_through_a_small_window_are_those_read_through_a_large_one() {
        // About 4 KiB of log: frames cross many 512-byte windows.
        let (files, start) = written_log(60);
        let (records, scan) = records_from(&files, start).unwrap();
        let mut small = Vec::new();
        let small_scan = walk(
            &files,
            start,
            Until::Ending(LogEnding::LastSyncMark),
            IO_ALIGNMENT,
            |lsn, records: Records| {
                records.try_for_each(|record| {
                    small.push((lsn, record));
                    Ok(())
                })
            },
        )
        .unwrap();
        assert_eq!(small, records);
        assert_eq!(small_scan.end.lsn, scan.end.lsn);
        assert_eq!(small_scan.end.tail.bytes, scan.end.tail.bytes);
        let marks = |window| sync_marks(files[0].as_ref(), window).unwrap();
        assert_eq!(marks(IO_ALIGNMENT), marks(WINDOW));
        assert!(!marks(IO_ALIGNMENT).is_empty());
        // Read again up to the end found: the same records.
        let mut again = Vec::new();
        reread_log(&files, start, &scan.end, |lsn, record| {
            again.push((lsn, record.clone()));
            Ok(())
        })
        .unwrap();
        assert_eq!(again, records);
    }
}
