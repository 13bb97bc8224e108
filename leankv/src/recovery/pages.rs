//! The pages redo rebuilds, held in memory up to a budget and written to the page file beyond
//! it.
//!
//! Redo rebuilds every page changed since the checkpoint. Held all in memory, they would take
//! as much as the log since the checkpoint held in page images; instead, past the budget (the
//! pool's size) the least recently changed half is written to its place in the page file and
//! read back when a later record changes it again. Writing a rebuilt page before recovery
//! ends is safe: every page changed since the checkpoint is rebuilt from an image in the log at
//! any later recovery, whatever the file holds (see the module notes of `recovery`), and the
//! log it was rebuilt from was synced before redo began.
//!
//! A page written early and freed by a later record keeps that stale image on disk. That is
//! harmless because the only pages the page file holds without an image in the log, large
//! values' pages, never include such a page: a tree page freed since the checkpoint goes to the
//! single free pages, and large values take only runs of free pages (formed at open, before its
//! checkpoint) and extents other large values freed. `Redo` asserts it.
//!
//! Invariant: a page is resident or spilled (written, not in memory) or neither, never both.

use crate::error::{Error, Result};
use crate::io::page as page_format;
use crate::io::{AlignedBuf, Storage};
use std::collections::{HashMap, HashSet};

/// Fewest pages held in memory, whatever the budget (a split holds three at once).
const MIN_RESIDENT: usize = 16;
/// Most bytes of pages with consecutive ids written as one.
const RUN_BYTES: usize = 1 << 20;

struct Resident {
    page: AlignedBuf,
    /// When a record last changed it (a tick of `RedoPages::clock`).
    used: u64,
}

pub(super) struct RedoPages<'a> {
    storage: &'a dyn Storage,
    page_size: usize,
    resident: HashMap<u64, Resident>,
    spilled: HashSet<u64>,
    capacity: usize,
    clock: u64,
    /// Pages written to the page file before the end (each time one is spilled).
    pub(super) spill_writes: u64,
    /// Pages written early and freed since: their stale images stay on disk.
    #[cfg(debug_assertions)]
    stale: HashSet<u64>,
}

impl<'a> RedoPages<'a> {
    pub(super) fn new(storage: &'a dyn Storage, page_size: usize, memory: usize) -> Self {
        RedoPages {
            storage,
            page_size,
            resident: HashMap::new(),
            spilled: HashSet::new(),
            capacity: (memory / page_size).max(MIN_RESIDENT),
            clock: 0,
            spill_writes: 0,
            #[cfg(debug_assertions)]
            stale: HashSet::new(),
        }
    }

    /// Pages rebuilt so far.
    pub(super) fn len(&self) -> usize {
        self.resident.len() + self.spilled.len()
    }

    pub(super) fn contains(&self, page_id: u64) -> bool {
        self.resident.contains_key(&page_id) || self.spilled.contains(&page_id)
    }

    /// Makes `page` the page's current state.
    pub(super) fn insert(&mut self, page_id: u64, page: AlignedBuf) -> Result<()> {
        debug_assert_eq!(page.len(), self.page_size);
        self.spilled.remove(&page_id);
        self.clock += 1;
        let used = self.clock;
        self.resident.insert(page_id, Resident { page, used });
        if self.resident.len() > self.capacity {
            self.spill()?;
        }
        Ok(())
    }

    /// Forgets the page (it was freed).
    pub(super) fn remove(&mut self, page_id: u64) {
        self.resident.remove(&page_id);
        let _written_early = self.spilled.remove(&page_id);
        #[cfg(debug_assertions)]
        if _written_early {
            self.stale.insert(page_id);
        }
    }

    /// Whether the page was written early and then freed (see the module notes).
    #[cfg(debug_assertions)]
    pub(super) fn is_stale(&self, page_id: u64) -> bool {
        self.stale.contains(&page_id)
    }

