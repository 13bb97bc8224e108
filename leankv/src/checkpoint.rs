//! The checkpoint thread: runs a checkpoint (`DbShared::checkpoint`) whenever the log has grown
//! by the checkpoint interval since the last one began, so that recovery replays a bounded
//! amount of log and the log files stay bounded, without stopping writers. It sleeps until the
//! log's writer finds a checkpoint due (`Log::checkpoint_due`), so an idle database's thread
//! does not wake, and a busy one's does not take a core from the workers every few
//! milliseconds to look.
//!
//! Writers wait for it when the log runs four intervals ahead, so it must never leave them
//! waiting for nothing: a failed checkpoint is recorded in the log (writers that would wait get
//! its error; the next success clears it) and retried, and a panic (a bug) fails the log, so
//! every later commit gets an error.

use crate::buffer::policy::Policy;
use crate::shared::DbShared;
use crate::sync::Event;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the thread sleeps at most without a reason to wake: a bound, so that a missed
/// reason costs this much delay, never a checkpoint.
const RECHECK: Duration = Duration::from_secs(1);
/// How long it waits before retrying a checkpoint that failed.
const RETRY: Duration = Duration::from_millis(100);

pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    due: Arc<Event>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread for `db`, sleeping on `due` (its log's [`Log::checkpoint_due`]).
    ///
    /// [`Log::checkpoint_due`]: crate::wal::Log::checkpoint_due
    pub(crate) fn start<P: Policy>(
        db: &Arc<DbShared<P>>,
        due: Arc<Event>,
    ) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let db: Weak<DbShared<P>> = Arc::downgrade(db);
        let (stopped, thread_due) = (stop.clone(), due.clone());
        let thread = std::thread::Builder::new()
            .name("leankv-checkpoint".into())
            .spawn(move || run(&db, &stopped, &thread_due))?;
        Ok(Checkpointer {
            stop,
            due,
            thread: Some(thread),
        })
    }
}

fn run<P: Policy>(db: &Weak<DbShared<P>>, stopped: &AtomicBool, due: &Event) {
    loop {
        // Read before looking (at `stopped` too: `Drop` stores it before it notifies), so
        // that an occurrence after the look is not missed.
        let seen = due.count();
        if stopped.load(Ordering::Acquire) {
            return;
        }
        {
            // Not kept while asleep: the database closes without waiting for this thread.
            let Some(db) = db.upgrade() else { return };
            let Some(log) = db.bm.log().filter(|log| log.wants_checkpoint()) else {
                drop(db);
                due.wait_past(seen, RECHECK);
                continue;
            };
            match catch_unwind(AssertUnwindSafe(|| db.checkpoint(true, true))) {
                // Looks again at once: the log may have grown by another interval meanwhile.
                Ok(Ok(())) => continue,
                Ok(Err(error)) => log.checkpoint_failed(error.to_string()),
                Err(panic) => {
                    let what = panic_message(panic.as_ref());
                    log.fail(format!("the checkpoint thread panicked: {what}"));
                    return;
                }
            }
        }
        std::thread::sleep(RETRY);
    }
}

/// The message a panic carried, if it was text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or_default()
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.due.notify();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::io::{CrashSimulator, Storage};
    use crate::{Db, Options, WriteBatch};
    use std::sync::Arc;

    const KEYS: usize = 2000;
    const FILES: [&str; 3] = ["pages", "log-0", "log-1"];

    fn key(i: usize) -> String {
        format!("key{i:05}")
    }

    /// Every leaf changed before a checkpoint begins, the first half of the keys changed
    /// again after it began (by atomic batches of 50 if `batched`: staged records, published
    /// at each commit); returns the pages that checkpoint wrote and the simulator, crashed
    /// right after it.
    fn checkpoint_after_changes(leave_logged: bool, batched: bool) -> (u64, CrashSimulator) {
        let dir = tempfile::tempdir().unwrap();
        let sim = CrashSimulator::new();
        let [pages, log_0, log_1] = FILES.map(|name| sim.storage(name) as Arc<dyn Storage>);
        let db = Db::open_with_files(dir.path(), options(), pages, [log_0, log_1]).unwrap();
        let tree = db.open_tree("t").unwrap();
        for round in 1..=2 {
            for i in 0..KEYS {
                tree.insert(key(i), [round; 100]).unwrap();
            }
            if round == 1 {
                db.flush().unwrap();
            }
        }
        let before = db.stats().page_writes;
        db.shared
            .checkpoint_with(true, leave_logged, || {
                if batched {
                    for keys in (0..KEYS / 2).collect::<Vec<_>>().chunks(50) {
                        let mut batch = WriteBatch::new();
                        for &i in keys {
                            batch.insert(&tree, key(i), [3; 100]);
                        }
                        db.write(batch).unwrap();
                    }
                } else {
                    for i in 0..KEYS / 2 {
                        tree.insert(key(i), [3; 100]).unwrap();
                    }
                }
            })
            .unwrap();
        let written = db.stats().page_writes - before;
        sim.crash();
        (written, sim)
    }

    fn options() -> Options {
        Options::default()
            .pool_size(8 << 20)
            .checkpoint_every(1 << 40)
            .background_writer(false)
    }

    #[test]
    fn pages_changed_since_a_checkpoint_began_are_left_to_the_log_and_recovered_from_it() {
        left_to_the_log_and_recovered(false);
    }

    #[test]
    fn pages_changed_by_batches_published_since_a_checkpoint_began_are_left_to_the_log_too() {
        left_to_the_log_and_recovered(true);
    }

    fn left_to_the_log_and_recovered(batched: bool) {
        let (all, _) = checkpoint_after_changes(false, batched);
        let (left, sim) = checkpoint_after_changes(true, batched);
        // The same pages are dirty in both (the same writes): the leaves of the first half
        // changed after the start, so they were not written.
        assert!(0 < left && left < all, "{left} of {all} pages written");
        for seed in 0..4 {
            let recovered = sim.recover(seed);
            let [pages, log_0, log_1] =
                FILES.map(|name| recovered.storage(name) as Arc<dyn Storage>);
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open_with_files(dir.path(), options(), pages, [log_0, log_1]).unwrap();
            let tree = db.open_tree("t").unwrap();
            for i in 0..KEYS {
                let round = if i < KEYS / 2 { 3 } else { 2 };
                assert_eq!(tree.get(key(i)).unwrap(), Some(vec![round; 100]), "key {i}");
            }
            assert_eq!(tree.len().unwrap(), KEYS as u64);
            let report = db.check_integrity().unwrap();
            assert!(report.is_ok(), "{report}");
        }
    }
}
