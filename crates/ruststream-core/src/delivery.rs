//! One message received on a subscription, until it is settled, and the future of its
//! settlement.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::{AckError, Acker, Address, Headers, Message, Settlement, Tag};

/// A message received on a subscription, carrying what is needed to settle it.
///
/// Settling consumes the delivery, so it cannot be settled twice. A delivery dropped
/// without settling is abandoned ([`Acker::abandon`]): it stays with the broker as
/// unsettled and comes back when the consumer goes away (AMQP link detach, a Redis
/// pending entry claimed or re-read), or at once (the memory broker).
///
/// ```
/// use std::sync::Arc;
/// use ruststream_core::{Acker, Address, Delivery, Headers, Message, Settlement, Settling, Tag};
///
/// struct Log;
/// impl Acker for Log {
///     fn settle(&self, tag: Tag, _: Message, s: Settlement) -> Settling {
///         println!("{tag:?}: {s:?}");
///         Settling::done(Ok(()))
///     }
/// }
///
/// # async fn demo() {
/// let d = Delivery::new("hi".into(), Headers::new(), Address::new("q"), Tag::Seq(1), Arc::new(Log));
/// assert_eq!(d.redelivery_count(), 1);
/// d.settle(Settlement::Accept).await.unwrap();
/// # }
/// ```
pub struct Delivery {
    payload: Bytes,
    headers: Headers,
    address: Address,
    broker_attempt: Option<u32>,
    // Boxed: rare, and it keeps the delivery small enough to move without a memcpy call.
    defect: Option<Box<Defect>>,
    // `None` once settled; a delivery dropped while it is `Some` is abandoned.
    tag: Option<Tag>,
    acker: Arc<dyn Acker>,
}

impl Delivery {
    /// A delivery of `payload` with `headers`, received on `address`, settled through
    /// `acker` with `tag`.
    #[inline]
    pub fn new(
        payload: Bytes,
        headers: Headers,
        address: Address,
        tag: Tag,
        acker: Arc<dyn Acker>,
    ) -> Self {
        Self {
            payload,
            headers,
            address,
            broker_attempt: None,
            defect: None,
            tag: Some(tag),
            acker,
        }
    }

    /// Records the broker's own attempt number for this delivery (first delivery = 1):
    /// AMQP `delivery-count + 1`, the Redis pending-entries counter.
    ///
    /// Set it only where the broker really counts this delivery; a copy the runtime
    /// published never carries one.
    #[inline]
    pub fn with_broker_attempt(mut self, attempt: u32) -> Self {
        self.broker_attempt = Some(attempt.max(1));
        self
    }

    /// Marks the delivery as not readable at the transport level (a truncated frame, a
    /// stream entry without a payload field): the runtime applies the decode-failure
    /// policy instead of running the handler.
    pub fn with_defect(mut self, reason: impl Into<String>) -> Self {
        self.defect = Some(Box::new(Defect(reason.into())));
        self
    }

    /// The payload bytes as received.
    #[inline]
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The headers as received.
    #[inline]
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The address the delivery was received on.
    #[inline]
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The broker's attempt number, where the broker counts this delivery.
    #[inline]
    pub fn broker_attempt(&self) -> Option<u32> {
        self.broker_attempt
    }

    /// Why the delivery could not be read, if it could not.
    #[inline]
    pub fn defect(&self) -> Option<&str> {
        self.defect.as_ref().map(|d| d.0.as_str())
    }

    /// The attempt number, the first delivery being 1: the broker's own count where it
    /// has one, else `x-ruststream-retry-count` + 1. Never both.
    #[inline]
    pub fn redelivery_count(&self) -> u32 {
        match self.broker_attempt {
            Some(attempt) => attempt,
            None => self.headers.retry_count().saturating_add(1),
        }
    }

    /// The message as it arrived: payload and headers, for a copy or a dead letter.
    pub fn to_message(&self) -> Message {
        Message {
            payload: self.payload.clone(),
            headers: self.headers.clone(),
        }
    }

