use super::*;
use crate::sync::append_ring::RingControl;

/// Padding for the tests: dashes, at least 8 bytes.
fn padding() -> Padding {
    Padding {
        min: 8,
        write: Box::new(|bytes, _| bytes.fill(b'-')),
    }
}

/// A fresh region's size.
const REGION: usize = SMALLEST_REGION as usize;

/// A ring of `slots` with one buffer open at `start` (tag 7, room for `limit` bytes).
fn ring_open_at(slots: usize, start: u64, limit: usize) -> (AppendRing, RingControl) {
    let (ring, mut control) = AppendRing::new(slots, padding());
    control
        .install(&ring, start, 7, 0, limit, 0, 0)
        .unwrap()
        .fill(&[]);
    (ring, control)
}

#[cfg(not(loom))]
mod plain {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_threads_places_follow_each_other_and_a_closer_pads_the_rest() {
        let (ring, mut control) = ring_open_at(1, 100, 2 * REGION);
        let entry = ring.regions.claim().unwrap();
        let first = ring.reserve_in_region(entry, 16, Some(7), 0).unwrap();
        assert_eq!(first.position(), 100);
        first.fill(&[1; 16]);
        let most = ring.reserve_in_region(entry, MAX_PLACE, None, 0).unwrap();
        assert_eq!(most.position(), 116);
        most.fill(&[5; MAX_PLACE]);
        let used = 16 + MAX_PLACE;
        let second = ring
            .reserve_in_region(entry, 8, None, 100 + used as u64)
            .unwrap();
        assert_eq!(second.position(), 100 + used as u64);
        // Shared reservations come after the region.
        let shared = ring.reserve(8, None).unwrap();
        assert_eq!(shared.position(), 100 + REGION as u64);
        shared.fill(&[3; 8]);
        // Sealed while the region is in use: the closer waits for the copy.
        let mut sealed = control.seal(&ring).unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                second.fill(&[2; 8]);
            });
            let bytes = sealed.bytes_mut(&ring).unwrap();
            assert_eq!(bytes[..16], [1; 16]);
            assert!(bytes[16..used].iter().all(|&b| b == 5));
            assert_eq!(bytes[used..used + 8], [2; 8]);
            assert!(bytes[used + 8..REGION].iter().all(|&b| b == b'-'));
            assert_eq!(bytes[REGION..REGION + 8], [3; 8]);
        });
        assert_eq!(ring.padded_bytes(), (REGION - used - 8) as u64);
        // The closed region is left for a new one of its size (it was more than half used),
        // in the next buffer.
        control.free(&ring, sealed, 1);
        control
            .install(&ring, 200, 7, 0, 2 * REGION, 0, 0)
            .unwrap()
            .fill(&[]);
        let next = ring.reserve_in_region(entry, 8, None, 0).unwrap();
        assert_eq!(next.position(), 200);
        next.fill(&[4; 8]);
        let shared = ring.reserve(8, None).unwrap();
        assert_eq!(shared.position(), 200 + REGION as u64);
        shared.fill(&[3; 8]);
    }

    #[test]
    fn a_region_is_left_when_its_buffer_was_sealed_or_a_place_would_come_too_early() {
        let (ring, mut control) = ring_open_at(2, 0, 8 * REGION);
        let entry = ring.regions.claim().unwrap();
        let half = MAX_PLACE as u64;
        let place = |len: usize, at_least: u64, byte: u8| {
            let place = ring.reserve_in_region(entry, len, None, at_least).unwrap();
            let position = place.position();
            place.fill(&vec![byte; len]);
            position
        };
        assert_eq!(place(8, 0, 1), 0);
        assert_eq!(place(MAX_PLACE - 8, 0, 1), 8);
        // The page's last record ends beyond the region's next place: a new region, as large
        // (the last was half used).
        assert_eq!(place(8, half + 1, 2), REGION as u64);
        // Room that would be left too small to pad: a new region, twice as large.
        assert_eq!(place(MAX_PLACE - 8, 0, 2), REGION as u64 + 8);
        assert_eq!(place(MAX_PLACE - 12, 0, 2), REGION as u64 + half);
        assert_eq!(place(16, 0, 3), 2 * REGION as u64);
        // Another tag than the install's is refused; the region is closed, not lost.
        assert_eq!(
            ring.reserve_in_region(entry, 8, Some(8), 0).err(),
            Some(Refused::Tag(7))
        );
        // After a seal, an append never lands in the sealed buffer's region (the next is half
        // as large: the last was less than half used).
        let mut sealed = control.seal(&ring).unwrap();
        assert_eq!(sealed.len(), 4 * REGION);
        control
            .install(&ring, sealed.len() as u64, 7, 0, 2 * REGION, 0, 0)
            .unwrap()
            .fill(&[]);
        assert_eq!(place(8, 0, 4), 4 * REGION as u64);
        assert_eq!(ring.reserve(8, None).unwrap().position(), 5 * REGION as u64);
        let bytes = sealed.bytes_mut(&ring).unwrap();
        let dashes = |range: std::ops::Range<usize>| bytes[range].iter().all(|&b| b == b'-');
        assert!(bytes[..MAX_PLACE].iter().all(|&b| b == 1));
        assert!(dashes(MAX_PLACE..REGION));
        assert!(bytes[REGION..REGION + 2 * MAX_PLACE - 12]
            .iter()
            .all(|&b| b == 2));
        assert!(dashes(2 * REGION - 12..2 * REGION));
        assert_eq!(bytes[2 * REGION..2 * REGION + 16], [3; 16]);
        assert!(dashes(2 * REGION + 16..4 * REGION));
    }

    #[test]
    fn a_region_follows_its_threads_rate_and_a_rare_writer_pads_nothing() {
        let (ring, mut control) = ring_open_at(2, 0, 64 * REGION);
        let entry = ring.regions.claim().unwrap();
        // Filled again and again: each region twice the last, up to the largest.
        // (Places of a little less than half the smallest region leave a gap at each end.)
        const LEN: usize = MAX_PLACE - 8;
        let mut starts = Vec::new();
        let mut last_end = u64::MAX;
        for _ in 0..100 {
            let place = ring.reserve_in_region(entry, LEN, None, 0).unwrap();
            let position = place.position();
            place.fill(&[1; LEN]);
            if position != last_end {
                starts.push(position);
            }
            last_end = position + LEN as u64;
        }
        let sizes: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let largest = LARGEST_REGION / SMALLEST_REGION;
        let expected: Vec<u64> = [1, 2, 4, 8, 16, 16]
            .iter()
            .map(|&k| k.min(largest) * REGION as u64)
            .collect();
        assert_eq!(sizes[..6], expected[..]);
        // A closer finds the region less than half used: the next is half as large.
        let mut sealed = control.seal(&ring).unwrap();
        sealed.bytes_mut(&ring).unwrap();
        let mut start = sealed.len() as u64;
        control.free(&ring, sealed, 1);
        let reopen = |control: &mut RingControl, start: u64| {
            control
                .install(&ring, start, 7, 0, 64 * REGION, 0, 0)
                .unwrap()
                .fill(&[]);
        };
        reopen(&mut control, start);
        assert_eq!(
            ring.reserve_in_region(entry, 8, None, 0).map(|p| {
                let position = p.position();
                p.fill(&[2; 8]);
                position
            }),
            Ok(start)
        );
        let shared = ring.reserve(8, None).unwrap();
        let size = shared.position() - start;
        shared.fill(&[3; 8]);
        assert!(size < LARGEST_REGION, "{size}");
        // One small append per buffer: the region shrinks to the smallest, then the thread
        // appends to the shared buffer instead, SHARED_STREAK times, then tries a region again.
        let padded_before = ring.padded_bytes();
        let mut outcomes = Vec::new();
        for _ in 0..SHARED_STREAK + 5 {
            let mut sealed = control.seal(&ring).unwrap();
            sealed.bytes_mut(&ring).unwrap();
            start += sealed.len() as u64;
            control.free(&ring, sealed, 1);
            reopen(&mut control, start);
            outcomes.push(match ring.reserve_in_region(entry, 8, None, 0) {
                Ok(place) => {
                    assert_eq!(place.position(), start);
                    place.fill(&[2; 8]);
                    let next = ring.reserve(8, None).unwrap();
                    let size = next.position() - start;
                    next.fill(&[3; 8]);
                    Some(size / REGION as u64)
                }
                Err(Refused::Full) => None,
                Err(Refused::Tag(_)) => unreachable!("no tag asked for"),
            });
        }
        let mut expected = vec![Some(4), Some(2), Some(1)];
        expected.extend((0..SHARED_STREAK).map(|_| None));
        expected.extend([Some(1), None]);
        assert_eq!(outcomes, expected);
        // Padding only where a region was closed with its one append: 8, 4, 2, 1 KiB, and the
        // smallest opened after the streak.
        let closed_kib = 8 + 4 + 2 + 1 + 1;
        assert_eq!(
            ring.padded_bytes() - padded_before,
            closed_kib * 1024 - 5 * 8
        );
    }

    #[test]
    fn a_place_dropped_unfilled_poisons_its_buffer() {
        let (ring, mut control) = ring_open_at(1, 0, REGION);
        let entry = ring.regions.claim().unwrap();
        drop(ring.reserve_in_region(entry, 8, None, 0).unwrap());
        let mut sealed = control.seal(&ring).unwrap();
        assert!(sealed.bytes_mut(&ring).is_none());
    }

    /// Threads append records through their own regions (falling back to shared reservations)
    /// while the controller seals, drains and reinstalls buffers: every record lies whole at
    /// its position, a thread's records in its order, and every other byte is padding.
    #[test]
    fn concurrent_regions_lose_no_byte_and_pad_the_rest() {
        const THREADS: usize = 3;
        const RECORDS: usize = if cfg!(miri) { 60 } else { 3_000 };
        let limit = if cfg!(miri) { 3 * REGION } else { 8 * REGION };
        let (ring, mut control) = AppendRing::new(4, padding());
        let done = AtomicUsize::new(0);
        let record = |thread: usize, number: usize| {
            let len = 8 * (1 + (number * 7 + thread) % 8);
            let mut bytes = vec![thread as u8; len];
            bytes[1..3].copy_from_slice(&(number as u16).to_le_bytes());
            bytes
        };
        let mut log = Vec::new();
        let placed: Vec<Vec<(u64, usize)>> = std::thread::scope(|scope| {
            let appenders: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let (ring, done) = (&ring, &done);
                    scope.spawn(move || {
                        let mut placed = Vec::new();
                        for number in 0..RECORDS {
                            let bytes = record(thread, number);
                            let position = loop {
                                match ring.reserve_in_own_region(bytes.len(), None, 0) {
                                    Ok(place) => {
                                        let position = place.position();
                                        place.fill(&bytes);
                                        break position;
                                    }
                                    Err(Refused::Full) => {}
                                    Err(Refused::Tag(_)) => unreachable!("no tag asked for"),
                                }
                                match ring.reserve(bytes.len(), None) {
                                    Ok(reservation) => {
                                        let position = reservation.position();
                                        reservation.fill(&bytes);
                                        break position;
                                    }
                                    Err(_) => std::thread::yield_now(),
                                }
                            };
                            placed.push((position, number));
                        }
                        done.fetch_add(1, Ordering::Release);
                        placed
                    })
                })
                .collect();
            let mut start = 0u64;
            loop {
                let finished = done.load(Ordering::Acquire) == THREADS;
                control
                    .install(&ring, start, 0, 0, limit, 0, 0)
                    .unwrap()
                    .fill(&[]);
                for _ in 0..50 {
                    std::thread::yield_now();
                }
                let mut sealed = control.seal(&ring).unwrap();
                let len = sealed.len();
                log.extend_from_slice(&sealed.bytes_mut(&ring).unwrap()[..len]);
                control.free(&ring, sealed, 1);
                start += len as u64;
                if finished {
                    break;
                }
            }
            appenders.into_iter().map(|a| a.join().unwrap()).collect()
        });
        let mut covered = vec![false; log.len()];
        for (thread, placed) in placed.iter().enumerate() {
            assert!(
                placed.windows(2).all(|w| w[0].0 < w[1].0),
                "a thread's records lie in its order"
            );
            for &(position, number) in placed {
                let bytes = record(thread, number);
                let at = position as usize;
                assert_eq!(
                    log[at..at + bytes.len()],
                    bytes[..],
                    "record {thread}/{number}"
                );
                covered[at..at + bytes.len()].fill(true);
            }
        }
        let stray = (0..log.len()).find(|&at| !covered[at] && log[at] != b'-');
        assert_eq!(stray, None, "bytes neither a record nor padding");
    }
}

