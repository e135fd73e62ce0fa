//! Why the broker did not open.

use ruststream_core::SubscribeError;

/// Why [`KafkaBroker::connect`](crate::KafkaBroker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a Kafka URL this adapter reads.
    #[error("bad url: {0}")]
    Url(String),
    /// A setting in the URL's query has a bad value, or is one the URL has no use for.
    #[error("{0}")]
    Setting(#[from] SubscribeError),
    /// The TLS configuration could not be made (a CA file that cannot be read).
    #[error("tls: {0}")]
    Tls(String),
    /// No bootstrap server answered: each refused the connection, or none answered in
    /// time.
    #[error("cannot reach kafka at {servers}: {reason}")]
    Unreachable {
        /// The bootstrap servers tried.
        servers: String,
        /// What the last try met.
        reason: String,
    },
    /// A server answered and refused the client: its TLS handshake or its SASL
    /// credentials or mechanism.
    #[error("kafka at {servers} refused the client: {reason}")]
    Refused {
        /// The bootstrap servers tried.
        servers: String,
        /// What the server or librdkafka said.
        reason: String,
    },
    /// librdkafka refused the configuration.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
}
