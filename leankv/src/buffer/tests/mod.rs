//! Buffer-manager tests on a structure of their own: one root page (type `BTreeInner`, a
//! count at byte 24 and child swips from byte 32) whose children are leaf pages holding a
//! page number, a version and a fill pattern derived from both.

use super::*;
use crate::io::{FaultKind, FaultyStorage, MemoryStorage};
use policy::Lean;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Barrier;
use std::time::Duration;

const PAGE: usize = 4096;
const COUNT_AT: usize = 24;
const SWIPS_AT: usize = 32;
const PATTERN_AT: usize = 40;

fn children(page: PageView<'_>, visit: &mut dyn FnMut(usize) -> bool) {
    let count = usize::from(page.u16(COUNT_AT)).min((PAGE - SWIPS_AT) / 8);
    for index in 0..count {
        if !visit(SWIPS_AT + 8 * index) {
            return;
        }
    }
}

fn pattern_byte(child: u64, version: u64) -> u8 {
    (child.wrapping_mul(31).wrapping_add(version.wrapping_mul(7)) + 1) as u8
}

struct Fixture {
    bm: Arc<BufferManager<Lean>>,
    root: FrameId,
}

mod ring;

fn manager(
    storage: Arc<dyn Storage>,
    frames: u32,
    writer: bool,
    prefetch_depth: usize,
) -> Arc<BufferManager<Lean>> {
    let config = BufferConfig {
        page_size: PAGE,
        frames,
        cooling_fraction: 0.1,
        prefault: false,
        background_writer: writer,
        pool_file: None,
        prefetch_depth,
        generation: 1,
    };
    BufferManager::new(
        storage,
        &config,
        &[PageKind {
            page_type: PageType::BTreeInner,
            children: Some(children),
            check: None,
            check_child: None,
            free_gap: None,
        }],
        1,
        Vec::new(),
        None,
    )
    .unwrap()
}

impl Fixture {
    fn new(storage: Arc<dyn Storage>, frames: u32, child_count: u64, writer: bool) -> Fixture {
        Fixture::reading_ahead(storage, frames, child_count, writer, 0)
    }

    /// A fixture whose buffer manager reads ahead up to `prefetch_depth` pages at a time.
    fn reading_ahead(
        storage: Arc<dyn Storage>,
        frames: u32,
        child_count: u64,
        writer: bool,
        prefetch_depth: usize,
    ) -> Fixture {
        let bm = manager(storage, frames, writer, prefetch_depth);
        let root = bm
            .run(|_| Ok(bm.allocate_page(PageType::BTreeInner, None)?.0))
            .unwrap();
        let fixture = Fixture { bm, root };
        for child in 0..child_count {
            fixture.add_child(child).unwrap();
        }
        fixture
    }

    fn add_child(&self, child: u64) -> Result<()> {
        let bm = &self.bm;
        bm.run(|_| {
            let (frame, mut guard) = bm.allocate_page(PageType::BTreeLeaf, Some(self.root))?;
            write_payload(&mut bm.page_mut(frame, &mut guard), child, 0);
            drop(guard);
            let mut root_guard = bm.frame(self.root).latch.lock_exclusive();
            let mut root = bm.page_mut(self.root, &mut root_guard);
            let count = root.view().u16(COUNT_AT);
            root.set_u64(
                SWIPS_AT + 8 * usize::from(count),
                Swip::swizzled_word(frame),
            );
            root.set_u16(COUNT_AT, count + 1);
            bm.frame(self.root).set_dirty(true);
            Ok(())
        })
    }

