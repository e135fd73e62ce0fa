//! Publishing: the idempotent producer, `acks=all`, a publish done once its delivery
//! report says the broker has it.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::headers::to_kafka;

/// The largest record the producer sends (librdkafka's `message.max.bytes`, as Kafka's
/// default).
pub const MAX_MESSAGE: usize = 1_000_000;

/// Publishes to topics through the broker's one producer.
#[derive(Clone)]
pub(crate) struct KafkaPublisher {
    pub(crate) producer: FutureProducer,
}

impl Publish for KafkaPublisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            let mut record =
                FutureRecord::<(), [u8]>::to(to.as_str()).payload(&message.payload[..]);
            if let Some(headers) = to_kafka(&message.headers) {
                record = record.headers(headers);
            }
            let sent = match self.producer.send_result(record) {
                Ok(report) => report.await.map_err(|_| PublishErrorKind::Closed),
                Err((error, _)) => Err(kind(&error, message.payload.len())),
            };
            let failed = match sent {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err((error, _))) => kind(&error, message.payload.len()),
                Err(kind) => kind,
            };
            Err(PublishError {
                address: to.to_string(),
                kind: failed,
                message,
            })
        })
    }
}

/// What a producer error means to the runtime.
fn kind(error: &KafkaError, size: usize) -> PublishErrorKind {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => {
            PublishErrorKind::TooLarge {
                size,
                limit: MAX_MESSAGE,
            }
        }
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            PublishErrorKind::BadAddress(format!("no topic: {error}"))
        }
        // librdkafka refuses a name Kafka does not take before sending anything.
        Some(RDKafkaErrorCode::InvalidTopic) => {
            PublishErrorKind::BadAddress(format!("not a topic name: {error}"))
        }
        Some(RDKafkaErrorCode::MessageTimedOut | RDKafkaErrorCode::AllBrokersDown) => {
            PublishErrorKind::Disconnected
        }
        _ => PublishErrorKind::Refused(error.to_string()),
    }
}
