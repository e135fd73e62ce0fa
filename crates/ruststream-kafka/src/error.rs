//! Why the broker did not open.

/// Why [`KafkaBroker::connect`](crate::KafkaBroker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not a Kafka URL this adapter reads.
    #[error("bad url: {0}")]
    Url(String),
    /// librdkafka refused the configuration or could not reach the cluster.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
}