/// Loom model: a thread appends twice through its region while the controller seals the
/// buffer and waits for it to fill: the wait ends (the region is closed, or its thread's
/// place waited out), a place that lies in the sealed buffer is there whole, and the rest of
/// the region is padding.
#[cfg(loom)]
mod model {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_a_sealed_buffers_regions_are_closed_around_their_places() {
        loom::model(|| {
            let (ring, mut control) = ring_open_at(2, 0, 2 * REGION);
            let entry = ring.regions.claim().unwrap();
            let ring = Arc::new(ring);
            let appender = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    let mut placed = Vec::new();
                    for byte in [1u8, 2] {
                        if let Ok(place) = ring.reserve_in_region(entry, 8, None, 0) {
                            placed.push((place.position(), byte));
                            place.fill(&[byte; 8]);
                        }
                    }
                    placed
                })
            };
            let mut sealed = control.seal(&ring).unwrap();
            let len = sealed.len();
            let bytes = sealed.bytes_mut(&ring).unwrap()[..len].to_vec();
            let placed = appender.join().unwrap();
            let mut used = 0;
            for (position, byte) in placed {
                let at = position as usize;
                if at < len {
                    assert_eq!(bytes[at..at + 8], [byte; 8]);
                    used += 8;
                }
            }
            if len > 0 {
                assert_eq!(len, REGION);
                assert!(bytes[used..].iter().all(|&b| b == b'-'));
            }
        });
    }
}
