//! Settling: the subscription's [`Acker`] hands settlements to its link task.
//!
//! | settlement | disposition |
//! |---|---|
//! | `Accept` | `accepted` |
//! | `Reject` | `rejected` (the broker's dead-letter policy decides) |
//! | `Requeue` | `modified{delivery-failed: true, undeliverable-here: false}`, never `released` |
//! | `Remove` | `accepted`: the original is replaced by a copy, and `rejected` would also set off the broker's own dead-lettering |
//! | `RequeueAfter` | `AckError::Unsupported` (AMQP has no delayed redelivery; never asked) |
//! | abandoned (dropped unsettled) | `released`: back to the queue now, not counted |
//!
//! At-most-once subscriptions settle nothing: every settlement is `AckError::Unsupported`.
//!
//! Settling does not wait behind the receive loop: the settlement goes on a channel the
//! link task reads with priority over new transfers, and settlements that arrive
//! together go out as ranged dispositions. The returned [`Settling`] completes once the
//! link task has handed the disposition to the session (fe2o3-amqp's writer), not when
//! it is merely queued; a settlement whose link is lost first — a delivery of a link
//! that has been re-attached since, a disposition the session no longer takes, one
//! dropped with the link — fails with `AckError::Disconnected` (the broker gives that
//! delivery back).
//!
//! An abandoned delivery (the runtime drops it unsettled: `fail_fast`, a copy that could
//! not be published, a handler abandoned at shutdown) is `released`: the broker delivers
//! it again now and its credit comes back. `released` and not `modified`: the delivery
//! is given back because the service could not finish with it, not because the message
//! failed, so it does not use up one of the queue's attempts (a quorum queue's
//! `x-delivery-limit` would otherwise drop or dead-letter a message whose dead letter
//! could not be published).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fe2o3_amqp::link::delivery::DeliveryInfo;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};
use tokio::sync::{mpsc, oneshot};

/// Told when a settlement's disposition was handed to the session; dropped unsent when
/// it was not (the link was lost).
pub(crate) type Written = oneshot::Sender<()>;

/// The disposition outcome a settlement becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Accepted,
    Rejected,
    Modified,
    /// Given back unprocessed (an abandoned delivery).
    Released,
}

impl Outcome {
    /// The outcome for a settlement, or `None` where AMQP has none.
    pub(crate) fn of(settlement: Settlement) -> Option<Self> {
        match settlement {
            Settlement::Accept | Settlement::Remove => Some(Self::Accepted),
            Settlement::Reject => Some(Self::Rejected),
            Settlement::Requeue => Some(Self::Modified),
            Settlement::RequeueAfter(_) => None,
        }
    }
}

/// What the link task is asked to do.
#[derive(Debug)]
pub(crate) enum Command {
    /// Settle a delivery received on link attachment `link`.
    Settle {
        link: u64,
        info: DeliveryInfo,
        outcome: Outcome,
        /// `None` for an abandoned delivery: nobody waits.
        written: Option<Written>,
    },
    /// At-most-once: the stream handed out this many deliveries.
    Taken(u32),
}

/// The identity of an unsettled delivery, carried in its [`Tag`].
#[derive(Debug)]
pub(crate) struct Unsettled {
    pub(crate) link: u64,
    pub(crate) info: DeliveryInfo,
}

/// The acker of one subscription.
#[derive(Debug)]
pub(crate) struct AmqpAcker {
    commands: mpsc::UnboundedSender<Command>,
    /// The current link attachment; deliveries of earlier ones cannot be settled.
    link: Arc<AtomicU64>,
    settles: bool,
}

impl AmqpAcker {
    pub(crate) fn new(
        commands: mpsc::UnboundedSender<Command>,
        link: Arc<AtomicU64>,
        settles: bool,
    ) -> Self {
        Self {
            commands,
            link,
            settles,
        }
    }
}

impl Acker for AmqpAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        if !self.settles {
            tracing::debug!(?settlement, "at-most-once delivery was settled on receipt");
            return Settling::done(Err(AckError::Unsupported));
        }
        let Some(outcome) = Outcome::of(settlement) else {
            return Settling::done(Err(AckError::Unsupported));
        };
        let Some(Unsettled { link, info }) = unsettled(tag) else {
            return Settling::done(Err(AckError::Refused("not an amqp delivery tag".into())));
        };
        if link != self.link.load(Ordering::Acquire) {
            return Settling::done(Err(AckError::Disconnected));
        }
        let (written, done) = oneshot::channel();
        let sent = self.commands.send(Command::Settle {
            link,
            info,
            outcome,
            written: Some(written),
        });
        if sent.is_err() {
            return Settling::done(Err(AckError::Disconnected));
        }
        Settling::pending(async move { done.await.map_err(|_| AckError::Disconnected) })
    }

    fn abandon(&self, tag: Tag, _message: Message) {
        if !self.settles {
            return; // pre-settled: the broker let go of it already
        }
        let Some(Unsettled { link, info }) = unsettled(tag) else {
            return;
        };
        if link != self.link.load(Ordering::Acquire) {
            return; // its link is gone: the broker has it back
        }
        tracing::debug!("amqp: abandoned delivery released");
        let _ = self.commands.send(Command::Settle {
            link,
            info,
            outcome: Outcome::Released,
            written: None,
        });
    }
}

fn unsettled(tag: Tag) -> Option<Unsettled> {
    let Tag::Other(any) = tag else { return None };
    any.downcast::<Unsettled>().ok().map(|u| *u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn settlements_map_to_outcomes() {
        assert_eq!(Outcome::of(Settlement::Accept), Some(Outcome::Accepted));
        assert_eq!(Outcome::of(Settlement::Remove), Some(Outcome::Accepted));
        assert_eq!(Outcome::of(Settlement::Reject), Some(Outcome::Rejected));
        assert_eq!(Outcome::of(Settlement::Requeue), Some(Outcome::Modified));
        assert_eq!(
            Outcome::of(Settlement::RequeueAfter(Duration::from_secs(1))),
            None
        );
    }

    #[tokio::test]
    async fn at_most_once_settles_nothing() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let acker = AmqpAcker::new(tx, Arc::new(AtomicU64::new(0)), false);
        for s in [Settlement::Accept, Settlement::Reject, Settlement::Requeue] {
            let r = acker.settle(Tag::Seq(1), Message::default(), s).await;
            assert!(matches!(r, Err(AckError::Unsupported)), "{s:?}: {r:?}");
        }
    }
}
