//! Page id allocation: the high-water mark of the page file and the list of freed pages, and
//! how that list is kept on disk (a chain of free-list pages, written at flush and close).
//!
//! On disk the free list is a chain of pages of type `FreeList`, themselves free pages: each
//! holds the id of the next chain page and as many free page ids as fit. The chain's first page
//! and total length are in the superblock.
//!
//! With a write-ahead log, the log describes allocation: an id is freed in the same record that
//! stops referencing it (`free_logged`; handed out again only once its frame is deleted, since
//! until then the page is resident), and a page allocated but not yet described by any record
//! (`unlogged`) counts as free in a checkpoint's snapshot, so a crash before its first record
//! leaks nothing.
//!
//! Invariant: a page id is either below the high-water mark and in use, below it and in the
//! free list, or not yet allocated; never two of these.

use crate::blob::{Extent, MIN_EXTENT_PAGES};
use crate::error::{Error, Result};
use crate::io::page::{self as page_format, PageType, PAGE_HEADER_SIZE};
use crate::io::{AlignedBuf, Storage};
use std::collections::{BTreeMap, VecDeque};

const NEXT_OFFSET: usize = PAGE_HEADER_SIZE;
const COUNT_OFFSET: usize = PAGE_HEADER_SIZE + 8;
const IDS_OFFSET: usize = PAGE_HEADER_SIZE + 16;

/// What [`PageIds::allocate_extents`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExtentAllocation {
    /// The extents, taken.
    Allocated(Vec<Extent>),
    /// Nothing taken: the file would grow while extents freed by records up to this LSN wait
    /// for it to be durable.
    WaitForLog(u64),
}

pub(crate) struct PageIds {
    /// Next never-used page id (page 0 is the superblock).
    next: u64,
    /// Free single pages, taken first by tree pages.
    free: Vec<u64>,
    /// Free runs of consecutive pages (first page, length), coalesced: where large values'
    /// extents come from, and tree pages once `free` is empty.
    runs: BTreeMap<u64, u64>,
    /// With a log: pages allocated that no log record describes yet.
    unlogged: Option<rustc_hash::FxHashSet<u64>>,
    /// With a log: large-value extents allocated that no log record describes yet.
    unlogged_extents: Vec<Extent>,
    /// With a log: pages a logged record freed whose frames are not yet deleted (still
    /// resident, so not yet to be handed out again).
    freeing: rustc_hash::FxHashSet<u64>,
    /// Large-value extents freed by the record ending at the LSN beside them, in log order:
    /// handed out again only once that LSN is durable, because a large value's pages are
    /// written before its record without waiting for the log (see `blob`), and must not land
    /// on pages that a crash could make referenced again.
    released: VecDeque<(u64, Extent)>,
}

impl PageIds {
    pub(crate) fn new(page_count: u64, mut free: Vec<u64>, logged: bool) -> Self {
        // Consecutive free pages become runs again (the lists on disk are flat).
        free.sort_unstable_by(|a, b| b.cmp(a));
        let mut ids = PageIds {
            next: page_count.max(1),
            free: Vec::new(),
            runs: BTreeMap::new(),
            unlogged: logged.then(Default::default),
            unlogged_extents: Vec::new(),
            freeing: Default::default(),
            released: VecDeque::new(),
        };
        while let Some(first) = free.pop() {
            let mut pages = 1;
            while free.last() == Some(&(first + pages)) {
                free.pop();
                pages += 1;
            }
            if pages == 1 {
                ids.free.push(first);
            } else {
                ids.add_run(first, pages);
            }
        }
        ids
    }

    pub(crate) fn allocate(&mut self) -> u64 {
        let page_id = match self.free.pop() {
            Some(page_id) => page_id,
            None => match self.runs.pop_first() {
                Some((first, pages)) => {
                    if pages > 1 {
                        self.runs.insert(first + 1, pages - 1);
                    }
                    first
                }
                None => {
                    self.next += 1;
                    self.next - 1
                }
            },
        };
        if let Some(unlogged) = &mut self.unlogged {
            unlogged.insert(page_id);
        }
        page_id
    }