    /// Settles the delivery, consuming it.
    #[inline]
    pub fn settle(mut self, settlement: Settlement) -> Settling {
        match self.tag.take() {
            Some(tag) => {
                let message = self.take_message();
                self.acker.settle(tag, message, settlement)
            }
            // Not reached: `settle` consumes the delivery, and only `Drop` takes the tag.
            None => Settling::done(Err(AckError::Refused("already settled".into()))),
        }
    }

    /// Writes `copy` to `to` and settles the delivery with `original` in one step, on a
    /// form that declares [`Capabilities::moves`](crate::Capabilities::moves)
    /// ([`Acker::replace`]). Once it succeeded, the delivery is settled: drop it with
    /// [`replaced`](Delivery::replaced). On an error neither happened and the delivery
    /// is still to be settled.
    pub fn replace(&self, to: Address, copy: Message, original: Settlement) -> Settling {
        match &self.tag {
            Some(tag) => self.acker.replace(tag, to, copy, original),
            None => Settling::done(Err(AckError::Refused("already settled".into()))),
        }
    }

    /// Drops a delivery that a successful [`replace`](Delivery::replace) settled, without
    /// giving it back.
    pub fn replaced(mut self) {
        self.tag = None;
    }

    fn take_message(&mut self) -> Message {
        Message {
            payload: std::mem::take(&mut self.payload),
            headers: std::mem::take(&mut self.headers),
        }
    }
}

impl Drop for Delivery {
    /// An unsettled delivery dropped is abandoned: [`Acker::abandon`] decides what the
    /// broker does with it.
    fn drop(&mut self) {
        if let Some(tag) = self.tag.take() {
            let message = self.take_message();
            self.acker.abandon(tag, message);
        }
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("address", &self.address)
            .field("tag", &self.tag)
            .field("payload_len", &self.payload.len())
            .field("headers", &self.headers)
            .field("broker_attempt", &self.broker_attempt)
            .field("defect", &self.defect)
            .finish()
    }
}

#[derive(Debug)]
struct Defect(String);

/// The future of one settlement: finished at once, or waiting on the broker.
///
/// A concrete type so that settling on the delivery path costs no allocation when the
/// adapter can settle synchronously.
#[must_use = "a settlement does nothing unless awaited"]
pub struct Settling(State);

type BoxFuture = Pin<Box<dyn Future<Output = Result<(), AckError>> + Send>>;

enum State {
    Done(Option<Result<(), AckError>>),
    Pending(BoxFuture),
}

impl Settling {
    /// A settlement that has already happened (or failed).
    #[inline]
    pub fn done(result: Result<(), AckError>) -> Self {
        Self(State::Done(Some(result)))
    }

    /// The result, if the settlement already happened; polling is then not needed.
    #[inline]
    pub fn take_ready(&mut self) -> Option<Result<(), AckError>> {
        match &mut self.0 {
            State::Done(result) => result.take(),
            State::Pending(_) => None,
        }
    }

    /// The result if the settlement already happened, else the settlement itself to
    /// await: like [`Settling::take_ready`], but what is left is handed back rather than
    /// dropped (no drop on the path of a settlement done at once).
    #[inline]
    pub fn into_ready(self) -> Result<Result<(), AckError>, Self> {
        match self.0 {
            State::Done(Some(result)) => Ok(result),
            state => Err(Self(state)),
        }
    }

    /// A settlement that finishes when `future` does.
    pub fn pending(future: impl Future<Output = Result<(), AckError>> + Send + 'static) -> Self {
        Self(State::Pending(Box::pin(future)))
    }
}

impl Future for Settling {
    type Output = Result<(), AckError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            State::Done(result) => Poll::Ready(result.take().unwrap_or(Ok(()))),
            State::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl fmt::Debug for Settling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            State::Done(r) => f.debug_tuple("Settling::Done").field(r).finish(),
            State::Pending(_) => f.write_str("Settling::Pending"),
        }
    }
}
