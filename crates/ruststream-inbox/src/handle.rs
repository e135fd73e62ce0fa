//! The inbox around one delivery: record, run, commit or roll back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ruststream::layer::{Handling, Middleware};
use ruststream::{Outcome, ack, retry};
use ruststream_core::{Delivery, Verdict};

use crate::Inbox;
use crate::tx::{Slot, take_made};

/// An inbox's middleware on one subscription.
pub(crate) struct InboxMiddleware {
    inbox: Inbox,
    subscription: Arc<str>,
    /// A delivery without a key was warned about.
    warned: AtomicBool,
}

impl InboxMiddleware {
    pub(crate) fn new(inbox: Inbox, subscription: &str) -> Self {
        Self {
            inbox,
            subscription: subscription.into(),
            warned: AtomicBool::new(false),
        }
    }
}

impl Middleware for InboxMiddleware {
    fn wraps(&self) -> bool {
        true
    }

    fn around(&self, delivery: &Delivery, handling: Handling) -> Handling {
        // Taken here, in the call that made the handler's arguments: its `Tx`'s slot.
        let made = take_made(delivery);
        let key = (self.inbox.key)(delivery);
        if key.is_none() {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(subscription = %self.subscription,
                    "inbox: a message without a message-id cannot be recognised again; it is handled each time it comes");
            }
            // Nothing to record and no `Tx` to write in: no transaction either.
            if made.is_none() {
                return handling;
            }
        }
        Box::pin(handled(
            self.inbox.clone(),
            Arc::clone(&self.subscription),
            key,
            made.unwrap_or_default(),
            handling,
        ))
    }
}

/// Records `key` and runs the handler in one transaction; commits on `ack()`.
async fn handled(
    inbox: Inbox,
    subscription: Arc<str>,
    key: Option<String>,
    slot: Arc<Slot>,
    handling: Handling,
) -> Outcome {
    let mut tx = match inbox.pool.begin().await {
        Ok(tx) => tx,
        Err(e) => return retry().because(format_args!("inbox: cannot begin a transaction: {e}")),
    };
    if let Some(id) = &key {
        match inbox.table.claim(&mut tx, &subscription, id).await {
            Ok(true) => {}
            Ok(false) => {
                drop(tx);
                inbox.shared.duplicates.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%subscription, message_id = %id,
                    "inbox: already handled; acknowledged without running the handler");
                return ack().because("inbox: already handled");
            }
            Err(e) => {
                return retry().because(format_args!("inbox: cannot record the message: {e}"));
            }
        }
    }
    *slot.tx.lock().await = Some(tx);
    let outcome = handling.await;
    let tx = slot.tx.lock().await.take();
    let Some(tx) = tx else {
        return outcome;
    };
    if outcome.verdict() != Verdict::Ack {
        if let Err(e) = tx.rollback().await {
            tracing::debug!(%subscription, error = %e, "inbox: rollback failed (the server rolls back)");
        }
        return outcome;
    }
    match tx.commit().await {
        Ok(()) => {
            inbox.sweep_if_due();
            outcome
        }
        // Whether it committed is unknown: a retry is recognised if it did.
        Err(e) => retry().because(format_args!("inbox: commit failed: {e}")),
    }
}
