//! The pump of a JetStream subscription: a task that takes every message the server
//! sends as soon as it arrives, records it with the acker (so that progress signals
//! cover it from then on, even while it waits behind a long handler), and queues the
//! delivery for the subscription's reader. The server bounds what is queued: the
//! consumer's `max_ack_pending`.
//!
//! A drain (a graceful stop) ends the pulling the same way, and everything the
//! outstanding requests bring goes to the reader, which then ends: the runtime handles
//! and settles it, nothing is given back unhandled.
//!
//! When the reader goes away or the broker closes, the pump sends no further pull
//! request, takes in what the outstanding ones still bring, and only then gives back
//! (`-NAK`) what the client had received and not queued; deliveries still queued are
//! given back as they are dropped (`Acker::abandon`).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, Drain, Settlement, Tag};
use tokio::sync::mpsc;

use crate::acker::{JsAcker, acknowledge, body};
use crate::connection::Connection;
use crate::link::Link;
use crate::pull::{Pulled, Puller, Trouble, ack_info};
use crate::{headers, names};

pub(crate) type Item = Result<Delivery, ConsumeError>;

/// How long, at most, a stopping pump takes messages in (past its puller's own bound).
const GIVE_BACK_WAIT: Duration = Duration::from_secs(5);

/// What the pump needs to make deliveries.
pub(crate) struct Pump {
    pub(crate) inner: Arc<Connection>,
    pub(crate) address: Address,
    pub(crate) consumer: PullConsumer,
    pub(crate) puller: Puller,
    pub(crate) acker: Arc<JsAcker>,
    pub(crate) attached: Attached,
    /// The graceful stop's request (accepted at subscribe).
    pub(crate) drain: Drain,
}

