//! The adapter's own errors.

/// Why [`RedisBroker::connect`](crate::RedisBroker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not one this adapter understands.
    #[error("bad redis url: {0}")]
    BadUrl(String),
    /// A `rediss://` URL without the `tls` feature.
    #[error("rediss:// needs the `tls` feature of ruststream-redis")]
    TlsDisabled,
    /// The server could not be reached or refused the connection (auth, protocol).
    #[error("cannot connect to redis: {0}")]
    Connect(String),
}
