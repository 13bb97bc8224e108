//! Large values' pages (format in `crate::blob`): written and read straight between the
//! caller's bytes and the page file in large sequential runs, never through the pool, so a
//! value of a gigabyte needs no gigabyte of frames and is not cached twice.
//!
//! * **Writing** allocates the extents (as unlogged pages: a crash before the leaf record that
//!   references them leaks nothing), writes every page sealed with the blob's id, and tells
//!   the log, whose writer syncs the page file before it writes any later record: the WAL
//!   rule turned around, since the record that references the blob must never be durable
//!   before the blob is.
//! * **Reading** checks every page (checksum, id, type, blob id) before copying from it.
//! * **Freeing** happens when the record that stopped referencing a blob is committed: the
//!   extents are free in a checkpoint's snapshot at once, and handed out again once that record
//!   is durable (`PageIds::release_extents`). A write that would grow the file while freed
//!   extents wait makes the log durable first, so overwriting a large value again and again
//!   reuses its space instead of growing the file by its size each time.
//!
//! Invariant: a blob's pages are written once, before any record references them, and never
//! again while a reference to them may be read or recovered.

use super::page_ids::ExtentAllocation;
use super::policy::Policy;
use super::*;
use crate::blob::{self, BlobRef, Extent};
use std::sync::atomic::AtomicU64;

/// Pages per read or write call: large enough for the device's sequential rate (1 MiB with
/// 16 KiB pages), small enough that the two staging buffers stay a small part of the pool.
const IO_PAGES: usize = 64;
/// Most pages of one call: a last run this short joins the one before it, so that a value of
/// a round size, whose pages hold a little less than the size, takes one call and not two.
const IO_PAGES_MAX: usize = IO_PAGES + IO_PAGES / 4;

/// A blob just written, not yet referenced by a logged record: its extents are freed again
/// when it is dropped without [`NewBlob::referenced`].
pub(crate) struct NewBlob<'a, P: Policy> {
    bm: &'a BufferManager<P>,
    blob: BlobRef,
    reference: Vec<u8>,
    referenced: bool,
}

impl<P: Policy> NewBlob<'_, P> {
    /// The reference a leaf stores.
    pub(crate) fn reference(&self) -> &[u8] {
        &self.reference
    }

    pub(crate) fn blob(&self) -> &BlobRef {
        &self.blob
    }

    /// A logged record references the blob now (its extents were marked logged with it).
    pub(crate) fn referenced(mut self) {
        self.referenced = true;
    }
}

impl<P: Policy> Drop for NewBlob<'_, P> {
    fn drop(&mut self) {
        if !self.referenced {
            self.bm
                .page_ids
                .lock()
                .free_unlogged_extents(&self.blob.extents);
        }
    }
}

/// Where blob ids come from: the open's log generation in the high half (unique per open),
/// a counter in the low half.
pub(crate) struct BlobIds {
    next: AtomicU64,
}

impl BlobIds {
    pub(crate) fn new(generation: u32) -> Self {
        BlobIds {
            next: AtomicU64::new(u64::from(generation) << 32),
        }
    }

    fn next(&self) -> Result<u64> {
        // Four billion large values in one open: the next id would be the next open's.
        let last = |id: u64| id & u64::from(u32::MAX) == u64::from(u32::MAX);
        self.next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| {
                (!last(id)).then_some(id + 1)
            })
            .map_err(|_| {
                Error::io(
                    "writing a large value",
                    std::io::Error::other("large-value ids of this open are used up; reopen"),
                )
            })
    }
}

impl<P: Policy> BufferManager<P> {
    /// Most extents a blob may have: its reference must fit a leaf value.
    fn max_extents(&self) -> usize {
        blob::max_extents(crate::btree::node::max_value_size(self.page_size()))
    }

