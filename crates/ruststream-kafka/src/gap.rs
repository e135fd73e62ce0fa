//! Offsets a subscription's fetch passed over, said at debug under this module's target
//! (`ruststream_kafka::gap`).
//!
//! A consumer reads a partition's offsets in order, and on Kafka the only ones it does
//! not see are records compacted away, transaction markers and aborted transactions'
//! records. A broker that hands out a later batch before an earlier one is readable
//! makes the consumer go on past records it stores and acknowledges (nisshi 0.8.1,
//! docs/kafka.md): the group then commits past them and nothing reads them. Saying
//! where the fetch passed over tells such a record apart from one the subscription read
//! and lost (`ruststream-soak` reads it so).

/// The fetch of `topic`'s `partition` handed over `to` where `from` was next: the
/// offsets `from..to` were not read.
pub(crate) fn passed_over(topic: &str, partition: i32, from: i64, to: i64) {
    tracing::debug!(
        topic,
        partition,
        from,
        to,
        "kafka: the fetch passed over offsets"
    );
}