    /// Reads child `index`, checking its pattern; returns its version. With `write`, bumps
    /// the version under the exclusive latch.
    fn access(&self, index: u64, write: bool) -> Result<u64> {
        let bm = &self.bm;
        bm.run(|_| {
            let root_latch = &bm.frame(self.root).latch;
            let root_version = root_latch.optimistic()?;
            let offset = SWIPS_AT + 8 * index as usize;
            let word = bm.page(self.root).u64(offset);
            root_latch.validate(root_version)?;
            let frame = match Swip::decode(word, bm.frame_count()) {
                Some(SwipTarget::Frame(frame)) => frame,
                Some(SwipTarget::Page(page_id)) => {
                    return Err(Restart::Swizzle {
                        frame: self.root,
                        version: root_version,
                        offset: offset as u32,
                        page_id,
                    })
                }
                None => panic!("bad swip"),
            };
            let latch = &bm.frame(frame).latch;
            let version = latch.optimistic()?;
            root_latch.validate(root_version)?;
            let page = bm.page(frame);
            let (child, page_version) = (page.u64(PAGE_HEADER_END), page.u64(PAGE_HEADER_END + 8));
            let intact = page
                .bytes(PATTERN_AT, PAGE - PATTERN_AT)
                .iter()
                .all(|&b| b == pattern_byte(child, page_version));
            latch.validate(version)?;
            assert_eq!(child, index, "child page holds another page's data");
            assert!(intact, "page {index} pattern damaged");
            if write {
                let mut guard = latch.try_upgrade(version)?;
                write_payload(&mut bm.page_mut(frame, &mut guard), index, page_version + 1);
                bm.frame(frame).set_dirty(true);
                return Ok(page_version + 1);
            }
            Ok(page_version)
        })
    }

    fn child_frame(&self, index: u64) -> Option<FrameId> {
        let word = self.bm.page(self.root).u64(SWIPS_AT + 8 * index as usize);
        match Swip::decode(word, self.bm.frame_count()) {
            Some(SwipTarget::Frame(frame)) => Some(frame),
            _ => None,
        }
    }

    fn counter(&self, counter: Counter) -> u64 {
        self.bm.counters()[counter as usize]
    }

    /// Unswizzles child `index`, writes it and evicts it, so its next access reads the disk.
    fn push_out(&self, index: u64) {
        let frame = self.child_frame(index).expect("child is hot");
        assert!(self.bm.try_unswizzle(frame, true));
        self.bm.write_back(frame, true).unwrap();
        for _ in 0..100 {
            if self.bm.frame(frame).state() == FrameState::Free {
                return;
            }
            self.bm.evict_batch().unwrap();
        }
        panic!("child {index} was never evicted");
    }
}

const PAGE_HEADER_END: usize = page_format::PAGE_HEADER_SIZE;

fn write_payload(page: &mut PageMut<'_>, child: u64, version: u64) {
    page.set_u64(PAGE_HEADER_END, child);
    page.set_u64(PAGE_HEADER_END + 8, version);
    page.set_bytes(
        PATTERN_AT,
        &[pattern_byte(child, version); PAGE - PATTERN_AT],
    );
}

#[test]
fn cooling_page_is_swizzled_again_without_io() {
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), 32, 2, false);
    let frame = fixture.child_frame(1).unwrap();
    assert!(fixture.bm.try_unswizzle(frame, true));
    assert_eq!(fixture.bm.frame(frame).state(), FrameState::Cooling);
    assert_eq!(fixture.child_frame(1), None, "swip is unswizzled");
    assert_eq!(fixture.access(1, false).unwrap(), 0);
    assert_eq!(
        fixture.child_frame(1),
        Some(frame),
        "same frame, swizzled again"
    );
    assert_eq!(fixture.bm.frame(frame).state(), FrameState::Hot);
    assert_eq!(fixture.counter(Counter::PageReads), 0);
    assert_eq!(fixture.counter(Counter::CoolingHits), 1);
}

