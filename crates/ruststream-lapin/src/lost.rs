//! A channel known to be gone: what waits on it gives up at once.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set once a subscription's channel is lost (its consumer ended with an error).
///
/// The broker has put back every delivery the channel had not settled, so a settlement
/// still waiting on it (a frame not written yet, a delayed copy not confirmed yet) has
/// nothing left to settle: it ends as `Disconnected` at once instead of waiting on a
/// connection that may never answer. A sequential loop waits for its trailing
/// settlements before it takes more deliveries: one that never ended held the
/// subscription's consumer back for good (RELIABILITY.md, `lapin-classic:reset`).
#[derive(Debug, Default)]
pub(crate) struct Lost {
    lost: AtomicBool,
    told: Notify,
}

impl Lost {
    /// The channel is gone: every wait ends.
    pub(crate) fn set(&self) {
        self.lost.store(true, Ordering::Release);
        self.told.notify_waiters();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Resolves once the channel is lost.
    pub(crate) async fn wait(&self) {
        loop {
            let told = self.told.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.is_set() {
                return;
            }
            told.await;
        }
    }

    /// `work`'s output, or `None` where the channel is lost first.
    pub(crate) async fn or<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            output = work => Some(output),
            () = self.wait() => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Lost;

    #[tokio::test]
    async fn a_wait_ends_when_the_channel_is_lost_and_work_done_first_wins() {
        let lost = Arc::new(Lost::default());
        assert_eq!(lost.or(async { 7 }).await, Some(7));
        let waiting = tokio::spawn({
            let lost = lost.clone();
            async move { lost.or(std::future::pending::<()>()).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        lost.set();
        let ended = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("ends once lost")
            .expect("no panic");
        assert_eq!(ended, None);
        // Set before the wait starts: it ends at once.
        assert_eq!(lost.or(std::future::pending::<()>()).await, None);
    }
}
