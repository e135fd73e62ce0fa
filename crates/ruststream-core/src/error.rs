//! The contract's error types.

use crate::Message;

/// A settlement that did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// The form cannot settle (pre-settled AMQP, Redis plain lists, Pub/Sub), or cannot
    /// settle this way.
    #[error("settlement not supported by this subscription")]
    Unsupported,
    /// The connection is gone; the broker will hand the delivery back.
    #[error("connection lost before settlement")]
    Disconnected,
    /// The broker refused the settlement.
    #[error("broker refused settlement: {0}")]
    Refused(String),
}

/// A message that could not be published; it is handed back unsent.
#[derive(Debug, thiserror::Error)]
#[error("publish to {address} failed: {kind}")]
pub struct PublishError {
    /// Where it was going.
    pub address: String,
    /// Why it failed.
    pub kind: PublishErrorKind,
    /// The unsent message.
    pub message: Message,
}

/// Why a publish failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishErrorKind {
    /// No connection to the broker.
    #[error("not connected")]
    Disconnected,
    /// The broker refused the message.
    #[error("refused: {0}")]
    Refused(String),
    /// The message is larger than the broker takes.
    #[error("message too large ({size} bytes, limit {limit})")]
    TooLarge {
        /// The message's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The address is not one this broker can publish to.
    #[error("bad address: {0}")]
    BadAddress(String),
    /// The broker is shutting down.
    #[error("broker closed")]
    Closed,
}

impl PublishErrorKind {
    /// Whether the same publish may succeed later: an address that does not exist yet
    /// may be made (a dead-letter queue an operator declares), a broker comes back; a
    /// message too large for the broker never fits.
    ///
    /// ```
    /// use ruststream_core::PublishErrorKind;
    ///
    /// assert!(PublishErrorKind::Disconnected.is_transient());
    /// assert!(PublishErrorKind::BadAddress("no queue orders.dead".into()).is_transient());
    /// assert!(!PublishErrorKind::TooLarge { size: 2, limit: 1 }.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::TooLarge { .. })
    }
}

/// A subscription that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubscribeError {
    /// The address is not one this broker can subscribe to.
    #[error("bad address: {0}")]
    BadAddress(String),
    /// An option is out of range or does not fit this form.
    #[error("bad option: {0}")]
    BadOption(String),
    /// The broker refused the subscription.
    #[error("refused: {0}")]
    Refused(String),
    /// No connection to the broker.
    #[error("not connected: {0}")]
    Disconnected(String),
    /// The broker is shutting down.
    #[error("broker closed")]
    Closed,
}

/// A problem reported by a running subscription; the subscription goes on unless it
/// ends its stream.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConsumeError(pub String);