#[test]
fn background_writes_leave_the_young_half_of_the_cooling_stage_dirty() {
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), 64, 8, false);
    let frames: Vec<FrameId> = (0..8).map(|i| fixture.child_frame(i).unwrap()).collect();
    for &frame in &frames {
        assert!(fixture.bm.frame(frame).is_dirty());
        assert!(fixture.bm.try_unswizzle(frame, true));
    }
    assert_eq!(fixture.bm.write_cooling_pages(64), 4);
    let dirty: Vec<bool> = frames
        .iter()
        .map(|&frame| fixture.bm.frame(frame).is_dirty())
        .collect();
    assert_eq!(
        dirty,
        [false, false, false, false, true, true, true, true],
        "the four oldest are written, the four youngest wait"
    );
    assert_eq!(fixture.counter(Counter::BackgroundWrites), 4);
}

#[test]
fn parents_are_never_unswizzled_before_their_children() {
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), 32, 3, false);
    // The root has no parent; choosing it must pick a child instead, never the root.
    for _ in 0..3 {
        assert!(fixture.bm.try_unswizzle(fixture.root, true));
    }
    assert_eq!(fixture.bm.frame(fixture.root).state(), FrameState::Hot);
    assert!((0..3).all(|i| fixture.child_frame(i).is_none()));
    assert!(
        !fixture.bm.try_unswizzle(fixture.root, true),
        "roots stay hot"
    );
}

/// Reads through storage that sleeps, so that all threads fault while the read is in flight.
struct SlowStorage(MemoryStorage);

impl Storage for SlowStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_millis(50));
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.0.extend_to(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn shrink_to(&self, len: u64) -> std::io::Result<()> {
        self.0.shrink_to(len)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn mode(&self) -> IoMode {
        IoMode::Memory
    }
}

#[test]
fn concurrent_faults_on_one_page_cause_one_read() {
    let fixture = Arc::new(Fixture::new(
        Arc::new(SlowStorage(MemoryStorage::new())),
        32,
        1,
        false,
    ));
    fixture.push_out(0);
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (fixture, barrier) = (fixture.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                fixture.access(0, false).unwrap()
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), 0);
    }
    assert_eq!(fixture.counter(Counter::PageReads), 1);
    assert!(fixture.counter(Counter::ReadWaits) >= 1);
}

#[test]
fn a_free_frame_probed_by_random_cooling_is_allocated_once_the_probe_lets_go() {
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), 32, 1, false);
    let bm = fixture.bm.clone();
    // Random cooling holds a shared latch on whatever frame it drew, free ones too, until it
    // sees the state; hold one on every frame an allocation could take next.
    let (probing, wait_probing) = std::sync::mpsc::channel();
    let released = Arc::new(AtomicBool::new(false));
    let prober = {
        let (bm, released) = (bm.clone(), released.clone());
        std::thread::spawn(move || {
            let unused = bm.fresh.load(Ordering::Acquire)..bm.frame_count();
            let probes: Vec<_> = unused
                .map(|frame| bm.frame(frame).latch.lock_shared())
                .collect();
            probing.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            released.store(true, Ordering::Release);
            drop(probes);
        })
    };
    wait_probing.recv().unwrap();
    fixture.add_child(1).unwrap();
    assert!(
        released.load(Ordering::Acquire),
        "allocated a frame someone held"
    );
    prober.join().unwrap();
    assert_eq!(fixture.access(1, false).unwrap(), 0);
}

/// Whether this kernel can populate memory ahead (Linux 5.14 on).
fn can_populate(bm: &BufferManager<Lean>) -> bool {
    match bm.pool.populate(0..1) {
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => false,
        done => {
            done.unwrap();
            true
        }
    }
}

