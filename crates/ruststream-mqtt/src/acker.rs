//! Settling deliveries: every settlement the runtime plans is a PUBACK, written in arrival
//! order; MQTT has no negative acknowledgement, so a requeue is not supported.

use std::sync::Arc;

use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};
use tokio::sync::oneshot;

use crate::ledger::{Ledger, Release, Ticket};

/// The acker of one subscription.
pub(crate) struct MqttAcker {
    pub(crate) ledger: Arc<Ledger>,
}

fn ticket(tag: &Tag) -> Option<Ticket> {
    match tag {
        Tag::Other(any) => any.downcast_ref::<Ticket>().copied(),
        _ => None,
    }
}

impl Acker for MqttAcker {
    /// `Accept`, `Reject` and `Remove` are the PUBACK (the runtime has published any copy
    /// first); the settling resolves once the PUBACK is written.
    fn settle(&self, tag: Tag, _: Message, settlement: Settlement) -> Settling {
        if matches!(
            settlement,
            Settlement::Requeue | Settlement::RequeueAfter(_)
        ) {
            return Settling::done(Err(AckError::Unsupported));
        }
        let Some(ticket) = ticket(&tag) else {
            return Settling::done(Err(AckError::Refused("not an mqtt delivery".into())));
        };
        if ticket.seq.is_none() {
            // QoS 0: the broker waits for nothing.
            return Settling::done(Ok(()));
        }
        let (done, written) = oneshot::channel();
        let release = Release {
            epoch: ticket.epoch,
            pkid: ticket.pkid,
            done,
        };
        match self.ledger.settle(ticket, Some(release)) {
            Err(error) => Settling::done(Err(error)),
            Ok(()) => {
                Settling::pending(
                    async move { written.await.unwrap_or(Err(AckError::Disconnected)) },
                )
            }
        }
    }

    /// Passes the delivery over without a PUBACK; the subscription reconnects soon after,
    /// and the broker sends it again on the new connection.
    fn abandon(&self, tag: Tag, _: Message) {
        if let Some(ticket) = ticket(&tag).filter(|t| t.seq.is_some()) {
            let _ = self.ledger.settle(ticket, None);
        }
    }
}
