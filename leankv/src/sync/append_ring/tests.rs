use super::*;

/// Padding for the tests: dashes, at least 8 bytes.
fn padding() -> Padding {
    Padding {
        min: 8,
        write: Box::new(|bytes, _| bytes.fill(b'-')),
    }
}

#[cfg(not(loom))]
mod plain {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn reservations_are_refused_without_room_or_with_another_tag() {
        let (ring, mut control) = AppendRing::new(2, padding());
        assert_eq!(ring.reserve(1, None).err(), Some(Refused::Full));
        // The install reserves its first bytes itself: nothing can come before them.
        let head = control.install(&ring, 100, 7, 3, 10, 0, 2).unwrap();
        assert_eq!(head.position(), 100);
        let first = ring.reserve(4, Some(7)).unwrap();
        assert_eq!(first.position(), 102);
        assert_eq!(ring.reserve(5, None).err(), Some(Refused::Full));
        assert_eq!(ring.reserve(4, Some(8)).err(), Some(Refused::Tag(7)));
        let second = ring.reserve(4, None).unwrap();
        assert_eq!(second.position(), 106);
        assert_eq!(ring.open_extent(), Some((100, 10)));
        second.fill(b"wxyz");
        first.fill(b"cdef");
        head.fill(b"ab");
        let mut sealed = control.seal(&ring).unwrap();
        assert_eq!(ring.reserve(1, None).err(), Some(Refused::Full));
        assert_eq!(ring.open_extent(), None);
        assert_eq!(sealed.len(), 10);
        assert_eq!(&sealed.bytes_mut(&ring).unwrap()[3..13], b"abcdefwxyz");
        control
            .install(&ring, 110, 7, 0, 10, 0, 0)
            .unwrap()
            .fill(&[]);
        assert_eq!(control.free_slots(), 0, "both slots are taken");
        let second_sealed = control.seal(&ring).unwrap();
        assert_eq!(second_sealed.len(), 0);
        assert!(matches!(
            control.install(&ring, 110, 7, 0, 10, 0, 0),
            Err(Refused::Full)
        ));
        control.free(&ring, sealed, 1);
        control.free(&ring, second_sealed, 1);
        control
            .install(&ring, 110, 7, 0, 10, 0, 0)
            .unwrap()
            .fill(&[]);
    }

    #[test]
    fn a_trailer_sealed_in_the_same_exchange_ends_the_buffer() {
        let (ring, mut control) = AppendRing::new(2, padding());
        assert!(
            control.seal_with_trailer(&ring, 2).is_none(),
            "nothing open"
        );
        control
            .install(&ring, 50, 0, 0, 10, 0, 0)
            .unwrap()
            .fill(&[]);
        ring.reserve(6, None).unwrap().fill(b"abcdef");
        assert!(
            control.seal_with_trailer(&ring, 5).is_none(),
            "no room: not sealed"
        );
        assert_eq!(ring.open_extent(), Some((50, 6)));
        let (trailer, mut sealed) = control.seal_with_trailer(&ring, 4).unwrap();
        assert_eq!(trailer.position(), 56);
        assert_eq!(ring.reserve(1, None).err(), Some(Refused::Full), "sealed");
        assert_eq!(ring.open_extent(), None);
        trailer.fill(b"MARK");
        assert_eq!(sealed.len(), 10);
        assert_eq!(&sealed.bytes_mut(&ring).unwrap()[..10], b"abcdefMARK");
    }

