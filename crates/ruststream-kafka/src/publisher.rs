//! Publishing: the idempotent producer, `acks=all`, a publish done once its delivery
//! report says the broker has it.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::sync::Arc;

use rdkafka::producer::FutureRecord;
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::admin;
use crate::headers::{key, to_kafka};
use crate::producer::{KafkaProducer, MAX_MESSAGE, Producer};

/// Publishes to topics through the broker's one producer.
#[derive(Clone)]
pub(crate) struct KafkaPublisher {
    pub(crate) producer: Arc<Producer>,
}

impl Publish for KafkaPublisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async move {
            let used = self.producer.current();
            let mut failed = match send(&used, &to, &message).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            // A producer with a fatal error refuses everything: a new one tries again.
            if self.producer.renew(&used) {
                failed = match send(&self.producer.current(), &to, &message).await {
                    Ok(()) => return Ok(()),
                    Err(error) => error,
                };
            }
            let size = message.payload.len();
            let kind = match kind(&failed, size) {
                // The limit is the topic's, as the cluster describes it.
                PublishErrorKind::TooLarge { limit, .. } => PublishErrorKind::TooLarge {
                    size,
                    limit: admin::max_message(self.producer.cluster(), to.as_str())
                        .await
                        .unwrap_or(limit),
                },
                other => other,
            };
            Err(PublishError {
                address: to.to_string(),
                kind,
                message,
            })
        })
    }
}

/// Sends `message` to `to` and waits for its delivery report.
async fn send(producer: &KafkaProducer, to: &Address, message: &Message) -> Result<(), KafkaError> {
    let mut record = FutureRecord::<[u8], [u8]>::to(to.as_str()).payload(&message.payload[..]);
    if let Some(key) = key(&message.headers) {
        record = record.key(key);
    }
    if let Some(headers) = to_kafka(&message.headers) {
        record = record.headers(headers);
    }
    match producer.send_result(record) {
        Ok(report) => match report.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((error, _))) => Err(error),
            Err(_) => Err(KafkaError::Canceled),
        },
        Err((error, _)) => Err(error),
    }
}

/// What a producer error means to the runtime.
fn kind(error: &KafkaError, size: usize) -> PublishErrorKind {
    if matches!(error, KafkaError::Canceled) {
        // The delivery report never came: the producer went away.
        return PublishErrorKind::Closed;
    }
    match error.rdkafka_error_code() {
        // librdkafka's own limit where the record is over it, else the broker's: Kafka's
        // default until the topic's is read.
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => {
            PublishErrorKind::TooLarge {
                size,
                limit: if size > MAX_MESSAGE {
                    MAX_MESSAGE
                } else {
                    admin::KAFKA_MAX_MESSAGE
                },
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
