//! Failure policies: what happens to a delivery whose payload does not decode, whose
//! handler panics or runs out of time.

use std::any::Any;
use std::time::Duration;

use ruststream_core::{Address, Delivery, MESSAGE_ID};

use crate::outcome::{self, Outcome};
use crate::settled::Cause;
use crate::shutdown::Shutdown;

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

    /// What this policy decides for a delivery of the mount at `address` that `cause`
    /// left unsettled, logged at warn with the delivery's message id and attempt; `None`
    /// for [`Policy::FailFast`], which logs at error and stops the service (`shutdown`)
    /// with the reason.
    #[cold]
    pub(crate) fn decide(
        self,
        cause: Cause,
        address: &Address,
        delivery: Option<&Delivery>,
        shutdown: &Shutdown,
    ) -> Option<(Outcome, Cause)> {
        let Some(outcome) = self.outcome() else {
            let reason = match &cause {
                Cause::Decode(e) => format!("payload on {address} did not decode: {e}"),
                Cause::Panic(e) => format!("handler on {address} panicked: {e}"),
                Cause::Timeout(limit) => format!("handler on {address} ran longer than {limit:?}"),
                Cause::Handler | Cause::Layer | Cause::Spent => {
                    format!("handler on {address} failed")
                }
            };
            tracing::error!(%reason, "fail_fast: stopping the service; the delivery stays unsettled");
            shutdown.fail(reason);
            return None;
        };
        let what = match &cause {
            Cause::Decode(_) => "payload did not decode",
            Cause::Panic(_) => "handler panicked",
            Cause::Timeout(_) => "handler timed out",
            _ => "handler failed",
        };
        tracing::warn!(
            %address,
            message_id = delivery.and_then(|d| d.headers().get_str(MESSAGE_ID)),
            attempt = delivery.map(Delivery::redelivery_count),
            ?cause,
            policy = ?self,
            verdict = ?outcome.verdict,
            "{what}: the failure policy settles it"
        );
        Some((outcome, cause))
    }
}

/// What a panic's payload says: its message, where it is a string.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}
