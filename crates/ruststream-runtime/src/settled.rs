//! What hooks, `and_after` and a middleware's visit learn about a settled delivery.
//!
//! A [`Settled`] (also at the crate's root) tells the verdict, the broker's plan,
//! whether the broker took it and how long the handler ran; its [`Cause`] says why the
//! delivery was settled so (the handler, a failure policy, a middleware, a spent attempt)
//! and its [`SettleError`] what went wrong when the broker did not take it.

use std::time::Duration;

use ruststream_core::{AckError, Address, Plan, PublishError, Verdict};

/// Why a delivery was settled the way it was.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The handler's outcome.
    Handler,
    /// The decode-failure policy: the payload did not decode.
    Decode(String),
    /// The panic policy: the handler panicked.
    Panic(String),
    /// The timeout policy: the handler ran longer than the mount's
    /// [`timeout`](crate::Mount::timeout) and was cancelled.
    Timeout(std::time::Duration),
    /// A middleware settled the delivery before its handler
    /// ([`Middleware::before`](crate::layer::Middleware::before)).
    Layer,
    /// The broker's own count was already past `max_attempts` when the delivery came
    /// (its handler panicked under `fail_fast`, or the service stopped, on the last
    /// attempt): settled as a spent retry, dead-lettered or rejected, **without running
    /// the handler again**, so a poison message stops a service at most `max_attempts`
    /// times.
    Spent,
}

/// A settlement that did not go through.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettleError {
    /// The broker did not settle the original.
    #[error("settlement failed: {0}")]
    Ack(#[from] AckError),
    /// A retry or dead-letter copy could not be published; the original was left
    /// unsettled for the broker to redeliver.
    #[error("copy not published: {0}")]
    Copy(#[from] PublishError),
}

/// A delivery after settlement: what was asked, what was done, and whether the broker
/// took it.
#[derive(Debug)]
pub struct Settled {
    pub(crate) address: Address,
    pub(crate) attempt: u32,
    pub(crate) verdict: Verdict,
    pub(crate) cause: Cause,
    pub(crate) plan: Plan,
    pub(crate) result: Result<(), SettleError>,
    pub(crate) elapsed: Option<Duration>,
}

impl Settled {
    /// The address the delivery arrived on.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Its attempt number (first delivery = 1).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// What the handler or the failure policy asked for.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Whether the handler or a failure policy decided.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// What the runtime did: the copy it published and the original's settlement.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether the settlement went through.
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }

    /// The settlement's failure, if any.
    pub fn error(&self) -> Option<&SettleError> {
        self.result.as_ref().err()
    }

    /// How long the handler's future ran: from the call that made it (its arguments
    /// extracted, the payload decoded) until it gave its outcome, panicked or was
    /// cancelled by the mount's [`timeout`](crate::Mount::timeout), a wait the
    /// middleware wrapped it in ([`Middleware::around`](crate::layer::Middleware::around):
    /// a [`ConcurrencyLimit`](crate::layer::ConcurrencyLimit)'s permit) included.
    ///
    /// `None` where the handler's future did not run: a middleware's
    /// [`before`](crate::layer::Middleware::before) settled the delivery
    /// ([`Cause::Layer`]), its payload did not decode ([`Cause::Decode`]), its attempts
    /// were spent ([`Cause::Spent`]), or the handler panicked while its arguments were
    /// made, before it had a future. Also `None` in the `Settled` an
    /// [`and_after`](crate::Outcome::and_after) is given on a mount with neither
    /// middleware nor an [`after_settle`](crate::App::after_settle) hook: the runtime
    /// reads the clock only where something is told of every settlement.
    ///
    /// Where [`cause`](Settled::cause) is [`Cause::Handler`] this is how long a handler
    /// that returned an outcome took; with [`Cause::Panic`] how long it ran before it
    /// panicked, with [`Cause::Timeout`] at least the limit.
    pub fn elapsed(&self) -> Option<Duration> {
        self.elapsed
    }
}
