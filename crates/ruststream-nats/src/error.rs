//! The adapter's own errors.

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
