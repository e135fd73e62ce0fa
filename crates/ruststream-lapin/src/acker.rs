//! Settling deliveries on the channel they came on.

use std::sync::{Mutex, PoisonError};

use lapin::Channel;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

/// Settles a subscription's deliveries: `Tag::Pair(epoch, delivery-tag)`, where the
/// epoch names the channel the delivery came on. A delivery of a channel that is gone
/// (the connection dropped, the subscription consumes on a new one) cannot be settled:
/// the broker has already put it back, and settling it is `AckError::Disconnected`.
#[derive(Debug, Default)]
pub(crate) struct ChannelAcker {
    current: Mutex<Option<(u64, Channel)>>,
}

impl ChannelAcker {
    /// Deliveries of `epoch` settle on `channel` from now on.
    pub(crate) fn attach(&self, epoch: u64, channel: Channel) {
        *self.lock() = Some((epoch, channel));
    }

    /// The channel is gone.
    pub(crate) fn detach(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, Channel)>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn channel(&self, epoch: u64) -> Option<Channel> {
        match &*self.lock() {
            Some((current, channel)) if *current == epoch => Some(channel.clone()),
            _ => None,
        }
    }
}

impl Acker for ChannelAcker {
    fn settle(&self, tag: Tag, _message: Message, settlement: Settlement) -> Settling {
        let Tag::Pair(epoch, delivery_tag) = tag else {
            return Settling::done(Err(AckError::Refused(format!(
                "{tag:?} is not a delivery of this subscription"
            ))));
        };
        let Some(channel) = self.channel(epoch) else {
            return Settling::done(Err(AckError::Disconnected));
        };
        Settling::pending(async move {
            // Each resolves once the frame is written: 0-9-1 does not answer settlements.
            let sent = match settlement {
                Settlement::Accept | Settlement::Remove => {
                    channel
                        .basic_ack(delivery_tag, BasicAckOptions::default())
                        .await
                }
                Settlement::Reject => {
                    channel
                        .basic_reject(delivery_tag, BasicRejectOptions { requeue: false })
                        .await
                }
                Settlement::Requeue => {
                    channel
                        .basic_nack(
                            delivery_tag,
                            BasicNackOptions {
                                multiple: false,
                                requeue: true,
                            },
                        )
                        .await
                }
                Settlement::RequeueAfter(_) => return Err(AckError::Unsupported),
            };
            sent.map_err(|e| {
                if channel.status().connected() {
                    AckError::Refused(e.to_string())
                } else {
                    AckError::Disconnected
                }
            })
        })
    }

    /// `basic.nack` with requeue: the delivery comes back now and its prefetch slot is
    /// free. A quorum queue counts it as a delivery (0-9-1 has no `released`).
    fn abandon(&self, tag: Tag, _message: Message) {
        let Tag::Pair(epoch, delivery_tag) = tag else {
            return;
        };
        let Some(channel) = self.channel(epoch) else {
            // The channel is gone: the broker has put the delivery back already.
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                delivery_tag,
                "lapin: abandoned outside a runtime; the delivery comes back when the channel closes"
            );
            return;
        };
        runtime.spawn(async move {
            let options = BasicNackOptions {
                multiple: false,
                requeue: true,
            };
            if let Err(e) = channel.basic_nack(delivery_tag, options).await {
                tracing::debug!(delivery_tag, error = %e, "lapin: abandoning failed; the channel returns it");
            }
        });
    }
}
