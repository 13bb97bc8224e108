//! The checkpoint thread: runs a checkpoint (`DbShared::checkpoint`) whenever the log has grown
//! by the checkpoint interval since the last one began, so that recovery replays a bounded
//! amount of log and the log files stay bounded, without stopping writers.

use crate::buffer::policy::Policy;
use crate::shared::DbShared;
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
                    let wanted = db.bm.log().is_some_and(|log| log.wants_checkpoint());
                    // A failed checkpoint is retried; its error reaches the user through the
                    // next flush or close, which run one too.
                    if wanted && db.checkpoint(true).is_err() {
                        std::thread::sleep(POLL * 20);
                    }
                }
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