#[test]
fn populating_keeps_a_window_of_unused_frames_ahead_while_the_pool_grows() {
    let frames = 64;
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), frames, 1, false);
    let bm = &fixture.bm;
    if !can_populate(bm) {
        return;
    }
    // A pool this small populates an eighth of itself ahead, topped up when half is used.
    let window = frames / 8;
    let fresh = || bm.fresh.load(Ordering::Acquire);
    let mut child = 1;
    let mut grow = |until: &dyn Fn() -> bool| {
        while !until() {
            child += 1;
            fixture.add_child(child).unwrap();
        }
    };
    let mut state = bm.populate_from_here();
    bm.populate_ahead(&mut state);
    assert_eq!(state.populated, fresh(), "not while the pool does not grow");
    let used = fresh();
    grow(&|| fresh() > used);
    bm.populate_ahead(&mut state);
    assert_eq!(state.populated, fresh() + window);
    let (used, populated) = (fresh(), state.populated);
    grow(&|| fresh() > used);
    bm.populate_ahead(&mut state);
    assert_eq!(state.populated, populated, "nothing to do yet");
    grow(&|| state.populated - fresh() <= window / 2);
    bm.populate_ahead(&mut state);
    assert_eq!(
        state.populated,
        fresh() + window,
        "the window moved with the pool"
    );
    grow(&|| fresh() + window >= frames);
    bm.populate_ahead(&mut state);
    assert_eq!(state.populated, frames, "never past the pool");
}

#[test]
fn concurrent_evictors_fill_the_cooling_stage_no_further_than_its_target() {
    let frames = 256;
    let fixture = Fixture::new(
        Arc::new(MemoryStorage::new()),
        frames,
        u64::from(frames) - 1,
        false,
    );
    let bm = &fixture.bm;
    assert_eq!(bm.fresh.load(Ordering::Acquire), frames, "the pool is full");
    let threads = 8;
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                barrier.wait();
                bm.evict_batch().unwrap();
            });
        }
    });
    assert!(
        fixture.counter(Counter::Unswizzles) > 0,
        "eviction cooled nothing"
    );
    let cooling = bm.cooling.lock().len();
    assert!(
        cooling <= bm.cooling_target,
        "{threads} evictors left {cooling} pages cooling for a target of {}",
        bm.cooling_target
    );
}

#[test]
fn frame_is_not_reused_while_a_reader_is_inside_its_epoch() {
    let fixture = Fixture::new(Arc::new(MemoryStorage::new()), 32, 2, false);
    let frame = fixture.child_frame(0).unwrap();
    let (entered, wait_entered) = std::sync::mpsc::channel();
    let (release, wait_release) = std::sync::mpsc::channel::<()>();
    let epochs = fixture.bm.epochs.clone();
    let reader = std::thread::spawn(move || {
        let _inside = epochs.pin();
        entered.send(()).unwrap();
        wait_release.recv().unwrap();
    });
    wait_entered.recv().unwrap();
    assert!(fixture.bm.try_unswizzle(frame, true));
    fixture.bm.write_back(frame, true).unwrap();
    for _ in 0..20 {
        fixture.bm.evict_batch().unwrap();
        assert_eq!(
            fixture.bm.frame(frame).state(),
            FrameState::Cooling,
            "frame reclaimed under a reader"
        );
    }
    release.send(()).unwrap();
    reader.join().unwrap();
    fixture.bm.evict_batch().unwrap();
    fixture.bm.evict_batch().unwrap();
    assert_eq!(fixture.bm.frame(frame).state(), FrameState::Free);
    assert!(fixture.counter(Counter::Evictions) >= 1);
}