    #[test]
    fn a_trailer_sealed_among_concurrent_reservations_is_the_last_range() {
        for _ in 0..200 {
            let (ring, mut control) = AppendRing::new(2, padding());
            control
                .install(&ring, 0, 0, 0, 1 << 20, 0, 0)
                .unwrap()
                .fill(&[]);
            let ring = Arc::new(ring);
            let appenders: Vec<_> = (0..2)
                .map(|_| {
                    let ring = ring.clone();
                    std::thread::spawn(move || {
                        let mut ends = Vec::new();
                        while let Ok(reservation) = ring.reserve(8, None) {
                            ends.push(reservation.position() + 8);
                            reservation.fill(&[1; 8]);
                        }
                        ends
                    })
                })
                .collect();
            std::thread::yield_now();
            let Some((trailer, sealed)) = control.seal_with_trailer(&ring, 8) else {
                // The appenders filled the buffer first (a slow start of this thread).
                appenders.into_iter().for_each(|a| _ = a.join().unwrap());
                let sealed = control.seal(&ring).unwrap();
                control.free(&ring, sealed, 1);
                continue;
            };
            let at = trailer.position();
            trailer.fill(&[2; 8]);
            for appender in appenders {
                let ends = appender.join().unwrap();
                assert!(
                    ends.iter().all(|&end| end <= at),
                    "a range after the trailer"
                );
            }
            assert_eq!(sealed.len() as u64, at + 8);
            control.free(&ring, sealed, 1);
        }
    }

    #[test]
    fn freeing_keeps_the_buffers_of_the_most_recently_freed_only() {
        let (ring, mut control) = AppendRing::new(6, padding());
        let mut sealed = Vec::new();
        for start in 0..5 {
            control
                .install(&ring, start, 0, 0, 1, 0, 0)
                .unwrap()
                .fill(&[]);
            sealed.push(control.seal(&ring).unwrap());
        }
        assert_eq!(control.in_use(&ring), 5);
        for (freed, chunk) in sealed.drain(..).enumerate() {
            control.free(&ring, chunk, 4);
            assert_eq!(control.kept(&ring), (freed + 1).min(4));
        }
        assert_eq!(control.in_use(&ring), 0);
        // Installs take the most recently freed first: their buffers are reused.
        control.install(&ring, 5, 0, 0, 1, 0, 0).unwrap().fill(&[]);
        assert_eq!(control.kept(&ring), 3);
        let chunk = control.seal(&ring).unwrap();
        // A smaller `keep` releases every buffer beyond it at once.
        control.free(&ring, chunk, 1);
        assert_eq!(control.kept(&ring), 1);
    }

    #[test]
    fn a_reservation_dropped_unfilled_poisons_its_buffer() {
        let (ring, mut control) = AppendRing::new(1, padding());
        control.install(&ring, 0, 0, 0, 10, 0, 0).unwrap().fill(&[]);
        ring.reserve(3, None).unwrap().fill(b"abc");
        drop(ring.reserve(3, None).unwrap()); // as a panic between reserving and filling would
        let mut sealed = control.seal(&ring).unwrap();
        assert!(sealed.bytes_mut(&ring).is_none(), "stale bytes are refused");
        control.free(&ring, sealed, 1);
        control.install(&ring, 6, 0, 0, 10, 0, 0).unwrap().fill(&[]);
        ring.reserve(3, None).unwrap().fill(b"def");
        let mut sealed = control.seal(&ring).unwrap();
        assert_eq!(
            &sealed.bytes_mut(&ring).unwrap()[..3],
            b"def",
            "the next install is sound"
        );
    }