    /// Extents holding `pages` pages for a large value, at most `max_extents` of them: the
    /// smallest free run that holds the rest, else the largest free run if it is not shorter
    /// than `MIN_EXTENT_PAGES`, else pages from the end of the file. Extents freed by records
    /// up to `durable` (the log's durable LSN) are free again first.
    ///
    /// If the file would grow while extents freed by later records wait (see `released`) and
    /// `may_wait`, takes nothing and returns [`ExtentAllocation::WaitForLog`] with the LSN to
    /// make durable first: overwriting a large value again and again then reuses its space
    /// instead of growing the file by its size each time, at the cost of one sync.
    pub(crate) fn allocate_extents(
        &mut self,
        pages: u64,
        max_extents: usize,
        durable: u64,
        may_wait: bool,
    ) -> ExtentAllocation {
        debug_assert!(pages > 0 && max_extents > 0);
        self.reclaim(durable);
        let (from_runs, left) = self.plan_extents(pages, max_extents);
        if let (true, true, Some(&(lsn, _))) = (left > 0, may_wait, self.released.back()) {
            return ExtentAllocation::WaitForLog(lsn);
        }
        let mut extents = Vec::with_capacity(from_runs.len() + 1);
        for run in from_runs {
            let len = self.runs.remove(&run.first).expect("a planned run is free");
            if run.pages < len {
                self.runs.insert(run.first + run.pages, len - run.pages);
            }
            extents.push(run);
        }
        if left > 0 {
            extents.push(Extent {
                first: self.next,
                pages: left,
            });
            self.next += left;
        }
        if self.unlogged.is_some() {
            self.unlogged_extents.extend(&extents);
        }
        ExtentAllocation::Allocated(extents)
    }

    /// The parts of free runs that `allocate_extents` takes for `pages` pages (see there), and
    /// how many pages are left to take from the end of the file. Takes nothing yet.
    fn plan_extents(&self, pages: u64, max_extents: usize) -> (Vec<Extent>, u64) {
        let mut taken: Vec<Extent> = Vec::new();
        let mut left = pages;
        while left > 0 && taken.len() + 1 < max_extents {
            let untaken = self
                .runs
                .iter()
                .map(|(&first, &pages)| Extent { first, pages })
                .filter(|run| taken.iter().all(|t| t.first != run.first));
            let fitting = untaken
                .clone()
                .filter(|run| run.pages >= left)
                .min_by_key(|run| run.pages);
            let largest = || {
                untaken
                    .max_by_key(|run| run.pages)
                    .filter(|run| run.pages >= MIN_EXTENT_PAGES)
            };
            let Some(run) = fitting.or_else(largest) else {
                break;
            };
            let take = run.pages.min(left);
            taken.push(Extent {
                first: run.first,
                pages: take,
            });
            left -= take;
        }
        (taken, left)
    }

    /// A log record now describes the large value in `extents`.
    pub(crate) fn extents_logged(&mut self, extents: &[Extent]) {
        self.unlogged_extents
            .retain(|extent| !extents.contains(extent));
    }

    /// Frees the extents of a large value that no record ever described (its write failed, or
    /// its operation did not happen).
    pub(crate) fn free_unlogged_extents(&mut self, extents: &[Extent]) {
        self.extents_logged(extents);
        for extent in extents {
            self.add_run(extent.first, extent.pages);
        }
    }

    /// Frees the extents of a large value that the record ending at `lsn` stopped
    /// referencing: free at once for a checkpoint's snapshot, handed out again once `lsn` is
    /// durable (see `released`). Without a log (`lsn` 0) free at once.
    pub(crate) fn release_extents(&mut self, extents: &[Extent], lsn: u64) {
        if self.unlogged.is_none() {
            for extent in extents {
                self.add_run(extent.first, extent.pages);
            }
            return;
        }
        debug_assert!(self.released.back().is_none_or(|&(last, _)| last <= lsn));
        self.released
            .extend(extents.iter().map(|&extent| (lsn, extent)));
    }

    /// Frees the released extents whose records are durable up to `durable`.
    fn reclaim(&mut self, durable: u64) {
        while let Some(&(lsn, extent)) = self.released.front() {
            if lsn > durable {
                break;
            }
            self.released.pop_front();
            self.add_run(extent.first, extent.pages);
        }
    }