    /// Writes `value` into new extents (see the module notes); the caller stores the reference
    /// in a leaf and logs it, then calls [`NewBlob::referenced`].
    pub(crate) fn write_blob(&self, value: &[u8]) -> Result<NewBlob<'_, P>> {
        let page_size = self.page_size();
        let len = value.len() as u64;
        let id = self.blob_ids.next()?;
        let pages = blob::pages_for(len, page_size);
        // Rather than grow the file while freed extents wait for their records to be durable,
        // sync once (one sync for all of them) and allocate again, then without waiting.
        let mut may_wait = self.log.is_some();
        let extents = loop {
            let durable = self.log.as_ref().map_or(0, |log| log.durable());
            let allocation =
                self.page_ids
                    .lock()
                    .allocate_extents(pages, self.max_extents(), durable, may_wait);
            match (allocation, &self.log) {
                (ExtentAllocation::Allocated(extents), _) => break extents,
                (ExtentAllocation::WaitForLog(lsn), Some(log)) => log.wait_durable(lsn)?,
                // Without a log nothing waits to be freed (`may_wait` is false).
                (ExtentAllocation::WaitForLog(_), None) => {}
            }
            may_wait = false;
        };
        let blob = BlobRef { len, id, extents };
        let new = NewBlob {
            bm: self,
            reference: blob.encode(),
            blob,
            referenced: false,
        };
        let payload = blob::payload_per_page(page_size);
        let mut chunks = value.chunks(payload);
        let fill = |run: Extent, bytes: &mut [u8]| -> Result<()> {
            for (page, page_id) in bytes.chunks_exact_mut(page_size).zip(run.page_ids()) {
                let chunk = chunks.next().expect("the extents hold the value");
                page_format::init_header(page, blob::PAGE_TYPE, page_id);
                page_format::set_lsn(page, id);
                let (filled, rest) = page[PAGE_HEADER_SIZE..].split_at_mut(chunk.len());
                filled.copy_from_slice(chunk);
                rest.fill(0);
                page_format::seal(page, page_id);
            }
            Ok(())
        };
        let write = |run: Extent, bytes: &[u8]| {
            self.storage
                .write_at(bytes, run.first * page_size as u64)
                .map_err(|e| Error::io("writing a large value", e))
        };
        pipelined(page_size, &io_runs(&new.blob.extents), fill, write)?;
        if let Some(log) = &self.log {
            log.data_written();
        }
        self.count(Counter::BlobBytesWritten, len);
        Ok(new)
    }

    /// Appends `len` bytes of `blob` from byte `offset` on (within its length) to `out`
    /// (appended, not written over zeroed memory: a fresh buffer of a gigabyte is then touched
    /// once, by the copy that overlaps the reads). The inner error names a page that failed
    /// its check and why: the blob was freed and its pages reused meanwhile, or they are
    /// damaged (the caller tells which); `out` then holds part of the value.
    pub(crate) fn read_blob(
        &self,
        blob: &BlobRef,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<std::result::Result<(), (u64, String)>> {
        debug_assert!(offset + len as u64 <= blob.len);
        if len == 0 {
            return Ok(Ok(()));
        }
        out.reserve_exact(len);
        let page_size = self.page_size();
        let payload = blob::payload_per_page(page_size) as u64;
        let first_page = offset / payload;
        let end_page = (offset + len as u64).div_ceil(payload);
        let wanted = pages_of(&blob.extents, first_page, end_page - first_page);
        let mut at = first_page * payload; // value offset of the next page read
        let mut left = len;
        let read = |run: Extent, bytes: &mut [u8]| {
            self.storage
                .read_at(bytes, run.first * page_size as u64)
                .map_err(|e| Failed::Io(Error::io("reading a large value", e)))
        };
        let copy = |run: Extent, bytes: &[u8]| {
            for (page, page_id) in bytes.chunks_exact(page_size).zip(run.page_ids()) {
                match page_format::verify(page, page_id) {
                    Ok(PageType::Blob) if page_format::lsn(page) == blob.id => {}
                    Ok(PageType::Blob) => {
                        return Err(Failed::Check(page_id, "page of another large value".into()))
                    }
                    Ok(other) => return Err(Failed::Check(page_id, format!("a {other:?} page"))),
                    Err(reason) => return Err(Failed::Check(page_id, reason)),
                }
                let data = &page[PAGE_HEADER_SIZE..];
                let skip = offset.saturating_sub(at) as usize;
                let take = (data.len() - skip).min(left);
                out.extend_from_slice(&data[skip..skip + take]);
                left -= take;
                at += payload;
            }
            Ok(())
        };
        match pipelined(page_size, &io_runs(&wanted), read, copy) {
            Ok(()) => {}
            Err(Failed::Io(error)) => return Err(error),
            Err(Failed::Check(page_id, reason)) => return Ok(Err((page_id, reason))),
        }
        debug_assert_eq!(left, 0);
        self.count(Counter::BlobBytesRead, len as u64);
        Ok(Ok(()))
    }
}

/// Why reading a large value stopped.
enum Failed {
    Io(Error),
    /// A page failed its check (see [`BufferManager::read_blob`]).
    Check(u64, String),
}

