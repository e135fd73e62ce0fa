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
    /// The server could not be reached or refused the connection (auth, protocol, a
    /// TLS handshake that failed: a certificate not trusted).
    #[error("cannot connect to redis: {0}")]
    Connect(String),
    /// The TLS configuration could not be built: a CA file that cannot be read or holds
    /// no PEM certificate, or no root certificate to trust at all.
    #[error("redis tls: {0}")]
    Tls(String),
}
