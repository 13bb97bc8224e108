//! The background writer (paper §IV-I): one thread that writes dirty pages from the old end of
//! the cooling FIFO, so that the threads needing frames rarely have to wait for a write.
//!
//! It holds only a weak reference to the buffer manager and stops when told to (on close) or
//! when the manager is gone. Write errors are left for eviction to meet and report: the page
//! simply stays dirty. At each wake it also populates the memory of the frames to be used next
//! ([`BufferManager::populate_ahead`]). While its rounds find nothing to do, it sleeps twice as
//! long each time, up to [`LONGEST_SLEEP`]: an idle database's writer wakes a few times a
//! second, not a hundred.

use super::policy::Policy;
use super::BufferManager;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Cooling frames examined (and written if dirty) per step of a round.
const FRAMES_PER_STEP: usize = 64;
/// How long the writer sleeps when nobody wakes it, after a round that found work.
const IDLE_INTERVAL: Duration = Duration::from_millis(10);
/// How long it sleeps at most, after rounds that found none (eviction that meets dirty pages
/// wakes it at once).
const LONGEST_SLEEP: Duration = Duration::from_millis(640);

#[derive(Default)]
struct Signal {
    state: Mutex<SignalState>,
    changed: Condvar,
}

#[derive(Default)]
struct SignalState {
    woken: bool,
    stop: bool,
}

pub(crate) struct BackgroundWriter {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundWriter {
    pub(crate) fn start<P: Policy>(
        manager: &Arc<BufferManager<P>>,
    ) -> std::io::Result<BackgroundWriter> {
        let signal = Arc::new(Signal::default());
        let weak = Arc::downgrade(manager);
        let thread_signal = signal.clone();
        let thread = std::thread::Builder::new()
            .name("leankv-writer".into())
            .spawn(move || run(weak, &thread_signal))?;
        Ok(BackgroundWriter {
            signal,
            thread: Some(thread),
        })
    }

    /// Asks for a round now (eviction met dirty pages).
    pub(crate) fn wake(&self) {
        self.signal.state.lock().woken = true;
        self.signal.changed.notify_one();
    }
}

impl Drop for BackgroundWriter {
    /// Stops the thread and waits for it (unless it drops the last reference itself).
    fn drop(&mut self) {
        self.signal.state.lock().stop = true;
        self.signal.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn run<P: Policy>(manager: Weak<BufferManager<P>>, signal: &Signal) {
    // Dirty pages cooled as of the last round.
    let mut cooled = 0;
    // How far populating the pool ahead of its use got (from the first wake on).
    let mut populate = None;
    let mut sleep = IDLE_INTERVAL;
    loop {
        let woken = {
            let mut state = signal.state.lock();
            if !state.woken && !state.stop {
                signal.changed.wait_for(&mut state, sleep);
            }
            if state.stop {
                return;
            }
            std::mem::take(&mut state.woken)
        };
        let Some(manager) = manager.upgrade() else {
            return;
        };
        let populate = populate.get_or_insert_with(|| manager.populate_from_here());
        let grew = manager.populate_ahead(populate);
        // Skip a round while no dirty page has cooled since the last, unless eviction met
        // dirty pages: a read-only workload beyond memory then pays nothing for the writer.
        let now = manager.dirty_pages_cooled();
        let idle = !woken && now == cooled;
        sleep = next_sleep(sleep, idle && !grew);
        if idle {
            continue;
        }
        cooled = now;
        while manager.write_cooling_pages(FRAMES_PER_STEP) == FRAMES_PER_STEP {
            if signal.state.lock().stop {
                return;
            }
        }
    }
}

/// How long to sleep after sleeping `sleep`, once a round found nothing to do or something.
fn next_sleep(sleep: Duration, found_nothing: bool) -> Duration {
    if found_nothing {
        (sleep * 2).min(LONGEST_SLEEP)
    } else {
        IDLE_INTERVAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_grow_while_rounds_find_nothing_and_shrink_at_once_when_one_does() {
        let mut sleep = IDLE_INTERVAL;
        let mut sleeps = Vec::new();
        for _ in 0..8 {
            sleep = next_sleep(sleep, true);
            sleeps.push(sleep.as_millis());
        }
        assert_eq!(sleeps, [20, 40, 80, 160, 320, 640, 640, 640]);
        assert_eq!(next_sleep(sleep, false), IDLE_INTERVAL);
    }
}
