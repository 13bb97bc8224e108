//! A count of occurrences that threads can sleep on: the way a thread that needs another
//! thread's work to finish (a page write in flight) waits for it without spinning. Spinning
//! with `yield_now` costs a whole scheduler slice per round once other processes want the
//! cores: a concurrency test that ran 10 s alone took 90 s beside two busy loops, nearly all of
//! it in yields of threads waiting for frames.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Event {
    /// Changed only while `waiting` is locked, so a waiter that found it unchanged under the
    /// lock is already asleep on `changed` when the next change notifies.
    count: AtomicU64,
    waiting: Mutex<()>,
    changed: Condvar,
}

impl Event {
    /// Occurrences so far: read it before looking for what the occurrence would change, then
    /// pass it to [`wait_past`](Self::wait_past) so that none in between is missed.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Records an occurrence and wakes every waiter.
    pub(crate) fn notify(&self) {
        let waiting = self.waiting.lock();
        self.count.fetch_add(1, Ordering::Release);
        drop(waiting);
        self.changed.notify_all();
    }

    /// Sleeps until the count moved past `seen`, at most `timeout` (a bound, so that a missed
    /// reason to wake costs time, never progress). Returns whether it moved.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) -> bool {
        let mut waiting = self.waiting.lock();
        if self.count() == seen {
            self.changed.wait_for(&mut waiting, timeout);
        }
        self.count() != seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_waiter_wakes_on_an_occurrence_after_its_count() {
        let event = Event::default();
        let seen = event.count();
        let notified = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                notified.store(true, Ordering::SeqCst);
                event.notify();
            });
            // Long enough that only a notification (or a lost one) decides the result.
            assert!(event.wait_past(seen, Duration::from_secs(600)));
        });
        assert!(notified.load(Ordering::SeqCst));
    }

    #[test]
    fn an_occurrence_before_the_wait_is_not_missed() {
        let event = Event::default();
        let seen = event.count();
        event.notify();
        assert!(event.wait_past(seen, Duration::from_secs(600)));
        assert!(!event.wait_past(event.count(), Duration::from_millis(1)));
    }
}
