//! What an adapter is asked to do with an original, and the trait that does it.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::{AckError, Address, Message, Settling};

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
