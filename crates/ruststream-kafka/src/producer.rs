//! The broker's one idempotent producer, made again after a fatal error.
//!
//! An idempotent librdkafka producer that meets a fatal error (the broker answered a
//! sequence it did not expect: "sequence desynchronization") refuses every publish from
//! then on until it is dropped. Kept, it would fail every retry copy, delayed copy and
//! dead letter of the process for good while its consumers hold their partitions: the
//! soak met it on nisshi 0.8.1 (RELIABILITY.md). So a publish that fails on a producer
//! with a fatal error makes a new one and is tried once more on it.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, Producer as _};

use crate::cluster::Cluster;
use crate::said::{Plain, Said};

/// The producer's type: librdkafka's reports through [`Plain`].
pub(crate) type KafkaProducer = FutureProducer<Plain>;

/// The largest record the producer builds (librdkafka's `message.max.bytes`). The limit
/// that matters is the topic's own `max.message.bytes` (Kafka's default 1,048,588), which
/// the broker enforces and a publish over it reports (`PublishErrorKind::TooLarge`, with
/// the topic's limit): librdkafka's default of 1,000,000 here would refuse records a
/// topic takes, so that a record another producer wrote could not be retried or
/// dead-lettered.
pub const MAX_MESSAGE: usize = 100_000_000;

/// How long librdkafka tries to deliver a record before the publish fails.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The producer in use, and how to make another.
pub(crate) struct Producer {
    cluster: Cluster,
    current: Mutex<KafkaProducer>,
}

impl Producer {
    /// An idempotent producer (`acks=all`) of `cluster`.
    pub(crate) fn new(cluster: &Cluster) -> Result<Self, KafkaError> {
        Ok(Self {
            cluster: cluster.clone(),
            current: Mutex::new(make(cluster)?),
        })
    }

    /// The cluster it publishes to.
    pub(crate) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The producer to publish with now.
    pub(crate) fn current(&self) -> KafkaProducer {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// After a publish through `used` failed: if `used` has a fatal error, a new
    /// producer replaces it (unless another publish replaced it already). Whether the
    /// publish may be tried again on [`current`](Self::current).
    pub(crate) fn renew(&self, used: &KafkaProducer) -> bool {
        let Some((code, reason)) = used.client().fatal_error() else {
            return false;
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if !std::ptr::eq(current.client().native_ptr(), used.client().native_ptr()) {
            return true;
        }
        match make(&self.cluster) {
            Ok(fresh) => {
                tracing::warn!(%code, %reason, "kafka: the producer met a fatal error; a new one replaces it");
                *current = fresh;
                true
            }
            Err(error) => {
                tracing::warn!(%code, %reason, %error, "kafka: the producer met a fatal error and cannot be made again");
                false
            }
        }
    }
}

fn make(cluster: &Cluster) -> Result<KafkaProducer, KafkaError> {
    cluster
        .config()
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.max.bytes", MAX_MESSAGE.to_string())
        .set(
            "message.timeout.ms",
            DELIVERY_TIMEOUT.as_millis().to_string(),
        )
        .create_with_context(Plain(Said::new("producer")))
}

#[cfg(test)]
mod tests {
    use rdkafka::producer::Producer as _;

    use super::Producer;
    use crate::cluster::Cluster;

    #[test]
    fn a_producer_without_a_fatal_error_is_kept() {
        let producer = Producer::new(&Cluster::plain("127.0.0.1:1")).expect("made");
        let used = producer.current();
        assert!(!producer.renew(&used), "nothing fatal: not tried again");
        assert!(std::ptr::eq(
            producer.current().client().native_ptr(),
            used.client().native_ptr()
        ));
    }
}