    /// Adds a free run, joined with the runs right before and after it.
    fn add_run(&mut self, mut first: u64, mut pages: u64) {
        debug_assert!(self.is_allocated(first) && self.is_allocated(first + pages - 1));
        if let Some((&before, &len)) = self.runs.range(..first).next_back() {
            debug_assert!(before + len <= first, "run {first}+{pages} freed twice");
            if before + len == first {
                self.runs.remove(&before);
                first = before;
                pages += len;
            }
        }
        if let Some(len) = self.runs.remove(&(first + pages)) {
            pages += len;
        }
        self.runs.insert(first, pages);
    }

    /// A log record now describes `page_id`.
    pub(crate) fn logged(&mut self, page_id: u64) {
        if let Some(unlogged) = &mut self.unlogged {
            unlogged.remove(&page_id);
        }
    }

    /// Records that a logged record frees `page_id` (see the module notes). It counts as free
    /// in checkpoint snapshots at once, but is handed out again only once its frame is deleted
    /// ([`Self::free_deleted`]): until then the page is still resident.
    pub(crate) fn free_logged(&mut self, page_id: u64) {
        self.logged(page_id);
        let first = self.freeing.insert(page_id);
        debug_assert!(first, "page {page_id} freed twice");
    }

    /// Frees `page_id`, which nothing references and no frame holds, by a logged record.
    pub(crate) fn free_unreferenced(&mut self, page_id: u64) {
        self.logged(page_id);
        self.free(page_id);
    }

    /// Frees `page_id` when its frame is deleted: without a log always; with one, if a logged
    /// record freed it or no record ever described it.
    pub(crate) fn free_deleted(&mut self, page_id: u64) {
        let described_free = self.freeing.remove(&page_id);
        let never_logged = self
            .unlogged
            .as_mut()
            .is_none_or(|unlogged| unlogged.remove(&page_id));
        debug_assert!(
            described_free || never_logged,
            "page {page_id} deleted without a record freeing it"
        );
        self.free(page_id);
    }

    /// Page count and free pages for a checkpoint record: pages being freed and pages no
    /// record describes yet count as free.
    pub(crate) fn snapshot_for_log(&self) -> (u64, Vec<u64>) {
        let mut free = self.free_pages();
        free.extend(self.unlogged.iter().flatten());
        free.extend(&self.freeing);
        free.extend(self.unlogged_extents.iter().flat_map(|e| e.page_ids()));
        (self.next, free)
    }

    pub(crate) fn free(&mut self, page_id: u64) {
        debug_assert!(self.is_allocated(page_id));
        debug_assert!(!self.free.contains(&page_id), "page {page_id} freed twice");
        self.free.push(page_id);
    }

    pub(crate) fn is_allocated(&self, page_id: u64) -> bool {
        page_id > 0 && page_id < self.next
    }

    pub(crate) fn page_count(&self) -> u64 {
        self.next
    }

    /// The free pages: single, in runs, and in released extents (free once the log is
    /// durable, as it is at a clean close).
    pub(crate) fn free_pages(&self) -> Vec<u64> {
        let mut free = self.free.clone();
        free.extend(
            self.runs
                .iter()
                .flat_map(|(&first, &pages)| first..first + pages),
        );
        free.extend(
            self.released
                .iter()
                .flat_map(|(_, extent)| extent.page_ids()),
        );
        free
    }

    /// Pages a logged record freed that are not handed out yet (see [`Self::free_logged`]).
    pub(crate) fn being_freed(&self) -> impl Iterator<Item = u64> + '_ {
        self.freeing.iter().copied()
    }
}

fn ids_per_page(page_size: usize) -> usize {
    (page_size - IDS_OFFSET) / 8
}

/// Writes `free` as a chain of free-list pages taken from `free` itself; returns the first
/// page of the chain (0 when the list is empty).
pub(crate) fn save_free_list(storage: &dyn Storage, page_size: usize, free: &[u64]) -> Result<u64> {
    let per_page = ids_per_page(page_size);
    // Every chain page stores up to `per_page` ids of the pages that follow it in `free`.
    let mut head = 0u64;
    let mut chunks: Vec<&[u64]> = Vec::new();
    let mut rest = free;
    while let Some((_, tail)) = rest.split_first() {
        let take = tail.len().min(per_page);
        chunks.push(&rest[..1 + take]);
        rest = &tail[take..];
    }
    let mut page = AlignedBuf::new(page_size);
    for chunk in chunks.iter().rev() {
        let (trunk, ids) = chunk.split_first().expect("chunks are non-empty");
        page.fill(0);
        page_format::init_header(&mut page, PageType::FreeList, *trunk);
        page[NEXT_OFFSET..NEXT_OFFSET + 8].copy_from_slice(&head.to_le_bytes());
        page[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&(ids.len() as u32).to_le_bytes());
        for (i, id) in ids.iter().enumerate() {
            let at = IDS_OFFSET + 8 * i;
            page[at..at + 8].copy_from_slice(&id.to_le_bytes());
        }
        page_format::seal(&mut page, *trunk);
        storage
            .write_at(&page, trunk * page_size as u64)
            .map_err(|e| Error::io("writing the free-page list", e))?;
        head = *trunk;
    }
    Ok(head)
}

