//! The crate's own errors.

/// A connection that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL (or an option in its query) is not one this crate understands.
    #[error("bad url: {0}")]
    BadUrl(String),
    /// The broker could not be reached, or refused the connection (credentials, vhost).
    #[error("amqp connect to {addr} failed: {reason}")]
    Connect {
        /// `host:port/vhost`.
        addr: String,
        /// What lapin said.
        reason: String,
    },
    /// A TLS setting could not be used (a CA file that does not read).
    #[error("tls: {0}")]
    Tls(String),
}
