//! What a handler returns: how its delivery is settled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use ruststream_core::Verdict;

use crate::Settled;
use crate::codec::{Codec, CodecError};

pub(crate) type After =
    Box<dyn FnOnce(&Settled) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// How a handler wants its delivery settled: [`ack`], [`retry`], [`retry_after`] or
/// [`drop`], with an optional action after settlement ([`Outcome::and_after`]).
///
/// Handlers may return an `Outcome`, `()` (acknowledges) or a `Result` (see
/// [`IntoOutcome`]), so `?` works inside them.
///
/// ```
/// use std::time::Duration;
/// use ruststream::{ack, retry_after, Outcome};
///
/// fn settle(busy: bool) -> Outcome {
///     if busy { retry_after(Duration::from_secs(5)) } else { ack() }
/// }
/// # let _ = settle(true);
/// ```
#[must_use]
pub struct Outcome {
    pub(crate) verdict: Verdict,
    pub(crate) after: Option<After>,
    pub(crate) reply: Option<PendingReply>,
    // Why the handler asked for it (`because`): logged, and a dead letter's error.
    pub(crate) reason: Option<Box<str>>,
}

/// A handler's reply, waiting for its mount's codec: made by
/// [`Reply`](crate::Reply), published before the request is settled.
pub(crate) struct PendingReply(Encode);

type Encode = Box<dyn FnOnce(Codec) -> Result<Bytes, CodecError> + Send>;

impl PendingReply {
    pub(crate) fn new(
        encode: impl FnOnce(Codec) -> Result<Bytes, CodecError> + Send + 'static,
    ) -> Self {
        Self(Box::new(encode))
    }

    /// The reply's payload, in `codec`.
    pub(crate) fn encode(self, codec: Codec) -> Result<Bytes, CodecError> {
        (self.0)(codec)
    }
}

impl fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingReply")
    }
}

/// Acknowledges the delivery: it is done.
pub fn ack() -> Outcome {
    Outcome::new(Verdict::Ack)
}

/// Rejects the delivery. The broker's dead-letter policy (if any) decides what follows.
pub fn drop() -> Outcome {
    Outcome::new(Verdict::Drop)
}

/// Asks for the delivery again now, subject to the mount's `max_attempts`.
pub fn retry() -> Outcome {
    Outcome::new(Verdict::Retry)
}

/// Asks for the delivery again after `delay`, subject to the mount's `max_attempts`.
pub fn retry_after(delay: Duration) -> Outcome {
    Outcome::new(Verdict::RetryAfter(delay))
}

impl Outcome {
    pub(crate) const fn new(verdict: Verdict) -> Self {
        Self {
            verdict,
            after: None,
            reply: None,
            reason: None,
        }
    }

    /// Says why: the reason is logged with the delivery's settlement and, where a retry
    /// runs out of attempts, becomes the dead letter's `x-ruststream-dead-letter-error`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream::{Outcome, retry_after};
    ///
    /// fn gateway_down(error: std::io::Error) -> Outcome {
    ///     retry_after(Duration::from_secs(10)).because(error)
    /// }
    /// # let _ = gateway_down(std::io::Error::other("timed out"));
    /// ```
    pub fn because(mut self, reason: impl fmt::Display) -> Self {
        self.reason = Some(reason.to_string().into_boxed_str());
        self
    }

    /// The reason given with [`because`](Outcome::because), if any.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// What the outcome asks for.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Runs `after` once the delivery has been settled (whether or not the broker
    /// accepted the settlement; [`Settled`] says which).
    ///
    /// ```
    /// use ruststream::{ack, Outcome};
    ///
    /// fn done(id: u64) -> Outcome {
    ///     ack().and_after(move |settled| {
    ///         let ok = settled.is_ok();
    ///         async move { println!("order {id} settled: {ok}") }
    ///     })
    /// }
    /// # let _ = done(1);
    /// ```
    pub fn and_after<F, Fut>(mut self, after: F) -> Self
    where
        F: FnOnce(&Settled) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.after = Some(Box::new(move |settled| Box::pin(after(settled))));
        self
    }
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outcome")
            .field("verdict", &self.verdict)
            .field("and_after", &self.after.is_some())
            .field("reply", &self.reply.is_some())
            .field("reason", &self.reason)
            .finish()
    }
}

/// Converts what a handler returns into an [`Outcome`].
///
/// - `()` acknowledges.
/// - `Outcome` is itself.
/// - `Result<T, E>`: `Ok(t)` is `t`'s outcome; `Err(e)` drops (rejects) the delivery
///   and logs `e`. It does not retry: say `retry()` for that, or return
///   `Result<T, Outcome>` and `Err(retry())`.
#[diagnostic::on_unimplemented(
    message = "a handler cannot return `{Self}`",
    label = "not an outcome",
    note = "return `()`, `Outcome` (`ack()`, `retry()`, `retry_after(d)`, `drop()`), `Reply<T>`, or a `Result` of those whose error is `Display` (an `Err` drops the delivery)"
)]
pub trait IntoOutcome {
    /// The outcome.
    fn into_outcome(self) -> Outcome;

    /// The Rust type of the reply this outcome carries ([`Reply<T>`](crate::Reply)
    /// says `T`), if any: what the service's AsyncAPI document checks a reply schema
    /// declared with `Mount::reply` against.
    fn reply_type() -> Option<(std::any::TypeId, &'static str)>
    where
        Self: Sized,
    {
        None
    }
}

impl IntoOutcome for Outcome {
    fn into_outcome(self) -> Outcome {
        self
    }
}

impl IntoOutcome for () {
    fn into_outcome(self) -> Outcome {
        ack()
    }
}

impl<T: IntoOutcome, E: fmt::Display> IntoOutcome for Result<T, E> {
    fn reply_type() -> Option<(std::any::TypeId, &'static str)> {
        T::reply_type()
    }

    fn into_outcome(self) -> Outcome {
        match self {
            Ok(value) => value.into_outcome(),
            Err(error) => {
                tracing::warn!(%error, "handler failed; dropping the delivery");
                drop()
            }
        }
    }
}

impl<T: IntoOutcome> IntoOutcome for Result<T, Outcome> {
    fn reply_type() -> Option<(std::any::TypeId, &'static str)> {
        T::reply_type()
    }

    fn into_outcome(self) -> Outcome {
        match self {
            Ok(value) => value.into_outcome(),
            Err(outcome) => outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(().into_outcome().verdict, Verdict::Ack);
        let failed: Result<(), &str> = Err("boom");
        assert_eq!(failed.into_outcome().verdict, Verdict::Drop);
        let ok: Result<Outcome, String> = Ok(retry());
        assert_eq!(ok.into_outcome().verdict, Verdict::Retry);
        let err: Result<(), Outcome> = Err(retry_after(Duration::from_secs(1)));
        assert_eq!(
            err.into_outcome().verdict,
            Verdict::RetryAfter(Duration::from_secs(1))
        );
    }
}
