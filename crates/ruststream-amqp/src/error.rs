//! The crate's own errors.

/// A connection that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not one this crate understands.
    #[error("bad url: {0}")]
    BadUrl(String),
    /// The TCP connection failed.
    #[error("tcp connect to {addr} failed: {source}")]
    Tcp {
        /// `host:port`.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// TLS (`amqps://`): the configuration could not be built (a CA file that cannot be
    /// read or holds no PEM certificate, no root to trust) or the handshake failed (a
    /// server certificate not trusted, a name that does not match).
    #[error("amqp tls: {0}")]
    Tls(String),
    /// The AMQP open (SASL included) failed.
    #[error("amqp open failed: {0}")]
    Open(String),
    /// A session could not begin on the connection.
    #[error("session begin failed: {0}")]
    Session(String),
    /// The broker is closed.
    #[error("broker closed")]
    Closed,
}
