//! Why a connection could not be opened.

use ruststream_core::SubscribeError;

/// A [`PostgresBroker`](crate::PostgresBroker) that did not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL could not be read.
    #[error("bad url: {0}")]
    BadUrl(String),
    /// A setting in the URL's query is unknown or has a bad value.
    #[error(transparent)]
    Setting(#[from] SubscribeError),
    /// PostgreSQL did not answer or refused the connection.
    #[error("cannot reach postgresql at {url}: {reason}")]
    Unreachable {
        /// The URL, its password hidden.
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// The adapter's tables could not be created or migrated.
    #[error("migration failed: {0}")]
    Migration(String),
}
