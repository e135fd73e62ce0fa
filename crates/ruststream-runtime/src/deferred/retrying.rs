//! Copies whose publish failed, tried again with back-off until they are out (or a
//! stop's grace period is over): delayed copies once their delay is over, and owed
//! immediate copies (a retry copy or a dead letter) whose original waits unsettled.
//! While any fails, readiness reports it.

use std::future::Future;
use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ruststream_adapter::Backoff;
use ruststream_core::{Address, Message, Publish};

use super::{Deferred, DelayedCopy, FIRST_BACKOFF, MAX_BACKOFF, message_id, size_of};

impl Deferred {
    pub(super) async fn publish_copy(&self, copy: DelayedCopy, publish: Arc<dyn Publish>) {
        let DelayedCopy {
            subscription,
            to,
            message,
            sents,
        } = copy;
        let what = "delayed retry copy";
        match self
            .publish_until_out(&subscription, &to, message, &*publish, 0, what)
            .await
        {
            Ok(()) => sents.tell(Ok(())),
            Err(error) => {
                tracing::error!(%subscription, %to, message_id = %message_id(&error.message), error = %error.kind, "delayed retry copy lost: the stop's grace period is over");
                sents.tell(Err(&error));
            }
        }
    }

    /// Owes an immediate copy (a retry copy or a dead letter) whose publish just failed
    /// (`failed`): it is tried again with back-off while the original stays unsettled,
    /// and the handler does not run again. `then(true)` settles the original once the
    /// copy is out; `then(false)` hands it back, once a stop's grace period is over.
    pub(crate) fn owe_copy<F, Fut>(
        self: &Arc<Self>,
        (subscription, to): (Address, Address),
        sents: crate::layer::Sents,
        failed: ruststream_core::PublishError,
        publish: Arc<dyn Publish>,
        then: F,
    ) where
        F: FnOnce(bool) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let what = if failed
            .message
            .headers
            .get(ruststream_core::RETRY_COUNT)
            .is_some()
        {
            "retry copy"
        } else {
            "dead letter"
        };
        let size = size_of(&failed.message);
        self.started(&subscription);
        self.reserve(size);
        let this = self.clone();
        tokio::spawn(async move {
            let published = match this
                .publish_until_out(&subscription, &to, failed.message, &*publish, 1, what)
                .await
            {
                Ok(()) => {
                    sents.tell(Ok(()));
                    true
                }
                Err(error) => {
                    tracing::warn!(%subscription, %to, message_id = %message_id(&error.message), error = %error.kind, "{what} not published by the end of the stop's grace period: the original is handed back to the broker");
                    sents.tell(Err(&error));
                    false
                }
            };
            then(published).await;
            this.release(size);
            this.finished(&subscription);
        });
    }

    /// Publishes `message` to `to`, trying again with back-off until it is out or a
    /// stop's grace period is over (the error of the last try); `tries` failed before.
    /// While it fails, readiness reports it.
    async fn publish_until_out(
        &self,
        subscription: &Address,
        to: &Address,
        mut message: Message,
        publish: &dyn Publish,
        mut tries: u32,
        what: &str,
    ) -> Result<(), ruststream_core::PublishError> {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
        // Read from the message only once a publish failed: the common case allocates
        // nothing for the logs.
        let mut id = String::new();
        if tries > 0 {
            self.fail(subscription, to, true);
            id = message_id(&message);
            let delay = backoff.next_delay();
            tracing::warn!(%subscription, %to, message_id = %id, tries, retry_in = ?delay, "{what} not published; trying again without running the handler");
            self.back_off(delay).await;
        }
        loop {
            match publish.publish(to.clone(), message).await {
                Ok(()) => {
                    if tries > 0 {
                        self.fail(subscription, to, false);
                        tracing::info!(%subscription, %to, message_id = %id, tries = tries + 1, "{what} published");
                    }
                    return Ok(());
                }
                Err(error) => {
                    if tries == 0 {
                        self.fail(subscription, to, true);
                    }
                    tries += 1;
                    if id.is_empty() {
                        id = message_id(&error.message);
                    }
                    if self.giving_up.load(Ordering::Acquire) {
                        self.fail(subscription, to, false);
                        return Err(error);
                    }
                    message = error.message;
                    let delay = backoff.next_delay();
                    tracing::warn!(%subscription, %to, message_id = %id, tries, error = %error.kind, retry_in = ?delay, "{what} not published; trying again without running the handler");
                    self.back_off(delay).await;
                }
            }
        }
    }

    /// Waits `delay` (cut short once a stop gives up).
    async fn back_off(&self, delay: Duration) {
        let gave_up = self.gave_up.notified();
        if !self.giving_up.load(Ordering::Acquire) {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = gave_up => {}
            }
        }
    }

    /// Counts a copy of `subscription` to `to` as failing (`true`) or no more.
    fn fail(&self, subscription: &Address, to: &Address, failing: bool) {
        let mut all = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let at = all
            .iter()
            .position(|(s, t, _)| s == subscription && t == to);
        match (at, failing) {
            (Some(at), true) => all[at].2 += 1,
            (None, true) => all.push((subscription.clone(), to.clone(), 1)),
            (Some(at), false) => {
                all[at].2 -= 1;
                if all[at].2 == 0 {
                    all.swap_remove(at);
                }
            }
            (None, false) => {}
        }
    }

    /// The copies being tried again: (subscription, destination, how many).
    pub(crate) fn failing(&self) -> Vec<(Address, Address, usize)> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether some copy's publish is failing now.
    pub(crate) fn is_failing(&self) -> bool {
        !self
            .failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}
