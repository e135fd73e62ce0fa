//! Settling deliveries on the channel they came on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use lapin::Channel;
use lapin::options::{BasicNackOptions, BasicRejectOptions};
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};

use crate::acks::{Acks, written};
use crate::delay::Delays;
use crate::gate::Gate;
use crate::lost::Lost;
use crate::retry::CopyCount;

/// The channel deliveries of `epoch` settle on, the gate its settlements pass, its acks
/// waiting to go out together, and whether it is lost.
#[derive(Debug)]
struct Current {
    epoch: u64,
    channel: Channel,
    gate: Arc<Gate>,
    acks: Arc<Acks>,
    lost: Arc<Lost>,
}

/// A settlement that is not an ack.
///
/// The two requeues differ from RabbitMQ 4.3 on: a quorum queue counts a delivery the
/// consumer failed (`basic.reject` with requeue) in its `x-delivery-count` and against
/// its delivery limit, and one merely handed back (`basic.nack` with requeue) no more.
/// Before 4.3 it counts both. A channel closed over a delivery counts on every version.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// `basic.reject` without requeue: dead-lettered or dropped.
    Reject,
    /// `basic.reject` with requeue: back now, an attempt spent (a retry).
    Retry,
    /// `basic.nack` with requeue: back now, handed back unhandled.
    Return,
}

impl Current {
    /// A settlement of `tag` by a frame of its own, sent once the gate lets it out; once
    /// written, acks above it may cover it. `Disconnected` once the channel is lost.
    async fn own_frame(&self, tag: u64, frame: Frame) -> Result<(), AckError> {
        let send = async {
            self.gate.pass().await;
            match frame {
                Frame::Reject | Frame::Retry => {
                    let requeue = matches!(frame, Frame::Retry);
                    let options = BasicRejectOptions { requeue };
                    self.channel.basic_reject(tag, options).await
                }
                Frame::Return => {
                    let options = BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    };
                    self.channel.basic_nack(tag, options).await
                }
            }
        };
        let Some(sent) = self.lost.or(send).await else {
            return Err(AckError::Disconnected);
        };
        let result = written(&self.channel, sent);
        if result.is_ok() {
            self.acks.settled(tag);
        }
        result
    }
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
/// Acks go out coalesced ([`Acks`]); the other settlements as frames of their own.
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
    /// How many deliveries the runtime holds at once, and the channel's prefetch (see
    /// [`Acks::new`]).
    in_flight: usize,
    prefetch: u16,
}

impl ChannelAcker {
    /// An acker whose `RequeueAfter` goes through `delayed`.
    pub(crate) fn new(delayed: Option<Delayed>, in_flight: usize, prefetch: u16) -> Self {
        Self {
            current: ArcSwapOption::empty(),
            delayed,
            in_flight,
            prefetch,
            held_back: AtomicBool::new(false),
        }
    }

    /// Deliveries of `epoch` settle on `channel` from now on.
    pub(crate) fn attach(&self, epoch: u64, channel: Channel) {
        let gate = Arc::<Gate>::default();
        let lost = Arc::<Lost>::default();
        let acks = Arc::new(Acks::new(
            channel.clone(),
            Arc::clone(&gate),
            Arc::clone(&lost),
            self.in_flight,
            self.prefetch,
        ));
        self.current.store(Some(Arc::new(Current {
            epoch,
            channel,
            gate,
            acks,
            lost,
        })));
    }

