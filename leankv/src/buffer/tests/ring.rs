//! Read-ahead through the shared ring (`ring_reads.rs`), on a page file: the threads that wait
//! for pages reap the ring's completions, hand the reaping on, and start the runs that found
//! the ring full.

use super::*;
use crate::io::FileStorage;

/// More runs than the ring has slots are read ahead at once (every other child on disk: a run
/// of one page each), with nobody reaping; then four threads read every child, the read-ahead ones
/// and the others, at once. Every page arrives whole and in its place, each page read ahead is
/// read once, and no thread waits forever on a run that was left pending or on a completion
/// another thread was to reap. Where the kernel refuses io_uring the I/O threads read instead,
/// with the same outcome.
#[test]
fn waiters_reap_the_ring_and_start_the_runs_left_pending() {
    const CHILDREN: u64 = 400;
    let dir = tempfile::tempdir().unwrap();
    let storage = FileStorage::open(&dir.path().join("pages"), false).unwrap();
    let fixture = Arc::new(Fixture::reading_ahead(
        Arc::new(storage),
        600,
        CHILDREN,
        false,
        30,
    ));
    for child in 0..CHILDREN {
        // Pushing one out refills the cooling stage with others.
        if fixture.child_frame(child).is_some() {
            fixture.push_out(child);
        }
    }
    let bm = &fixture.bm;
    let root = fixture.root;
    let version = bm.frame(root).latch.optimistic().unwrap();
    let mut targets: Vec<ReadAhead> = (0..CHILDREN)
        .step_by(2)
        .filter_map(|child| {
            let offset = SWIPS_AT + 8 * child as usize;
            match Swip::decode(bm.page(root).u64(offset), bm.frame_count()) {
                Some(SwipTarget::Page(page_id)) if !bm.cooling_or_in_flight(page_id) => {
                    Some(ReadAhead {
                        parent: root,
                        version,
                        offset,
                        page_id,
                    })
                }
                _ => None,
            }
        })
        .collect();
    let read_ahead = targets.len() as u64;
    assert!(read_ahead > 64, "more runs than the ring's slots");
    for chunk in targets.chunks_mut(bm.prefetch_depth()) {
        bm.read_ahead(chunk);
    }
    let threads = 4;
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let fixture = fixture.clone();
            std::thread::spawn(move || {
                for child in (thread..CHILDREN).step_by(threads as usize) {
                    assert_eq!(fixture.access(child, false).unwrap(), 0);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(fixture.counter(Counter::PrefetchReads), read_ahead);
    for child in 0..CHILDREN {
        assert_eq!(fixture.access(child, false).unwrap(), 0);
    }
}