#[test]
fn read_faults_and_corruption_surface_as_errors() {
    let memory = Arc::new(MemoryStorage::new());
    let faulty = Arc::new(FaultyStorage::new(memory.clone()));
    let fixture = Fixture::new(faulty.clone(), 32, 1, false);
    fixture.push_out(0);
    faulty.fail_reads(0, 1, FaultKind::Fail(std::io::ErrorKind::Other));
    assert!(matches!(fixture.access(0, false), Err(Error::Io { .. })));
    faulty.fail_reads(0, 1, FaultKind::Short);
    let short = fixture.access(0, false);
    assert!(matches!(short, Err(Error::Corruption { .. })), "{short:?}");
    assert_eq!(
        fixture.access(0, false).unwrap(),
        0,
        "usable after the faults"
    );

    fixture.push_out(0);
    let page_id = 2; // the root is page 1, the child page 2
    let mut byte = [0u8; 1];
    memory
        .read_at(&mut byte, page_id * PAGE as u64 + 100)
        .unwrap();
    memory
        .write_at(&[byte[0] ^ 0x40], page_id * PAGE as u64 + 100)
        .unwrap();
    match fixture.access(0, false) {
        Err(Error::Corruption { page_id: bad, .. }) => assert_eq!(bad, page_id),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn flush_writes_runs_of_consecutive_dirty_pages_with_one_write_each() {
    let faulty = Arc::new(FaultyStorage::new(Arc::new(MemoryStorage::new())));
    let fixture = Fixture::new(faulty.clone(), 64, 40, false);
    fixture.bm.flush(FlushPages::All).unwrap();
    // Every other page of the first ten rewritten, then the thirty after them (the children
    // were allocated in order, so their page ids are consecutive).
    let rewritten = |child: u64| child >= 10 || child.is_multiple_of(2);
    for child in (0..40).filter(|&child| rewritten(child)) {
        fixture.access(child, true).unwrap();
    }
    let (_, writes_before) = faulty.counts();
    fixture.bm.flush(FlushPages::All).unwrap();
    let (_, writes_after) = faulty.counts();
    assert_eq!(
        writes_after - writes_before,
        5 + 1,
        "five single pages and one run"
    );
    for child in 0..40 {
        let frame = fixture.child_frame(child).unwrap();
        assert!(
            !fixture.bm.frame(frame).is_dirty(),
            "child {child} still dirty"
        );
    }
    // What reached the disk, read back.
    for child in [0, 1, 2, 10, 25, 39] {
        if fixture.child_frame(child).is_some() {
            fixture.push_out(child); // (evicting may push out others too)
        }
        let version = fixture.access(child, false).unwrap();
        assert_eq!(version, u64::from(rewritten(child)), "child {child}");
    }
}

#[test]
fn write_faults_during_eviction_surface_and_heal() {
    let faulty = Arc::new(FaultyStorage::new(Arc::new(MemoryStorage::new())));
    let fixture = Fixture::new(faulty.clone(), 32, 30, false);
    for child in 0..30 {
        fixture.access(child, true).unwrap();
    }
    faulty.fail_writes(0, u64::MAX, FaultKind::NoSpace);
    // Filling the pool needs eviction of dirty pages, which now cannot be written.
    let error = (30..60)
        .find_map(|child| fixture.add_child(child).err())
        .expect("eviction should have needed a write");
    match error {
        Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    faulty.heal();
    for child in 0..30 {
        assert_eq!(
            fixture.access(child, false).unwrap(),
            1,
            "data intact after the faults"
        );
    }
}

/// A pool of a few dozen frames, many more pages, several threads reading and writing: every
/// page is evicted and reloaded many times, and every read is checked.
#[test]
fn stress_small_pool_many_threads() {
    let pages = 200u64;
    let fixture = Arc::new(Fixture::new(
        Arc::new(MemoryStorage::new()),
        40,
        pages,
        true,
    ));
    let writes: Arc<Vec<AtomicU64>> = Arc::new((0..pages).map(|_| AtomicU64::new(0)).collect());
    let operations = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (fixture, writes, operations) = (&fixture, &writes, &operations);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(thread);
                for _ in 0..3_000 {
                    let child = rng.u64(..pages);
                    let write = rng.u8(..4) == 0;
                    fixture.access(child, write).unwrap();
                    if write {
                        writes[child as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    operations.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    for child in 0..pages {
        assert_eq!(
            fixture.access(child, false).unwrap(),
            writes[child as usize].load(Ordering::Relaxed),
            "page {child} lost a write"
        );
    }
    let (reads, evictions) = (
        fixture.counter(Counter::PageReads),
        fixture.counter(Counter::Evictions),
    );
    assert!(
        reads > 2 * pages,
        "only {reads} reads: pages were not evicted and reloaded"
    );
    assert!(evictions > 2 * pages, "only {evictions} evictions");
}
