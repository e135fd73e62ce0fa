//! The adapter's own errors.

use ruststream_core::SubscribeError;

/// A connection that could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a NATS server address.
    #[error("bad url {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to {url}: {reason}")]
    Unreachable {
        /// The URL (its password, if any, left out).
        url: String,
        /// The client's error.
        reason: String,
    },
}

/// A JetStream refusal while `doing` something to `subject`, with the likely fix when
/// the server has no JetStream.
pub(crate) fn jetstream_error(
    doing: &str,
    subject: &str,
    error: impl std::fmt::Display,
) -> SubscribeError {
    let text = error.to_string();
    if text.contains("no responders") || text.contains("not enabled") {
        SubscribeError::Refused(format!(
            "{doing} {subject}: {text} (is JetStream enabled on the server? nats-server -js)"
        ))
    } else {
        SubscribeError::Refused(format!("{doing} {subject}: {text}"))
    }
}
