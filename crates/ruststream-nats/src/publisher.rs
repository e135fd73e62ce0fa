//! Publishing: JetStream with the server's publish acknowledgement (deduplicated by
//! `Nats-Msg-Id`), or core NATS for subjects routed so.

use std::sync::Arc;

use async_nats::jetstream::context::PublishErrorKind as JsKind;
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::connection::Connection;
use crate::link::Link;
use crate::{headers, names};

pub(crate) struct NatsPublisher {
    inner: Arc<Connection>,
}

impl NatsPublisher {
    pub(crate) fn new(inner: Arc<Connection>) -> Self {
        Self { inner }
    }

    /// The message's headers in NATS form, unless the publish would be refused for good
    /// before anything is sent: a subject NATS does not take, headers it cannot carry, or
    /// a message over the server's `max_payload`.
    fn admit(
        &self,
        to: &Address,
        message: &Message,
    ) -> Result<async_nats::HeaderMap, PublishErrorKind> {
        names::check_subject(to.as_str(), false).map_err(PublishErrorKind::BadAddress)?;
        let headers = headers::to_nats(&message.headers).map_err(PublishErrorKind::Refused)?;
        // Over the server's max_payload the server answers `Maximum Payload Violation` and
        // closes the connection (async-nats checks only publishes without headers).
        let size = message.payload.len() + headers::block_len(&headers);
        let limit = self.inner.max_payload(size);
        if size > limit {
            return Err(PublishErrorKind::TooLarge { size, limit });
        }
        Ok(headers)
    }

    async fn send(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        if self.inner.is_closed() {
            return Err(PublishErrorKind::Closed);
        }
        // Not queued in the client while the connection is down: it would reach the
        // server after the reconnect, after this publish was reported failed.
        if matches!(*self.inner.link.borrow(), Link::Down(_)) {
            return Err(PublishErrorKind::Disconnected);
        }
        let headers = self.admit(to, message)?;
        let subject = to.as_str().to_owned();
        let payload = message.payload.clone();
        if self.inner.is_core(to) {
            return self
                .inner
                .client
                .publish_with_headers(subject, headers, payload)
                .await
                .map_err(|_| PublishErrorKind::Disconnected);
        }
        let ack = self
            .inner
            .js
            .publish_with_headers(subject, headers, payload)
            .await
            .map_err(|error| kind(to, &error))?;
        ack.await.map(drop).map_err(|error| kind(to, &error))
    }
}

/// What a JetStream publish error means.
fn kind(to: &Address, error: &async_nats::jetstream::context::PublishError) -> PublishErrorKind {
    match error.kind() {
        JsKind::StreamNotFound => PublishErrorKind::BadAddress(format!(
            "no JetStream stream holds subject {to} (subscribe to it, or route it with NatsBroker::core)"
        )),
        JsKind::TimedOut | JsKind::BrokenPipe => PublishErrorKind::Disconnected,
        _ => PublishErrorKind::Refused(error.to_string()),
    }
}

impl Publish for NatsPublisher {
    /// A subject NATS does not take, or a message over the server's `max_payload`.
    fn check(&self, to: &Address, message: &Message) -> Result<(), PublishErrorKind> {
        self.admit(to, message).map(drop)
    }

    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            match self.send(&to, &message).await {
                Ok(()) => Ok(()),
                Err(kind) => Err(PublishError {
                    address: to.as_str().to_owned(),
                    kind,
                    message,
                }),
            }
        })
    }
}