    /// Whether deliveries of `epoch` can still be settled (their channel is current).
    pub(crate) fn is_current(&self, epoch: u64) -> bool {
        matches!(&*self.current.load(), Some(current) if current.epoch == epoch)
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

    /// The channel is closing: settlements already under way still go out on it.
    pub(crate) fn detach(&self) {
        self.current.store(None);
    }

    /// The channel is lost: the broker has put back what it had not settled, and every
    /// settlement still waiting on it ends as `Disconnected` at once.
    pub(crate) fn lose(&self) {
        if let Some(current) = self.current.swap(None) {
            current.lost.set();
        }
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
            Settlement::Accept | Settlement::Remove => {
                Settling::pending(current.acks.ack(delivery_tag))
            }
            Settlement::Reject => {
                Settling::pending(
                    async move { current.own_frame(delivery_tag, Frame::Reject).await },
                )
            }
            Settlement::Requeue => {
                Settling::pending(
                    async move { current.own_frame(delivery_tag, Frame::Retry).await },
                )
            }
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
    /// free. A quorum queue counts it as a delivery before RabbitMQ 4.3, and no more from
    /// 4.3 on (where only `basic.reject` counts).
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
            if let Err(e) = current.own_frame(delivery_tag, Frame::Return).await {
                tracing::debug!(delivery_tag, error = %e, "lapin: abandoning failed; the channel returns it");
            }
        });
    }
}

/// `RequeueAfter(delay)`: the copy is confirmed in the delay queue, then the original is
/// acked (a crash in between: a duplicate). A copy that cannot be parked leaves the
/// original unsettled for the delay and then gives it back as a retry (`basic.reject`
/// with requeue): nothing is lost, but that wait is the process's own.
async fn later(
    delayed: Delayed,
    current: Arc<Current>,
    delivery_tag: u64,
    delay: Duration,
    message: Message,
) -> Result<(), AckError> {
    let copy = delayed.count.copy_of(message);
    // A channel lost meanwhile has given the original back: the copy is not waited for
    // (it may still arrive: a duplicate, never a loss).
    let parked = current
        .lost
        .or(delayed.delays.park(&delayed.queue, delay, copy));
    match parked.await {
        None => Err(AckError::Disconnected),
        Some(Ok(())) => current.acks.ack(delivery_tag).await,
        Some(Err(why)) => {
            tracing::warn!(queue = %delayed.queue, error = %why,
                "lapin: cannot park the delayed copy; holding the delivery for the delay instead");
            let closing = delayed.delays.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = closing.closing() => {}
                    () = tokio::time::sleep(delay) => {
                        let _ = current.own_frame(delivery_tag, Frame::Retry).await;
                    }
                }
            });
            Err(AckError::Refused(format!(
                "{why}; held for the delay instead (not durable)"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lapin::{Connection, ConnectionProperties};
    use ruststream_core::{AckError, Acker, Message, Settlement, Tag};

    use super::ChannelAcker;

    /// A settlement whose frame cannot go out (here: held back, as a drain holds them;
    /// in `lapin-classic:reset`, a write on a connection that failed) ends once the
    /// channel is lost. Before, it waited for ever, and a sequential loop waiting for its
    /// trailing settlements stopped taking deliveries for good.
    #[tokio::test]
    async fn a_settlement_waiting_on_a_lost_channel_ends_at_once() {
        let url = std::env::var("RUSTSTREAM_LAPIN_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
        let connection = Connection::connect(&url, ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "RabbitMQ at {url}: {e}. Start the machine's RabbitMQ (`service \
                     rabbitmq-server start`) or point RUSTSTREAM_LAPIN_URL at one."
                )
            });
        let channel = connection.create_channel().await.expect("a channel");
        let acker = ChannelAcker::new(None, 65, 256);
        acker.attach(1, channel);
        acker.gate(1).expect("the channel is current").hold();
        let ack = acker.settle(Tag::Pair(1, 1), Message::new("a"), Settlement::Accept);
        let reject = acker.settle(Tag::Pair(1, 2), Message::new("b"), Settlement::Reject);
        let both = tokio::spawn(async move { (ack.await, reject.await) });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!both.is_finished(), "held back, nothing is written");
        acker.lose();
        let (ack, reject) = tokio::time::timeout(Duration::from_secs(5), both)
            .await
            .expect("both end once the channel is lost")
            .expect("no panic");
        assert_eq!(ack, Err(AckError::Disconnected));
        assert_eq!(reject, Err(AckError::Disconnected));
        // A settlement after the loss: at once, too.
        let late = acker.settle(Tag::Pair(1, 3), Message::new("c"), Settlement::Accept);
        assert_eq!(late.await, Err(AckError::Disconnected));
        let _ = connection.close(200, "done".into()).await;
    }
}