/// Why the pump's loop ended.
#[derive(PartialEq, Eq)]
enum End {
    /// The reader went, or the connection closed: give back what came.
    Stop,
    /// The consumer is gone: nothing to give back to.
    ConsumerGone,
    /// Drained: everything the requests brought went to the reader.
    Drained,
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
        let drain = self.drain.clone();
        let mut draining = false;
        let end = loop {
            let pulled = tokio::select! {
                () = tx.closed() => break End::Stop,
                () = drain.requested(), if !draining => {
                    // No further pull request; what the outstanding ones bring still
                    // goes to the reader, then the stream ends.
                    draining = true;
                    self.puller.stop();
                    tracing::debug!(subject = %self.address, "nats: draining");
                    continue;
                }
                changed = link.changed() => {
                    let state = if changed.is_err() { Link::Closed } else { *link.borrow_and_update() };
                    match state {
                        Link::Closed => break End::Stop,
                        Link::Down(_) => was_down = true,
                        Link::Up if was_down => {
                            was_down = false;
                            // The server may have lost the requests with the connection.
                            self.puller.reset();
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
                pulled = self.puller.next() => pulled,
            };
            let item = match pulled {
                Pulled::Message(message) => self.delivery(*message, wildcard, &dyn_acker),
                Pulled::Trouble(_) if was_down => continue,
                Pulled::Trouble(trouble) => {
                    let (report, gone) = self.pull_failed(&trouble).await;
                    if gone {
                        let _ = tx.send(Err(report));
                        break End::ConsumerGone;
                    }
                    Err(report)
                }
                Pulled::Done { .. } if draining => break End::Drained,
                Pulled::Done { .. } => {
                    tracing::warn!(subject = %self.address, "nats: the pull subscription ended");
                    break End::Stop;
                }
            };
            // A delivery the reader no longer takes is dropped here: given back.
            if tx.send(item).is_err() {
                break End::Stop;
            }
        };
        self.give_back(end).await;
    }

    fn delivery(
        &self,
        message: async_nats::Message,
        wildcard: bool,
        acker: &Arc<dyn Acker>,
    ) -> Item {
        let reply = message.reply.clone();
        let info = reply.as_deref().and_then(ack_info);
        let (Some(reply), Some((stream, delivered, stream_seq))) = (reply.as_ref(), info) else {
            return Err(ConsumeError(format!(
                "nats: a message on {} with an acknowledgement subject it cannot read: {}",
                self.address,
                reply.as_deref().unwrap_or_default()
            )));
        };
        // A stored message whose header block begins with a status line, as the server's
        // own messages do: published by a client that wrote the protocol by hand.
        let defect = message.status.map(|status| {
            let line = format!(
                "NATS/1.0 {} {}",
                status.as_u16(),
                message.description.as_deref().unwrap_or_default()
            );
            tracing::warn!(%stream, seq = stream_seq, status = %line.trim_end(),
                "nats: a stored message whose header block begins with a status line: handed over with a defect");
            format!(
                "nats: stream {stream} message {stream_seq}: its header block begins with a \
                 status line ({}), not a message's headers",
                line.trim_end()
            )
        });
        let tag = self.acker.hold(stream_seq, reply.clone());
        let address = if wildcard {
            Address::new(message.subject.as_str())
        } else {
            self.address.clone()
        };
        let mut delivery = Delivery::new(
            message.payload,
            headers::from_nats(message.headers.as_ref()),
            address,
            Tag::Seq(tag),
            acker.clone(),
        )
        .with_broker_attempt(u32::try_from(delivered).unwrap_or(u32::MAX));
        if let Some(defect) = defect {
            delivery = delivery.with_defect(defect);
        }
        Ok(delivery)
    }

    /// The server said something about the pull requests (a missed heartbeat, most often
    /// while the connection or a cluster leader changes, or "consumer deleted"). Only the
    /// consumer's info says it is gone: then the subscription receives nothing more, it
    /// detaches (not ready) and says so (`true`); it does not make the consumer again,
    /// which would deliver the whole stream anew. Otherwise pulling goes on.
    async fn pull_failed(&mut self, trouble: &Trouble) -> (ConsumeError, bool) {
        match self.consumer.info().await {
            Err(lookup) if lookup.kind() == ConsumerInfoErrorKind::NotFound => {
                self.attached.detach();
                let report = format!(
                    "nats: the consumer of {} was deleted: the subscription receives nothing \
                     until the service starts again ({trouble})",
                    self.address
                );
                tracing::error!(subject = %self.address, "{report}");
                (ConsumeError(report), true)
            }
            _ => (
                ConsumeError(format!("nats: pulling from {}: {trouble}", self.address)),
                false,
            ),
        }
    }

    /// What the client received and the pump did not take goes back at once, not after
    /// `ack_wait`, but only once nothing pulls any more: the pump sends no further
    /// request and takes in what the outstanding ones bring until the server has ended
    /// them (or their lifetime is over), then unsubscribes, then gives back those and
    /// the deliveries that were still queued for the reader (parked with the acker when
    /// the reader went). If a request may still wait on the server (it would take a
    /// message given back at once, into nothing), each goes back with a delay of the
    /// request's lifetime.
    async fn give_back(self, end: End) {
        let Self {
            mut puller,
            inner,
            address,
            acker,
            ..
        } = self;
        puller.stop();
        let mut received = Vec::new();
        let mut clean = end == End::Drained;
        if end == End::Stop {
            let until = tokio::time::Instant::now() + GIVE_BACK_WAIT;
            while let Ok(pulled) = tokio::time::timeout_at(until, puller.next()).await {
                match pulled {
                    Pulled::Message(message) => received.extend(message.reply),
                    Pulled::Trouble(_) => {}
                    Pulled::Done { clean: done_clean } => {
                        clean = done_clean;
                        break;
                    }
                }
            }
        }
        drop(puller);
        received.extend(acker.unpark());
        if end == End::ConsumerGone {
            return;
        }
        let given = received.len();
        let nak = if clean {
            body(Settlement::Requeue)
        } else {
            body(Settlement::RequeueAfter(crate::pull::EXPIRES))
        };
        for reply in received {
            if let Err(error) = acknowledge(inner.client.clone(), reply, nak.clone()).await {
                tracing::warn!(%address, %error,
                    "nats: a message received and not handed out comes back after ack_wait");
            }
        }
        if given > 0 {
            tracing::debug!(%address, given, clean, "nats: gave back what the subscription had not handed out");
        }
    }
}
