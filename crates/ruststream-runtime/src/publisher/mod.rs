//! Publishing typed messages, from handlers and from outside them, and requests that
//! wait for their reply.
//!
//! [`Publisher`] (also at the crate's root) encodes with a codec and publishes;
//! [`Outgoing`] is one message being built with headers, [`SendError`] and
//! [`RequestError`] say why a publish or a request failed, and [`PublishTarget`] declares
//! an address the service publishes to, for descriptions of the service.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{
    Address, Broker, CONTENT_TYPE, CORRELATION_ID, HeaderName, HeaderValue, Headers, MESSAGE_ID,
    Message, Publish, PublishError, REPLY_TO,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::codec::{Codec, CodecError};
use crate::inbox::{Inbox, REPLY_PREFIX};

pub use crate::target::PublishTarget;
pub use request::RequestError;

mod request;

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
/// # async fn demo() -> Result<(), ruststream::publisher::SendError> {
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
    /// Where requests get their replies; `None` over a bare `Publish`.
    inbox: Option<Arc<Inbox>>,
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
            inbox: None,
        }
    }

    /// A publisher over `broker` that can also [`request`](Self::request): replies come
    /// on a subscription of `broker` opened by the first request. This is what
    /// [`App::publisher`](crate::App::publisher) and handlers get.
    pub fn for_broker(broker: Arc<dyn Broker>) -> Self {
        let mut publisher = Self::new(broker.publisher());
        publisher.inbox = Some(Arc::new(Inbox::new(broker, REPLY_PREFIX.to_owned())));
        publisher
    }

    /// The same publisher with replies on addresses starting with `prefix` (default
    /// `ruststream.replies.`; the rest is unique to the publisher), for servers whose
    /// mounts [allow](crate::Mount::allow_reply_to) only some reply addresses. Its
    /// requests get a reply subscription of their own.
    pub fn reply_prefix(mut self, prefix: impl Into<String>) -> Self {
        if let Some(inbox) = &self.inbox {
            self.inbox = Some(Arc::new(inbox.with_prefix(prefix.into())));
        }
        self
    }

    pub(crate) fn inbox(&self) -> Option<&Arc<Inbox>> {
        self.inbox.as_ref()
    }

    /// Publishes `value` to `to` as a request and waits up to `timeout` for the reply,
    /// decoded as an `R`.
    ///
    /// The request carries `reply-to` and a fresh `correlation-id`; a handler that
    /// returns a [`Reply`](crate::Reply) answers it. Every request of this publisher and
    /// its clones shares one reply subscription (opened by the first request, again by a
    /// later one if it ended); replies are matched by correlation id, and one that comes
    /// after its request gave up is dropped (logged at debug). A publisher made with
    /// [`new`](Self::new) has no broker to read replies from:
    /// [`RequestError::NoReplies`]. Headers are set with
    /// [`message`](Self::message)`(…).header(…).request(timeout)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream::{App, Reply, memory::MemoryBroker};
    ///
    /// async fn double(n: u64) -> Reply<u64> {
    ///     Reply::new(n * 2)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let running = App::new(MemoryBroker::new()).mount("double", double).start().await?;
    /// let publisher = running.publisher();
    /// let answer: u64 = publisher.request("double", &21, Duration::from_secs(5)).await?;
    /// assert_eq!(answer, 42);
    /// running.stop().await?;
    /// # Ok(()) }
    /// ```
    pub async fn request<T, R>(
        &self,
        to: impl Into<Address>,
        value: &T,
        timeout: Duration,
    ) -> Result<R, RequestError>
    where
        T: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        self.message(to, value).request(timeout).await
    }

    /// The address this publisher's requests carry as `reply-to`; opens the reply
    /// subscription if none is open.
    pub async fn reply_address(&self) -> Result<Address, RequestError> {
        let inbox = self.inbox.as_ref().ok_or(RequestError::NoReplies)?;
        match inbox.waiting().await {
            Ok(waiting) => Ok(waiting.address.clone()),
            Err(error) => Err(RequestError::Subscribe(error)),
        }
    }

    /// Requests waiting for their reply right now (0 before the first request).
    pub async fn waiting_requests(&self) -> usize {
        match &self.inbox {
            Some(inbox) => inbox.waiting_now().await,
            None => 0,
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
    pub(crate) publisher: &'a Publisher,
    pub(crate) to: Address,
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
