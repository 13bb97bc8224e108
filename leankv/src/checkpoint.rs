//! The checkpoint thread: runs a checkpoint (`DbShared::checkpoint`) whenever the log has grown
//! by the checkpoint interval since the last one began, so that recovery replays a bounded
//! amount of log and the log files stay bounded, without stopping writers.
//!
//! Writers wait for it when the log runs four intervals ahead, so it must never leave them
//! waiting for nothing: a failed checkpoint is recorded in the log (writers that would wait get
//! its error; the next success clears it) and retried, and a panic (a bug) fails the log, so
//! every later commit gets an error.

use crate::buffer::policy::Policy;
use crate::shared::DbShared;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the thread looks at the log's growth.
const POLL: Duration = Duration::from_millis(5);

pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(crate) fn start<P: Policy>(db: &Arc<DbShared<P>>) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let db: Weak<DbShared<P>> = Arc::downgrade(db);
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("leankv-checkpoint".into())
            .spawn(move || {
                while !stopped.load(Ordering::Acquire) {
                    std::thread::sleep(POLL);
                    let Some(db) = db.upgrade() else { return };
                    let Some(log) = db.bm.log().filter(|log| log.wants_checkpoint()) else {
                        continue;
                    };
                    match catch_unwind(AssertUnwindSafe(|| db.checkpoint(true))) {
                        Ok(Ok(())) => {}
                        Ok(Err(error)) => {
                            log.checkpoint_failed(error.to_string());
                            std::thread::sleep(POLL * 20);
                        }
                        Err(panic) => {
                            let what = panic_message(panic.as_ref());
                            log.fail(format!("the checkpoint thread panicked: {what}"));
                            return;
                        }
                    }
                }
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
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
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
