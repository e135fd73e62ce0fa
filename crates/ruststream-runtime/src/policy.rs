//! Failure policies: what happens to a delivery whose payload does not decode or whose
//! handler panics.

use std::time::Duration;

use crate::outcome::{self, Outcome};

/// What to do with a delivery the handler could not settle itself.
///
/// Every policy but [`Policy::FailFast`] settles the delivery like the outcome of the
/// same name; [`Policy::Skip`] acknowledges it. `FailFast` stops the service
/// gracefully, leaves the delivery unsettled (a broker that redelivers hands it back
/// after the restart) and makes [`App::run`](crate::App::run) return an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Stop the service, leave the delivery unsettled, fail `run`.
    FailFast,
    /// Acknowledge and move on.
    Skip,
    /// Reject, like [`drop()`](crate::drop).
    Drop,
    /// Retry now, like [`retry()`](crate::retry).
    Retry,
    /// Retry after a delay, like [`retry_after`](crate::retry_after).
    RetryAfter(Duration),
}

impl Policy {
    /// The default for payloads that do not decode.
    pub const DECODE_DEFAULT: Self = Self::Drop;
    /// The default for handlers that panic.
    pub const PANIC_DEFAULT: Self = Self::FailFast;
    /// The default for handlers cancelled by a mount's timeout: retried, through the cap.
    pub const TIMEOUT_DEFAULT: Self = Self::Retry;

    /// The outcome this policy settles with; `None` for [`Policy::FailFast`].
    pub fn outcome(self) -> Option<Outcome> {
        match self {
            Self::FailFast => None,
            Self::Skip => Some(outcome::ack()),
            Self::Drop => Some(outcome::drop()),
            Self::Retry => Some(outcome::retry()),
            Self::RetryAfter(delay) => Some(outcome::retry_after(delay)),
        }
    }
}
