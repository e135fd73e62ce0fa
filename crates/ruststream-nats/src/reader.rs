//! A subscription's reader: turns the client's messages into deliveries, follows the
//! connection (readiness, a report when it is lost), ends when the broker closes.

use std::sync::Arc;

use async_nats::jetstream::consumer::{PullConsumer, pull};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use bytes::Bytes;
use futures_core::Stream;
use futures_util::{FutureExt, StreamExt};
use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, Tag};
use tokio::sync::watch;

use crate::acker::{JsAcker, acknowledge};
use crate::broker::Inner;
use crate::link::{self, Link};
use crate::{core::NoAck, headers, names};

/// Where the messages come from.
enum Source {
    JetStream {
        messages: Box<pull::Stream>,
        acker: Arc<JsAcker>,
        /// Looked up when a pull fails, to tell a deleted consumer from a passing fault.
        consumer: Box<PullConsumer>,
    },
    Core(async_nats::Subscriber),
}

pub(crate) struct Reader {
    inner: Arc<Inner>,
    address: Address,
    wildcard: bool,
    /// `None` once given up (dropped, ended).
    source: Option<Source>,
    /// The acker handed to each delivery.
    acker: Arc<dyn Acker>,
    link: watch::Receiver<Link>,
    attached: Attached,
}

type Item = Result<Delivery, ConsumeError>;

/// What woke the reader.
enum Step {
    Link(Link),
    Jet(Option<Result<async_nats::jetstream::Message, String>>),
    Core(Option<async_nats::Message>),
}

impl Reader {
    pub(crate) fn jetstream(
        inner: Arc<Inner>,
        address: Address,
        consumer: PullConsumer,
        messages: pull::Stream,
        acker: Arc<JsAcker>,
        attached: Attached,
    ) -> Self {
        let link = inner.link.subscribe();
        Self {
            inner,
            wildcard: names::is_wildcard(address.as_str()),
            address,
            acker: acker.clone(),
            source: Some(Source::JetStream {
                messages: Box::new(messages),
                acker,
                consumer: Box::new(consumer),
            }),
            link,
            attached,
        }
    }

    pub(crate) fn core(
        inner: Arc<Inner>,
        address: Address,
        subscriber: async_nats::Subscriber,
        attached: Attached,
    ) -> Self {
        let link = inner.link.subscribe();
        Self {
            inner,
            wildcard: names::is_wildcard(address.as_str()),
            address,
            acker: Arc::new(NoAck),
            source: Some(Source::Core(subscriber)),
            link,
            attached,
        }
    }

    pub(crate) fn into_stream(self) -> impl Stream<Item = Item> + Send + 'static {
        futures_util::stream::unfold(self, |mut reader| async move {
            let item = reader.next().await?;
            Some((item, reader))
        })
    }

    async fn next(&mut self) -> Option<Item> {
        loop {
            let step = {
                let source = self.source.as_mut()?;
                let link = &mut self.link;
                tokio::select! {
                    biased;
                    changed = link.changed() => Step::Link(if changed.is_err() {
                        Link::Closed
                    } else {
                        *link.borrow_and_update()
                    }),
                    step = next_of(source) => step,
                }
            };
            match step {
                Step::Link(Link::Closed) => {
                    self.source = None;
                    return None;
                }
                Step::Link(state) => {
                    if let Some(report) = link::follow(state, &self.attached, self.address.as_str())
                    {
                        return Some(Err(ConsumeError(report)));
                    }
                }
                Step::Jet(None) | Step::Core(None) => {
                    tracing::warn!(subject = %self.address, "nats: the subscription ended");
                    self.source = None;
                    return None;
                }
                Step::Jet(Some(Err(error))) => return Some(Err(self.pull_failed(error).await)),
                Step::Jet(Some(Ok(message))) => {
                    if let Some(delivery) = self.jetstream_delivery(message) {
                        return Some(delivery);
                    }
                }
                Step::Core(Some(message)) => return Some(Ok(self.core_delivery(message))),
            }
        }
    }

    /// A pull failed (missed heartbeats, most often while the connection or a cluster
    /// leader changes). If the consumer is gone (deleted by hand), the subscription
    /// receives nothing more: it detaches (not ready) and says so; it does not make the
    /// consumer again, which would deliver the whole stream anew.
    async fn pull_failed(&mut self, error: String) -> ConsumeError {
        let Some(Source::JetStream { consumer, .. }) = &mut self.source else {
            return ConsumeError(error);
        };
        match consumer.info().await {
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

    fn address_of(&self, subject: &async_nats::Subject) -> Address {
        if self.wildcard {
            Address::new(subject.as_str())
        } else {
            self.address.clone()
        }
    }

    fn jetstream_delivery(&mut self, message: async_nats::jetstream::Message) -> Option<Item> {
        let (seq, delivered) = match message.info() {
            Ok(info) => (info.consumer_sequence, info.delivered),
            Err(error) => {
                return Some(Err(ConsumeError(format!(
                    "nats: a message on {} without JetStream metadata: {error}",
                    self.address
                ))));
            }
        };
        let Some(Source::JetStream { acker, .. }) = &self.source else {
            return None;
        };
        let message = message.message;
        let reply = message.reply?;
        acker.hold(seq, reply);
        let delivery = Delivery::new(
            message.payload,
            headers::from_nats(message.headers.as_ref()),
            self.address_of(&message.subject),
            Tag::Seq(seq),
            self.acker.clone(),
        )
        .with_broker_attempt(u32::try_from(delivered).unwrap_or(u32::MAX));
        Some(Ok(delivery))
    }

    fn core_delivery(&self, message: async_nats::Message) -> Delivery {
        Delivery::new(
            message.payload,
            headers::from_nats(message.headers.as_ref()),
            self.address_of(&message.subject),
            Tag::Seq(0),
            self.acker.clone(),
        )
    }
}

async fn next_of(source: &mut Source) -> Step {
    match source {
        Source::JetStream { messages, .. } => Step::Jet(
            messages
                .next()
                .await
                .map(|item| item.map_err(|error| error.to_string())),
        ),
        Source::Core(subscriber) => Step::Core(subscriber.next().await),
    }
}

impl Drop for Reader {
    /// What a JetStream subscription received and did not hand out goes back at once
    /// (`-NAK`), not after `ack_wait`; `close` waits for it. The pull subscription goes
    /// first (its unsubscribe is sent before the naks, on the same connection), so the
    /// server does not deliver them to it again.
    fn drop(&mut self) {
        let Some(Source::JetStream { mut messages, .. }) = self.source.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut received = Vec::new();
        while let Some(Some(Ok(message))) = messages.next().now_or_never() {
            received.extend(message.message.reply);
        }
        drop(messages);
        if received.is_empty() {
            return;
        }
        let client = self.inner.client.clone();
        let subject = self.address.clone();
        let task = runtime.spawn(async move {
            let given = received.len();
            for reply in received {
                if let Err(error) = acknowledge(client.clone(), reply, Bytes::from_static(b"-NAK")).await {
                    tracing::warn!(%subject, %error,
                        "nats: a message received and not handed out comes back after ack_wait");
                }
            }
            tracing::debug!(%subject, given, "nats: gave back what the subscription had not handed out");
        });
        self.inner.owe(task);
    }
}
