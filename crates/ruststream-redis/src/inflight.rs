//! Work that [`RedisBroker::close`](crate::RedisBroker) waits for: settlements sent and
//! leases being released, so that closing the pool never cuts one off.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A count of commands that must reach the server before the pool closes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inflight(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    count: AtomicUsize,
    idle: Notify,
}

/// One command counted by an [`Inflight`] until dropped.
#[derive(Debug)]
pub(crate) struct Guard(Arc<Inner>);

impl Inflight {
    /// Counts one more command until the guard is dropped.
    pub(crate) fn enter(&self) -> Guard {
        self.0.count.fetch_add(1, Ordering::AcqRel);
        Guard(self.0.clone())
    }

    /// Completes once no command is counted.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.0.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_every_guard() {
        let inflight = Inflight::default();
        inflight.idle().await;
        let a = inflight.enter();
        let b = inflight.enter();
        let waiter = tokio::spawn({
            let inflight = inflight.clone();
            async move { inflight.idle().await }
        });
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one guard is still held");
        drop(b);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("idle after the last guard")
            .expect("join");
    }
}
