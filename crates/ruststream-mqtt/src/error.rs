//! Why the broker did not open.

use ruststream_core::SubscribeError;

/// Why [`MqttBroker::connect`](crate::MqttBroker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not an MQTT URL this adapter reads.
    #[error("bad url: {0}")]
    Url(String),
    /// A setting in the URL's query is unknown or has a bad value.
    #[error("{0}")]
    Setting(#[from] SubscribeError),
    /// The TLS configuration could not be made (a CA file that cannot be read).
    #[error("tls: {0}")]
    Tls(String),
    /// The broker did not answer, or refused the connection.
    #[error("mqtt broker at {at}: {why}")]
    Unreachable {
        /// `host:port`.
        at: String,
        /// What went wrong.
        why: String,
    },
}