/// Reads the free-list chain starting at `head`, which must hold `expected` ids in all.
pub(crate) fn load_free_list(
    storage: &dyn Storage,
    page_size: usize,
    head: u64,
    expected: u64,
    page_count: u64,
) -> Result<Vec<u64>> {
    // `expected` is below `page_count`, which the file's length bounds; still, a damaged
    // count should fail by the check below, not by a huge allocation.
    let mut free = Vec::with_capacity(expected.min(1 << 20) as usize);
    let mut page = AlignedBuf::new(page_size);
    let mut next = head;
    while next != 0 {
        if free.len() as u64 >= expected || next >= page_count {
            return Err(Error::corruption(
                next,
                "free-page list longer than recorded",
            ));
        }
        storage
            .read_at(&mut page, next * page_size as u64)
            .map_err(|e| Error::io("reading the free-page list", e))?;
        match page_format::verify(&page, next) {
            Ok(PageType::FreeList) => {}
            Ok(other) => {
                return Err(Error::corruption(
                    next,
                    format!("expected a free-list page, found {other:?}"),
                ))
            }
            Err(reason) => return Err(Error::corruption(next, reason)),
        }
        free.push(next);
        let count = u32::from_le_bytes(page[COUNT_OFFSET..COUNT_OFFSET + 4].try_into().unwrap());
        if count as usize > ids_per_page(page_size) {
            return Err(Error::corruption(next, "free-list page count out of range"));
        }
        for i in 0..count as usize {
            let at = IDS_OFFSET + 8 * i;
            let id = u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
            if id == 0 || id >= page_count {
                return Err(Error::corruption(
                    next,
                    format!("free page id {id} out of range"),
                ));
            }
            free.push(id);
        }
        next = u64::from_le_bytes(page[NEXT_OFFSET..NEXT_OFFSET + 8].try_into().unwrap());
    }
    let mut sorted = free.clone();
    sorted.sort_unstable();
    if let Some(twice) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::corruption(
            head,
            format!("free-page list holds page {} twice", twice[0]),
        ));
    }
    if free.len() as u64 != expected {
        return Err(Error::corruption(
            head,
            format!(
                "free-page list holds {} pages, superblock says {expected}",
                free.len()
            ),
        ));
    }
    Ok(free)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;

    /// Extents allocated without waiting for the log.
    fn taken(ids: &mut PageIds, pages: u64, max_extents: usize, durable: u64) -> Vec<Extent> {
        match ids.allocate_extents(pages, max_extents, durable, false) {
            ExtentAllocation::Allocated(extents) => extents,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn free_list_roundtrips_through_a_chain_of_its_own_pages() {
        let storage = MemoryStorage::new();
        let page_size = 4096;
        for len in [0usize, 1, 2, 500, 510, 511, 512, 2000] {
            let free: Vec<u64> = (0..len as u64).map(|i| 10 + i * 3).collect();
            let page_count = 10 + 3 * len as u64 + 1;
            let head = save_free_list(&storage, page_size, &free).unwrap();
            let mut loaded =
                load_free_list(&storage, page_size, head, free.len() as u64, page_count).unwrap();
            loaded.sort_unstable();
            assert_eq!(loaded, free, "length {len}");
        }
    }

    #[test]
    fn a_page_freed_by_a_record_is_reused_only_once_its_frame_is_deleted() {
        let mut ids = PageIds::new(5, Vec::new(), true);
        let page = ids.allocate();
        ids.logged(page);
        ids.free_logged(page);
        // Free for a checkpoint's snapshot at once, not for allocation (still resident).
        assert!(ids.snapshot_for_log().1.contains(&page));
        assert_ne!(ids.allocate(), page);
        ids.free_deleted(page);
        assert_eq!(ids.allocate(), page);
    }

    #[test]
    fn large_values_take_runs_that_are_free_and_durably_released() {
        // Pages 10..40 free in one run (the flat list from disk is coalesced), 50 alone.
        let free: Vec<u64> = (10..40).chain([50]).collect();
        let mut ids = PageIds::new(100, free, true);
        let fits = taken(&mut ids, 20, 8, 0);
        assert_eq!(
            fits,
            [Extent {
                first: 10,
                pages: 20
            }]
        );
        // Too long for the run left (10 pages, below the minimum extent): the file grows.
        let grown = taken(&mut ids, 30, 8, 0);
        assert_eq!(
            grown,
            [Extent {
                first: 100,
                pages: 30
            }]
        );
        ids.extents_logged(&fits);
        ids.extents_logged(&grown);
        // Released at LSN 500: free in a checkpoint's snapshot at once, reused once durable.
        ids.release_extents(&fits, 500);
        assert!(ids.snapshot_for_log().1.contains(&15));
        assert_eq!(taken(&mut ids, 20, 8, 499)[0].first, 130);
        let reused = taken(&mut ids, 30, 8, 500);
        // The released 20 pages joined the free 10 after them: one run of 30.
        assert_eq!(
            reused,
            [Extent {
                first: 10,
                pages: 30
            }]
        );
        // Tree pages take single free pages first, then runs.
        assert_eq!(ids.allocate(), 50);
        ids.free_unlogged_extents(&reused);
        assert_eq!(ids.allocate(), 10);
        assert_eq!(ids.allocate(), 11);
    }

    #[test]
    fn a_value_that_would_grow_the_file_waits_for_released_extents() {
        // Two free runs of 2 pages (4 in all, but neither holds 3 pages, and both are shorter
        // than an extent taken in parts) and a released extent of 3 pages whose record ends
        // at LSN 700.
        let mut ids = PageIds::new(20, vec![4, 5, 7, 8], true);
        let value = Extent {
            first: 10,
            pages: 3,
        };
        ids.release_extents(&[value], 700);
        let wait = ids.allocate_extents(3, 8, 600, true);
        assert_eq!(wait, ExtentAllocation::WaitForLog(700));
        // Nothing was taken meanwhile; once LSN 700 is durable the released extent is reused.
        assert_eq!(
            ids.allocate_extents(3, 8, 700, true),
            ExtentAllocation::Allocated(vec![value])
        );
        // Nothing left to wait for: the file grows.
        assert_eq!(
            ids.allocate_extents(3, 8, 700, true),
            ExtentAllocation::Allocated(vec![Extent {
                first: 20,
                pages: 3
            }])
        );
    }

    #[test]
    fn a_value_longer_than_any_run_is_spread_over_few_extents() {
        // Runs of 16, 32 and 3 pages: the large ones are taken, the short one is not.
        let free: Vec<u64> = (10..26).chain(30..62).chain(70..73).collect();
        let mut ids = PageIds::new(100, free, false);
        let extents = taken(&mut ids, 60, 8, 0);
        assert_eq!(
            extents,
            [
                Extent {
                    first: 30,
                    pages: 32
                },
                Extent {
                    first: 10,
                    pages: 16
                },
                Extent {
                    first: 100,
                    pages: 12
                }
            ]
        );
        // At most `max_extents`: the rest comes from the end of the file in one piece.
        let mut ids = PageIds::new(100, (10..26).chain(30..62).collect(), false);
        assert_eq!(
            taken(&mut ids, 60, 2, 0),
            [
                Extent {
                    first: 30,
                    pages: 32
                },
                Extent {
                    first: 100,
                    pages: 28
                }
            ]
        );
    }

    #[test]
    fn allocation_prefers_freed_pages() {
        let mut ids = PageIds::new(5, vec![2], false);
        assert_eq!(ids.allocate(), 2);
        assert_eq!(ids.allocate(), 5);
        ids.free(3);
        assert_eq!(ids.allocate(), 3);
        assert!(ids.is_allocated(5) && !ids.is_allocated(6) && !ids.is_allocated(0));
    }
}
