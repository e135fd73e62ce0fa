//! Work deferred by a delay: retry copies published from the process, deliveries held
//! before a requeue.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Tasks that run after a delay. On a graceful stop they run at once (a retry copy
/// goes out early rather than being lost); a crash loses them, as documented.
#[derive(Default)]
pub(crate) struct Deferred {
    pending: AtomicUsize,
    flushing: AtomicBool,
    flush: Notify,
    done: Notify,
}

impl Deferred {
    pub(crate) fn schedule<F, Fut>(self: &Arc<Self>, delay: Duration, then: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let this = self.clone();
        tokio::spawn(async move {
            let flushed = this.flush.notified();
            if !this.flushing.load(Ordering::Acquire) {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = flushed => {}
                }
            }
            then().await;
            if this.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                this.done.notify_waiters();
            }
        });
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Runs every waiting task now and waits until they are done.
    pub(crate) async fn flush(&self) {
        self.flushing.store(true, Ordering::Release);
        self.flush.notify_waiters();
        loop {
            let done = self.done.notified();
            if self.pending() == 0 {
                return;
            }
            done.await;
        }
    }
}