    /// Takes the page out (to be inserted again).
    pub(super) fn take(&mut self, page_id: u64) -> Result<Option<AlignedBuf>> {
        if let Some(resident) = self.resident.remove(&page_id) {
            return Ok(Some(resident.page));
        }
        if self.spilled.remove(&page_id) {
            return self.read_back(page_id).map(Some);
        }
        Ok(None)
    }

    /// The page, to change it.
    pub(super) fn get_mut(&mut self, page_id: u64) -> Result<Option<&mut AlignedBuf>> {
        if self.spilled.contains(&page_id) {
            let page = self.read_back(page_id)?;
            self.insert(page_id, page)?;
        }
        self.clock += 1;
        let clock = self.clock;
        Ok(self.resident.get_mut(&page_id).map(|resident| {
            resident.used = clock;
            &mut resident.page
        }))
    }

    /// Writes the resident pages to the page file; returns every page rebuilt.
    pub(super) fn write_all(mut self) -> Result<Vec<u64>> {
        let mut ids: Vec<u64> = self.resident.keys().copied().collect();
        ids.sort_unstable();
        self.write_out(&ids)?;
        ids.extend(self.spilled);
        ids.sort_unstable();
        Ok(ids)
    }

    /// Writes out the least recently changed half of the resident pages.
    fn spill(&mut self) -> Result<()> {
        let mut ages: Vec<(u64, u64)> = self
            .resident
            .iter()
            .map(|(&page_id, resident)| (resident.used, page_id))
            .collect();
        let half = ages.len() / 2;
        ages.select_nth_unstable(half);
        let mut oldest: Vec<u64> = ages[..half].iter().map(|&(_, page_id)| page_id).collect();
        oldest.sort_unstable();
        self.write_out(&oldest)?;
        self.spill_writes += oldest.len() as u64;
        self.spilled.extend(oldest);
        Ok(())
    }

    /// Writes the resident pages `ids` (sorted) and drops them from memory; pages with
    /// consecutive ids go out in one write.
    fn write_out(&mut self, ids: &[u64]) -> Result<()> {
        debug_assert!(ids.is_sorted());
        let run_pages = (RUN_BYTES / self.page_size).max(1);
        let mut run = AlignedBuf::new(run_pages * self.page_size);
        let (mut first, mut len) = (0, 0);
        for &page_id in ids {
            if len > 0 && (page_id != first + len as u64 || len == run_pages) {
                self.write_run(first, &run[..len * self.page_size])?;
                len = 0;
            }
            if len == 0 {
                first = page_id;
            }
            let mut page = self.resident.remove(&page_id).expect("resident").page;
            page_format::seal(&mut page, page_id);
            run[len * self.page_size..(len + 1) * self.page_size].copy_from_slice(&page);
            len += 1;
        }
        if len > 0 {
            self.write_run(first, &run[..len * self.page_size])?;
        }
        Ok(())
    }

    fn write_run(&self, first: u64, pages: &[u8]) -> Result<()> {
        self.storage
            .write_at(pages, offset(first, self.page_size)?)
            .map_err(|e| Error::io("writing recovered pages", e))
    }

    fn read_back(&self, page_id: u64) -> Result<AlignedBuf> {
        let mut page = AlignedBuf::new(self.page_size);
        self.storage
            .read_at(&mut page, offset(page_id, self.page_size)?)
            .map_err(|e| Error::io("reading back a recovered page", e))?;
        page_format::verify(&page, page_id).map_err(|reason| {
            Error::corruption(
                page_id,
                format!("a page recovery wrote read back: {reason}"),
            )
        })?;
        Ok(page)
    }
}

/// The page's offset in the page file.
pub(super) fn offset(page_id: u64, page_size: usize) -> Result<u64> {
    page_id
        .checked_mul(page_size as u64)
        .filter(|&offset| offset <= i64::MAX as u64)
        .ok_or_else(|| {
            Error::corruption(page_id, "write-ahead log: a page id beyond any file offset")
        })
}