    #[test]
    fn concurrent_appenders_lose_no_byte_and_overlap_none() {
        const THREADS: usize = 4;
        // Interpreted, each record takes long: fewer under Miri.
        const RECORDS: usize = if cfg!(miri) { 100 } else { 2_000 };
        let (ring, mut control) = AppendRing::new(4, padding());
        let ring = Arc::new(ring);
        let limit = if cfg!(miri) { 512 } else { 4096 };
        control
            .install(&ring, 0, 0, 5, limit, 0, 0)
            .unwrap()
            .fill(&[]);
        let control = Arc::new(parking_lot::Mutex::new((control, Vec::new(), 0u64)));
        // Each record: its thread, its number (u16 each), then `len - 4` copies of the
        // thread's byte; records of 4..=40 bytes.
        let appenders: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (ring, control) = (ring.clone(), control.clone());
                std::thread::spawn(move || {
                    for number in 0..RECORDS {
                        let len = 4 + (number * 7 + thread) % 37;
                        let mut record = vec![thread as u8; len];
                        record[..2].copy_from_slice(&(thread as u16).to_le_bytes());
                        record[2..4].copy_from_slice(&(number as u16).to_le_bytes());
                        loop {
                            match ring.reserve(len, None) {
                                Ok(reservation) => {
                                    reservation.fill(&record);
                                    break;
                                }
                                Err(Refused::Full) => {
                                    let mut guard = control.lock();
                                    let (control, sealed, start) = &mut *guard;
                                    if ring.open_extent().is_some_and(|(_, reserved)| {
                                        reserved as usize + len <= limit
                                    }) {
                                        continue; // another appender made room
                                    }
                                    if let Some(full) = control.seal(&ring) {
                                        *start += full.len() as u64;
                                        sealed.push(full);
                                    }
                                    while control.free_slots() == 0 {
                                        let mut oldest: Sealed = sealed.remove(0);
                                        let len = oldest.len();
                                        let bytes =
                                            oldest.bytes_mut(&ring).unwrap()[5..5 + len].to_vec();
                                        CHECKED.with(|c| c.borrow_mut().extend(bytes));
                                        control.free(&ring, oldest, 1);
                                    }
                                    control
                                        .install(&ring, *start, 0, 5, limit, 0, 0)
                                        .unwrap()
                                        .fill(&[]);
                                }
                                Err(Refused::Tag(_)) => unreachable!("no tag asked for"),
                            }
                        }
                    }
                    CHECKED.with(|c| std::mem::take(&mut *c.borrow_mut()))
                })
            })
            .collect();
        let mut stream = Vec::new();
        for appender in appenders {
            stream.push(appender.join().unwrap());
        }
        let mut guard = control.lock();
        let (control, sealed, _) = &mut *guard;
        sealed.extend(control.seal(&ring));
        control.wait_all_filled(&ring);
        // The bytes taken out by the threads, in no particular order across threads, are
        // whole buffers: parse them with the rest.
        let mut buffers: Vec<Vec<u8>> = stream;
        for mut full in sealed.drain(..) {
            let len = full.len();
            buffers.push(full.bytes_mut(&ring).unwrap()[5..5 + len].to_vec());
        }
        let mut seen = vec![Vec::new(); THREADS];
        for buffer in buffers {
            let mut at = 0;
            while at < buffer.len() {
                let thread = u16::from_le_bytes([buffer[at], buffer[at + 1]]) as usize;
                let number = u16::from_le_bytes([buffer[at + 2], buffer[at + 3]]) as usize;
                let len = 4 + (number * 7 + thread) % 37;
                assert!(buffer[at + 4..at + len].iter().all(|&b| b == thread as u8));
                seen[thread].push(number);
                at += len;
            }
        }
        for numbers in &mut seen {
            numbers.sort_unstable();
            assert_eq!(*numbers, (0..RECORDS).collect::<Vec<_>>());
        }
    }

    std::thread_local! {
        static CHECKED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
}

/// Loom model: two appenders race a seal; every range reserved before it is in the sealed
/// buffer whole, none after it, and the buffer holds nothing else.
#[cfg(loom)]
mod model {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_reserved_ranges_are_disjoint_and_whole_in_the_sealed_buffer() {
        loom::model(|| {
            let (ring, mut control) = AppendRing::new(1, padding());
            control.install(&ring, 10, 0, 2, 8, 0, 0).unwrap().fill(&[]);
            let ring = Arc::new(ring);
            let appenders: Vec<_> = [1u8, 2]
                .into_iter()
                .map(|byte| {
                    let ring = ring.clone();
                    loom::thread::spawn(move || {
                        let reservation = ring.reserve(3, None).ok()?;
                        let at = reservation.position();
                        reservation.fill(&[byte; 3]);
                        Some(at)
                    })
                })
                .collect();
            let mut sealed = control.seal(&ring).unwrap();
            let len = sealed.len();
            let bytes = sealed.bytes_mut(&ring).unwrap()[2..2 + len].to_vec();
            let mut found = 0;
            for (byte, appender) in [1u8, 2].into_iter().zip(appenders) {
                if let Some(at) = appender.join().unwrap() {
                    let at = (at - 10) as usize;
                    assert!(at + 3 <= len, "a range reserved after the seal");
                    assert_eq!(bytes[at..at + 3], [byte; 3]);
                    found += 3;
                }
            }
            assert_eq!(found, len);
        });
    }
}
