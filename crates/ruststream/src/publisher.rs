//! Publishing typed messages, from handlers and from outside them.

use std::fmt;
use std::sync::Arc;

use ruststream_core::{
    Address, CONTENT_TYPE, CORRELATION_ID, HeaderName, HeaderValue, Headers, MESSAGE_ID, Message,
    Publish, PublishError, REPLY_TO,
};
use serde::Serialize;

use crate::codec::{Codec, CodecError};

/// A message that was not sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The value did not encode; nothing was sent.
    #[error(transparent)]
    Encode(#[from] CodecError),
    /// The broker did not take it; the encoded message is inside.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// Publishes typed values with a codec. Cheap to clone; handlers take it as an
/// argument, and [`App::publisher`](crate::App::publisher) hands one out for use
/// outside handlers.
///
/// ```
/// use ruststream::{Publisher, memory::MemoryBroker};
/// use ruststream_core::Broker;
///
/// # async fn demo() -> Result<(), ruststream::SendError> {
/// let broker = MemoryBroker::new();
/// let publisher = Publisher::new(broker.publisher());
/// publisher.publish("orders", &serde_json::json!({"id": 1})).await?;
/// publisher
///     .message("orders", &serde_json::json!({"id": 2}))
///     .correlation_id("c-2")
///     .reply_to("orders.replies")
///     .header("tenant", "acme")
///     .send()
///     .await?;
/// assert_eq!(broker.ready("orders"), 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<dyn Publish>,
    codec: Codec,
    /// `content-type` for the codec, shared by every message that adds no header.
    headers: Headers,
}

fn codec_headers(codec: Codec) -> Headers {
    let mut headers = Headers::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(codec.content_type()));
    headers
}

impl Publisher {
    /// A publisher over a broker's [`Publish`] with the default codec.
    pub fn new(inner: Arc<dyn Publish>) -> Self {
        let codec = Codec::default();
        Self {
            inner,
            codec,
            headers: codec_headers(codec),
        }
    }

    /// Puts `wrap`'s [`Publish`] in place of the one it is given (a middleware).
    pub(crate) fn wrap(&mut self, wrap: impl FnOnce(Arc<dyn Publish>) -> Arc<dyn Publish>) {
        self.inner = wrap(self.inner.clone());
    }

    /// The same publisher with another codec.
    pub fn with_codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self.headers = codec_headers(codec);
        self
    }

    /// The codec values are encoded with.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Encodes `value` and publishes it to `to`.
    pub async fn publish<T: Serialize + ?Sized>(
        &self,
        to: impl Into<Address>,
        value: &T,
    ) -> Result<(), SendError> {
        self.message(to, value).send().await
    }

    /// Starts a message with headers, a correlation id or a reply address.
    pub fn message<T: Serialize + ?Sized>(
        &self,
        to: impl Into<Address>,
        value: &T,
    ) -> Outgoing<'_> {
        let encoded = self.codec.encode(value).map(|payload| Message {
            payload,
            headers: self.headers.clone(),
        });
        Outgoing {
            publisher: self,
            to: to.into(),
            message: encoded,
        }
    }

    /// Publishes an already encoded message as it is.
    pub async fn publish_message(
        &self,
        to: impl Into<Address>,
        message: Message,
    ) -> Result<(), PublishError> {
        self.inner.publish(to.into(), message).await
    }
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("codec", &self.codec)
            .finish_non_exhaustive()
    }
}

/// A message being built by [`Publisher::message`].
#[must_use = "a message is sent by `send`"]
pub struct Outgoing<'a> {
    publisher: &'a Publisher,
    to: Address,
    message: Result<Message, CodecError>,
}

impl Outgoing<'_> {
    /// Sets a header.
    pub fn header(mut self, name: impl Into<HeaderName>, value: impl Into<HeaderValue>) -> Self {
        if let Ok(message) = &mut self.message {
            message.headers.insert(name, value);
        }
        self
    }

    /// Sets `correlation-id`.
    pub fn correlation_id(self, id: impl Into<HeaderValue>) -> Self {
        self.header(CORRELATION_ID, id)
    }

    /// Sets `reply-to`: where the handler's reply should go.
    pub fn reply_to(self, address: impl Into<Address>) -> Self {
        let address: Address = address.into();
        self.header(REPLY_TO, address.as_str().to_owned())
    }

    /// Sets `message-id`.
    pub fn message_id(self, id: impl Into<HeaderValue>) -> Self {
        self.header(MESSAGE_ID, id)
    }

    /// Publishes the message.
    pub async fn send(self) -> Result<(), SendError> {
        let message = self.message?;
        self.publisher.inner.publish(self.to, message).await?;
        Ok(())
    }
}