thread_local! {
    /// Staging buffers kept for the next large value this thread reads or writes: a fresh
    /// one would cost a page fault per 4 KiB of it every time.
    static STAGING: std::cell::RefCell<Vec<AlignedBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs every run of pages through a staging buffer: `produce` fills it (reading the pages,
/// or sealing them from the value), then `consume` empties it (copying the value out, or
/// writing the pages), in order. With more than one run, `produce` works on a helper thread
/// one buffer ahead, so I/O and copying overlap. Stops at the first error.
fn pipelined<E: Send>(
    page_size: usize,
    runs: &[Extent],
    mut produce: impl FnMut(Extent, &mut [u8]) -> std::result::Result<(), E> + Send,
    mut consume: impl FnMut(Extent, &[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let bytes = |run: Extent| run.pages as usize * page_size;
    let mut buffers = STAGING.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
    buffers.retain(|buffer| buffer.len() == IO_PAGES_MAX * page_size);
    let wanted = if runs.len() > 1 { 2 } else { 1 };
    while buffers.len() < wanted {
        buffers.push(AlignedBuf::new(IO_PAGES_MAX * page_size));
    }
    let outcome = if runs.len() == 1 {
        one_by_one(page_size, runs, &mut buffers[0], &mut produce, &mut consume)
    } else {
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<(Extent, AlignedBuf)>(1);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<AlignedBuf>();
        for buffer in buffers.drain(..) {
            empty_tx.send(buffer).expect("the receiver is here");
        }
        let pipelined = std::thread::scope(|scope| {
            let produce_ahead = &mut produce;
            let spawned = std::thread::Builder::new()
                .name("leankv-blob-io".into())
                .spawn_scoped(scope, move || {
                    let mut produced = Ok(());
                    for &run in runs {
                        // A closed channel: the consumer stopped at an error.
                        let Ok(mut buffer) = empty_rx.recv() else {
                            break;
                        };
                        produced = produce_ahead(run, &mut buffer[..bytes(run)]);
                        if produced.is_err() || full_tx.send((run, buffer)).is_err() {
                            break;
                        }
                    }
                    // The buffers not taken go back with the channel.
                    (produced, empty_rx)
                });
            let Ok(producer) = spawned else {
                return None;
            };
            let mut consumed = Ok(());
            while let Ok((run, buffer)) = full_rx.recv() {
                consumed = consume(run, &buffer[..bytes(run)]);
                _ = empty_tx.send(buffer);
                if consumed.is_err() {
                    break;
                }
            }
            // After an error, the producer finds its channels closed and stops.
            drop((full_rx, empty_tx));
            let (produced, empty_rx) = producer.join().expect("the producer does not panic");
            buffers.extend(empty_rx.try_iter());
            Some(consumed.and(produced))
        });
        pipelined.unwrap_or_else(|| {
            // No thread to be had: one run after the other here (the staging buffers went
            // with the failed thread's channel).
            let mut buffer = AlignedBuf::new(IO_PAGES_MAX * page_size);
            one_by_one(page_size, runs, &mut buffer, &mut produce, &mut consume)
        })
    };
    STAGING.with(|cell| *cell.borrow_mut() = buffers);
    outcome
}

/// Runs each of `runs` through `buffer` in this thread: produced, then consumed.
fn one_by_one<E>(
    page_size: usize,
    runs: &[Extent],
    buffer: &mut [u8],
    produce: &mut impl FnMut(Extent, &mut [u8]) -> std::result::Result<(), E>,
    consume: &mut impl FnMut(Extent, &[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    runs.iter().try_for_each(|&run| {
        let buffer = &mut buffer[..run.pages as usize * page_size];
        produce(run, buffer).and_then(|()| consume(run, buffer))
    })
}

/// The pages `skip..skip + count` of a blob with these extents, as extents.
fn pages_of(extents: &[Extent], mut skip: u64, mut count: u64) -> Vec<Extent> {
    let mut pages = Vec::new();
    for extent in extents {
        if count == 0 {
            break;
        }
        if skip >= extent.pages {
            skip -= extent.pages;
            continue;
        }
        let take = (extent.pages - skip).min(count);
        pages.push(Extent {
            first: extent.first + skip,
            pages: take,
        });
        count -= take;
        skip = 0;
    }
    pages
}

/// The extents cut into runs of `IO_PAGES` pages (the last of an extent up to
/// `IO_PAGES_MAX`): one I/O call each.
fn io_runs(extents: &[Extent]) -> Vec<Extent> {
    let mut runs = Vec::new();
    for extent in extents {
        let mut skip = 0;
        while skip < extent.pages {
            let left = extent.pages - skip;
            let pages = if left <= IO_PAGES_MAX as u64 {
                left
            } else {
                IO_PAGES as u64
            };
            runs.push(Extent {
                first: extent.first + skip,
                pages,
            });
            skip += pages;
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_map_onto_extents() {
        let extents = [
            Extent {
                first: 10,
                pages: 3,
            },
            Extent {
                first: 50,
                pages: 200,
            },
        ];
        assert_eq!(
            pages_of(&extents, 2, 3),
            [
                Extent {
                    first: 12,
                    pages: 1
                },
                Extent {
                    first: 50,
                    pages: 2
                }
            ]
        );
        let runs: Vec<_> = io_runs(&extents)
            .iter()
            .map(|r| (r.first, r.pages))
            .collect();
        assert_eq!(runs, [(10, 3), (50, 64), (114, 64), (178, 72)]);
        let one_mib = Extent {
            first: 7,
            pages: 65,
        };
        assert_eq!(io_runs(&[one_mib]), [one_mib]);
    }
}
