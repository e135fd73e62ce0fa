//! Requests: publishing with a reply address and a correlation id, and awaiting the
//! typed reply.

use std::time::Duration;

use ruststream_core::SubscribeError;
use serde::de::DeserializeOwned;

use super::{Outgoing, SendError};
use crate::codec::CodecError;

/// A request that got no usable reply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The request was not sent (it did not encode, or the broker did not take it).
    #[error(transparent)]
    Send(#[from] SendError),
    /// No reply came within the timeout. A reply that comes later is dropped.
    #[error("no reply from {address} within {timeout:?}")]
    Timeout {
        /// Where the request went.
        address: String,
        /// How long it waited.
        timeout: Duration,
    },
    /// A reply came and did not decode into the type asked for.
    #[error("reply from {address} did not decode: {source}")]
    Decode {
        /// Where the request went.
        address: String,
        /// The codec's complaint.
        source: CodecError,
    },
    /// The publisher has no broker to read replies from: it was made with
    /// [`Publisher::new`](crate::Publisher::new) over a bare `Publish`.
    #[error("this publisher cannot receive replies: use App::publisher or Publisher::for_broker")]
    NoReplies,
    /// The reply subscription could not be opened.
    #[error("reply subscription: {0}")]
    Subscribe(#[source] SubscribeError),
    /// The reply subscription ended while the request waited (the broker closed).
    #[error("reply subscription ended before a reply came")]
    Closed,
}

impl Outgoing<'_> {
    /// Publishes the message as a request and waits up to `timeout` for the reply,
    /// decoded as an `R` with the publisher's codec.
    ///
    /// The message gets `reply-to` (the publisher's reply address) and a fresh
    /// `correlation-id`, replacing any set before. Every request of a publisher (and of
    /// its clones) shares one reply subscription, opened by the first request; each
    /// reply is matched to its request by the correlation id. See
    /// [`Publisher::request`](crate::Publisher::request).
    pub async fn request<R: DeserializeOwned>(self, timeout: Duration) -> Result<R, RequestError> {
        let Some(inbox) = self.publisher.inbox() else {
            return Err(RequestError::NoReplies);
        };
        let address = self.to.to_string();
        let mut ticket = inbox.ticket().await.map_err(|error| match error {
            SubscribeError::Closed => RequestError::Closed,
            other => RequestError::Subscribe(other),
        })?;
        let outgoing = self
            .reply_to(ticket.address().clone())
            .correlation_id(ticket.id.clone());
        let codec = outgoing.publisher.codec();
        outgoing.send().await?;
        match tokio::time::timeout(timeout, &mut ticket.reply).await {
            Ok(Ok(reply)) => codec
                .decode(&reply.payload)
                .map_err(|source| RequestError::Decode { address, source }),
            Ok(Err(_)) => Err(RequestError::Closed),
            Err(_) => Err(RequestError::Timeout { address, timeout }),
        }
    }
}
