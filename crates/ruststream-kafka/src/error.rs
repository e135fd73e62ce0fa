//! Why the broker did not open.

/// Why [`KafkaBroker::connect`](crate::KafkaBroker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a Kafka URL this adapter reads.
    #[error("bad url: {0}")]
    Url(String),
    /// No bootstrap server answered: each refused the connection, or none answered in
    /// time.
    #[error("cannot reach kafka at {servers}: {reason}")]
    Unreachable {
        /// The bootstrap servers tried.
        servers: String,
        /// What the last try met.
        reason: String,
    },
    /// librdkafka refused the configuration.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
}
