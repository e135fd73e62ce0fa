//! Settling deliveries on the channel they came on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use lapin::Channel;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use crate::delay::Delays;
use crate::gate::Gate;
use crate::retry::CopyCount;

/// The channel deliveries of `epoch` settle on, and the gate its settlements pass.
#[derive(Debug)]
struct Current {
    epoch: u64,
    channel: Channel,
    gate: Arc<Gate>,
}

/// How `RequeueAfter` is carried out: a copy to the queue's delay queue.
#[derive(Clone, Debug)]
pub(crate) struct Delayed {
    pub(crate) delays: Arc<Delays>,
    /// The queue the delay queues dead-letter back to.
    pub(crate) queue: Arc<str>,
    pub(crate) count: CopyCount,
}

/// Settles a subscription's deliveries: `Tag::Pair(epoch, delivery-tag)`, where the
/// epoch names the channel the delivery came on. A delivery of a channel that is gone
/// (the connection dropped, the subscription consumes on a new one) cannot be settled:
/// the broker has already put it back, and settling it is `AckError::Disconnected`.
///
/// The channel is read without a lock (an `ArcSwap`): a settlement costs one reference
/// count and the future [`Settling`] boxes.
#[derive(Debug, Default)]
pub(crate) struct ChannelAcker {
    current: ArcSwapOption<Current>,
    /// `Some` where the subscription declared native delays.
    delayed: Option<Delayed>,
    /// The subscription was dropped: an abandoned delivery is left to the channel's
    /// close, which comes after the consumer's cancel.
    held_back: AtomicBool,
}

impl ChannelAcker {
    /// An acker whose `RequeueAfter` goes through `delayed`.
    pub(crate) fn new(delayed: Option<Delayed>) -> Self {
        Self {
            current: ArcSwapOption::empty(),
            delayed,
            held_back: AtomicBool::new(false),
        }
    }

    /// Deliveries of `epoch` settle on `channel` from now on.
    pub(crate) fn attach(&self, epoch: u64, channel: Channel) {
        self.current.store(Some(Arc::new(Current {
            epoch,
            channel,
            gate: Arc::default(),
        })));
    }

    /// The gate the settlements of `epoch`'s channel pass, while that channel is current.
    pub(crate) fn gate(&self, epoch: u64) -> Option<Arc<Gate>> {
        self.channel(epoch).map(|current| Arc::clone(&current.gate))
    }

    /// From now on, abandoning gives nothing back (the subscription is dropped; its
    /// task cancels the consumer, then closes the channel).
    pub(crate) fn hold_back(&self) {
        self.held_back.store(true, Ordering::Release);
    }

    /// The channel is gone.
    pub(crate) fn detach(&self) {
        self.current.store(None);
    }

    fn channel(&self, epoch: u64) -> Option<Arc<Current>> {
        match &*self.current.load() {
            Some(current) if current.epoch == epoch => Some(Arc::clone(current)),
            _ => None,
        }
    }
}

impl Acker for ChannelAcker {
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Tag::Pair(epoch, delivery_tag) = tag else {
            return Settling::done(Err(AckError::Refused(format!(
                "{tag:?} is not a delivery of this subscription"
            ))));
        };
        let Some(current) = self.channel(epoch) else {
            return Settling::done(Err(AckError::Disconnected));
        };
        match settlement {
            Settlement::Accept | Settlement::Remove => Settling::pending(async move {
                current.gate.pass().await;
                let sent = current
                    .channel
                    .basic_ack(delivery_tag, BasicAckOptions::default())
                    .await;
                failed(&current.channel, sent)
            }),
            Settlement::Reject => Settling::pending(async move {
                current.gate.pass().await;
                let options = BasicRejectOptions { requeue: false };
                let sent = current.channel.basic_reject(delivery_tag, options).await;
                failed(&current.channel, sent)
            }),
            Settlement::Requeue => Settling::pending(async move {
                current.gate.pass().await;
                let sent = current.channel.basic_nack(delivery_tag, REQUEUE).await;
                failed(&current.channel, sent)
            }),
            Settlement::RequeueAfter(delay) => match &self.delayed {
                Some(delayed) => Settling::pending(later(
                    delayed.clone(),
                    current,
                    delivery_tag,
                    delay,
                    message,
                )),
                None => Settling::done(Err(AckError::Unsupported)),
            },
        }
    }

    /// `basic.nack` with requeue: the delivery comes back now and its prefetch slot is
    /// free. A quorum queue counts it as a delivery (0-9-1 has no `released`).
    /// Once the subscription is dropped, nothing: the channel's close returns it after
    /// the consumer is cancelled.
    fn abandon(&self, tag: Tag, _message: Message) {
        let Tag::Pair(epoch, delivery_tag) = tag else {
            return;
        };
        if self.held_back.load(Ordering::Acquire) {
            return;
        }
        let Some(current) = self.channel(epoch) else {
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
            current.gate.pass().await;
            if let Err(e) = current.channel.basic_nack(delivery_tag, REQUEUE).await {
                tracing::debug!(delivery_tag, error = %e, "lapin: abandoning failed; the channel returns it");
            }
        });
    }
}

const REQUEUE: BasicNackOptions = BasicNackOptions {
    multiple: false,
    requeue: true,
};

/// A settlement's frame was written, or why not.
fn failed(channel: &Channel, sent: lapin::Result<()>) -> Result<(), AckError> {
    sent.map_err(|e| {
        if channel.status().connected() {
            AckError::Refused(e.to_string())
        } else {
            AckError::Disconnected
        }
    })
}

/// `RequeueAfter(delay)`: the copy is confirmed in the delay queue, then the original is
/// acked (a crash in between: a duplicate). A copy that cannot be parked leaves the
/// original unsettled for the delay and then gives it back (`basic.nack` with requeue):
/// nothing is lost, but that wait is the process's own.
async fn later(
    delayed: Delayed,
    current: Arc<Current>,
    delivery_tag: u64,
    delay: Duration,
    message: Message,
) -> Result<(), AckError> {
    let copy = delayed.count.copy_of(message);
    match delayed.delays.park(&delayed.queue, delay, copy).await {
        Ok(()) => {
            current.gate.pass().await;
            let sent = current
                .channel
                .basic_ack(delivery_tag, BasicAckOptions::default())
                .await;
            failed(&current.channel, sent)
        }
        Err(why) => {
            tracing::warn!(queue = %delayed.queue, error = %why,
                "lapin: cannot park the delayed copy; holding the delivery for the delay instead");
            let closing = delayed.delays.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = closing.closing() => {}
                    () = tokio::time::sleep(delay) => {
                        current.gate.pass().await;
                        let _ = current.channel.basic_nack(delivery_tag, REQUEUE).await;
                    }
                }
            });
            Err(AckError::Refused(format!(
                "{why}; held for the delay instead (not durable)"
            )))
        }
    }
}
