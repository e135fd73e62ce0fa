//! Give-backs still on their way, so that closing the broker waits for them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How many give-backs run; [`Pending::idle`] waits for none.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    running: AtomicUsize,
    done: Notify,
}

impl Pending {
    /// One more starts.
    pub(crate) fn start(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    /// One finished.
    pub(crate) fn finish(&self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.done.notify_waiters();
        }
    }

    /// Waits until none runs, at most `limit` (a lease runs out for the rest).
    pub(crate) async fn idle(&self, limit: Duration) {
        let wait = async {
            loop {
                let done = self.done.notified();
                if self.running.load(Ordering::Acquire) == 0 {
                    return;
                }
                done.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}
