//! The pump of a JetStream subscription: a task that takes every message the server
//! sends as soon as it arrives, records it with the acker (so that progress signals
//! cover it from then on, even while it waits behind a long handler), and queues the
//! delivery for the subscription's reader. The server bounds what is queued: the
//! consumer's `max_ack_pending`.
//!
//! When the reader goes away or the broker closes, the pump stops pulling and gives
//! back (`-NAK`) what the client had received and not queued; deliveries still queued
//! are given back as they are dropped (`Acker::abandon`).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{PullConsumer, pull};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use futures_util::StreamExt;
use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, Settlement, Tag};
use tokio::sync::mpsc;

use crate::acker::{JsAcker, acknowledge, body};
use crate::broker::Inner;
use crate::link::Link;
use crate::{headers, names};

pub(crate) type Item = Result<Delivery, ConsumeError>;

/// How long a stopping pump waits for one more message before it gives back what it has.
const SETTLE_DOWN: Duration = Duration::from_millis(200);
/// How long, at most, a stopping pump takes messages in.
const GIVE_BACK_WAIT: Duration = Duration::from_secs(2);

/// What the pump needs to make deliveries.
pub(crate) struct Pump {
    pub(crate) inner: Arc<Inner>,
    pub(crate) address: Address,
    pub(crate) consumer: PullConsumer,
    pub(crate) messages: pull::Stream,
    pub(crate) acker: Arc<JsAcker>,
    pub(crate) attached: Attached,
}

impl Pump {
    /// Starts the task; its deliveries come out of the receiver.
    pub(crate) fn start(self) -> mpsc::UnboundedReceiver<Item> {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = self.inner.clone();
        inner.owe(tokio::spawn(self.run(tx)));
        rx
    }

    async fn run(mut self, tx: mpsc::UnboundedSender<Item>) {
        let wildcard = names::is_wildcard(self.address.as_str());
        let dyn_acker: Arc<dyn Acker> = self.acker.clone();
        let mut link = self.inner.link.subscribe();
        let mut was_down = false;
        loop {
            let item = tokio::select! {
                () = tx.closed() => break,
                changed = link.changed() => {
                    let state = if changed.is_err() { Link::Closed } else { *link.borrow_and_update() };
                    match state {
                        Link::Closed => break,
                        Link::Down(_) => was_down = true,
                        Link::Up if was_down => {
                            was_down = false;
                            for item in self.unreadable(wildcard, &dyn_acker).await {
                                if tx.send(item).is_err() {
                                    break;
                                }
                            }
                        }
                        Link::Up => {}
                    }
                    continue;
                }
                item = self.messages.next() => item,
            };
            let item = match item {
                None => {
                    tracing::warn!(subject = %self.address, "nats: the pull subscription ended");
                    break;
                }
                Some(Err(error)) => Err(self.pull_failed(error.to_string()).await),
                Some(Ok(message)) => match self.delivery(message, wildcard, &dyn_acker) {
                    Some(item) => item,
                    None => continue,
                },
            };
            // A delivery the reader no longer takes is dropped here: given back.
            if tx.send(item).is_err() {
                break;
            }
        }
        self.give_back().await;
    }

    fn delivery(
        &self,
        message: async_nats::jetstream::Message,
        wildcard: bool,
        acker: &Arc<dyn Acker>,
    ) -> Option<Item> {
        let (stream_seq, delivered) = match message.info() {
            Ok(info) => (info.stream_sequence, info.delivered),
            Err(error) => {
                return Some(Err(ConsumeError(format!(
                    "nats: a message on {} without JetStream metadata: {error}",
                    self.address
                ))));
            }
        };
        let message = message.message;
        let reply = message.reply?;
        let tag = self.acker.hold(stream_seq, reply);
        let address = if wildcard {
            Address::new(message.subject.as_str())
        } else {
            self.address.clone()
        };
        let delivery = Delivery::new(
            message.payload,
            headers::from_nats(message.headers.as_ref()),
            address,
            Tag::Seq(tag),
            acker.clone(),
        )
        .with_broker_attempt(u32::try_from(delivered).unwrap_or(u32::MAX));
        Some(Ok(delivery))
    }

    /// A pull failed (missed heartbeats, most often while the connection or a cluster
    /// leader changes). If the consumer is gone (deleted by hand), the subscription
    /// receives nothing more: it detaches (not ready) and says so; it does not make the
    /// consumer again, which would deliver the whole stream anew.
    async fn pull_failed(&mut self, error: String) -> ConsumeError {
        match self.consumer.info().await {
            Err(lookup) if lookup.kind() == ConsumerInfoErrorKind::NotFound => {
                self.attached.detach();
                ConsumeError(format!(
                    "nats: the consumer of {} was deleted: the subscription receives nothing \
                     until the service starts again ({error})",
                    self.address
                ))
            }
            _ => ConsumeError(format!("nats: pulling from {}: {error}", self.address)),
        }
    }

    /// What the client received and the pump did not take goes back at once, not after
    /// `ack_wait`. It keeps taking what still arrives until [`SETTLE_DOWN`] passes
    /// without a message (a delivery given back just before, by `abandon`, comes back to
    /// this pull subscription at once), then the pull subscription goes (its unsubscribe
    /// is sent before the naks, on the same connection), then the naks: of those and of
    /// the deliveries that were still queued for the reader (parked with the acker when
    /// the reader went), each with a delay of the pull request's lifetime: the server
    /// still delivers to a pull request of an unsubscribed client until it expires.
    async fn give_back(self) {
        let Self {
            mut messages,
            inner,
            address,
            acker,
            ..
        } = self;
        let mut received = Vec::new();
        let until = tokio::time::Instant::now() + GIVE_BACK_WAIT;
        while let Ok(Some(Ok(message))) = tokio::time::timeout(
            SETTLE_DOWN.min(until.saturating_duration_since(tokio::time::Instant::now())),
            messages.next(),
        )
        .await
        {
            received.extend(message.message.reply);
        }
        drop(messages);
        received.extend(acker.unpark());
        let given = received.len();
        // The last pull request may still wait on the server, which would take a message
        // given back at once (and drop it, unsubscribed): given back after it expired.
        let later = body(Settlement::RequeueAfter(crate::jetstream::EXPIRES));
        for reply in received {
            let nak = acknowledge(inner.client.clone(), reply, later.clone());
            if let Err(error) = nak.await {
                tracing::warn!(%address, %error,
                    "nats: a message received and not handed out comes back after ack_wait");
            }
        }
        if given > 0 {
            tracing::debug!(%address, given, "nats: gave back what the subscription had not handed out");
        }
    }
}
