//! Settling a delivery: what an adapter is asked to do with an original.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use crate::{AckError, Address, Message};

/// What to do with a delivery the handler is done with.
///
/// The runtime decides ([`decide`](crate::decide)); adapters carry it out with the
/// broker's own commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Settlement {
    /// Done with it: AMQP `accepted`, Redis `XACK` / `LREM`.
    Accept,
    /// Refuse it: AMQP `rejected` (the broker's dead-letter policy decides), Redis `XACK` /
    /// `LREM`. Also how the original of a delayed retry copy is taken out (the seeds'
    /// AMQP `retry_after`).
    Reject,
    /// Give it back for redelivery, counting the attempt: AMQP
    /// `modified{delivery-failed}`, Redis claiming leaves it in the pending list.
    Requeue,
    /// Give it back for redelivery after a delay, with the form's own delayed redelivery.
    /// Only asked of forms that declare [`Capabilities::delays`](crate::Capabilities::delays).
    RequeueAfter(Duration),
    /// Take out an original that an immediate copy (a retry copy, a dead letter) replaces.
    /// Chosen so that it does not also set off the broker's own dead-lettering: AMQP
    /// `accepted`, Redis `XACK` / `LREM`.
    Remove,
}

/// The adapter's own identity of a delivery, handed back when it is settled.
///
/// Enough for the usual cases without allocating: a sequence number, a pair (a stream
/// entry id), a byte string (a list element), or anything else boxed.
pub enum Tag {
    /// A number: a delivery id, a sequence.
    Seq(u64),
    /// Two numbers: a Redis stream entry id `ms-seq`.
    Pair(u64, u64),
    /// A byte string: a list element, a delivery tag.
    Bytes(Bytes),
    /// Anything else.
    Other(Box<dyn Any + Send + Sync>),
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Seq(n) => write!(f, "Seq({n})"),
            Self::Pair(a, b) => write!(f, "Pair({a}-{b})"),
            Self::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            Self::Other(_) => f.write_str("Other(..)"),
        }
    }
}

/// The adapter side of settlement: carries out a [`Settlement`] for a tagged delivery.
///
/// One acker serves a whole subscription and is shared by its deliveries. Settling
/// must not wait behind the subscription's reader: send it to a task of its own, or
/// through a connection pool, as the broker allows.
pub trait Acker: Send + Sync + 'static {
    /// Settles the delivery known by `tag`. `message` is the delivery's payload and
    /// headers, moved in for forms that settle by writing a copy (a durable delay queue)
    /// or that hold messages themselves (the memory broker).
    ///
    /// The [`Settling`] resolves once the broker has the settlement: the frame is
    /// written (a settlement the broker does not answer, as an AMQP disposition), or
    /// the broker's reply is read (a Redis `XACK`). Never when it is only queued. A
    /// settlement lost with its connection or link resolves with
    /// [`AckError::Disconnected`](crate::AckError::Disconnected): the hooks and
    /// `and_after` are told the truth.
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling;

    /// Gives the delivery known by `tag` back for redelivery now, without a verdict:
    /// the runtime drops it unsettled (a `fail_fast`, a handler abandoned at shutdown,
    /// a copy that could not be published).
    ///
    /// Every form that settles implements it so that the delivery is delivered again
    /// without waiting for the consumer to go away, and so that it stops counting
    /// against the subscription's prefetch or credit: AMQP `released` (or `modified`
    /// where the attempt must count); a Redis stream entry becomes readable again; a
    /// reliable-list element goes back on the queue before it leaves the processing
    /// list; the memory broker puts it back. The default does nothing, which is right
    /// only for forms that do not settle (the delivery is already gone).
    fn abandon(&self, tag: Tag, message: Message) {
        let _ = (tag, message);
    }

    /// Writes `copy` to `to` and settles the delivery known by `tag` with `original`, in
    /// one step: both happen or neither (one transaction). The runtime asks it, before a
    /// publish followed by [`settle`](Acker::settle), of a form that declares
    /// [`Capabilities::moves`](crate::Capabilities::moves). An error means neither
    /// happened and the delivery is still unsettled: the runtime then publishes the copy
    /// and settles after, as on any form. The default refuses (`AckError::Unsupported`).
    fn replace(&self, tag: &Tag, to: Address, copy: Message, original: Settlement) -> Settling {
        let _ = (tag, to, copy, original);
        Settling::done(Err(AckError::Unsupported))
    }
}

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
