//! Settling deliveries: every settlement marks its offset done, and the group commits
//! up to the lowest offset still in hand; an abandoned delivery is read again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rdkafka::Offset;
use rdkafka::consumer::Consumer;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};
use tokio::sync::{mpsc, oneshot};

use crate::commit::Ask;
use crate::context::KafkaConsumer;
use crate::group::{Group, Position};

/// The acker of one subscription.
pub(crate) struct KafkaAcker {
    pub(crate) group: Arc<Group>,
    pub(crate) consumer: Weak<KafkaConsumer>,
    pub(crate) commits: mpsc::UnboundedSender<Ask>,
}

fn position(tag: &Tag) -> Option<Position> {
    match tag {
        Tag::Other(any) => any.downcast_ref::<Position>().copied(),
        _ => None,
    }
}

impl Acker for KafkaAcker {
    /// Every settlement is the same to Kafka, which keeps only a position: the offset is
    /// done. The settling resolves once the commit it allowed is made, or at once when
    /// a delivery below it is still in hand (its commit comes with that one's).
    fn settle(&self, tag: Tag, _: Message, settlement: Settlement) -> Settling {
        if matches!(
            settlement,
            Settlement::Requeue | Settlement::RequeueAfter(_)
        ) {
            return Settling::done(Err(AckError::Unsupported));
        }
        let Some(at) = position(&tag) else {
            return Settling::done(Err(AckError::Refused("not a kafka delivery".into())));
        };
        match self.group.settle(at) {
            Err(()) => Settling::done(Err(AckError::Disconnected)),
            Ok(None) => Settling::done(Ok(())),
            Ok(Some(offset)) => {
                let (done, answer) = oneshot::channel();
                let ask = Ask {
                    partition: at.partition,
                    offset,
                    done,
                };
                if self.commits.send(ask).is_err() {
                    return Settling::done(Err(AckError::Disconnected));
                }
                Settling::pending(
                    async move { answer.await.unwrap_or(Err(AckError::Disconnected)) },
                )
            }
        }
    }

    /// Seeks the partition back to the lowest delivery given back: the consumer reads
    /// from there again and delivers only what was given back.
    fn abandon(&self, tag: Tag, _: Message) {
        let Some(at) = position(&tag) else { return };
        let Some(offset) = self.group.abandon(at) else {
            return;
        };
        let Some(consumer) = self.consumer.upgrade() else {
            return;
        };
        // A timeout of zero seeks without waiting (librdkafka's asynchronous seek).
        if let Err(error) = consumer.seek(
            &self.group.topic,
            at.partition,
            Offset::Offset(offset),
            Duration::ZERO,
        ) {
            tracing::warn!(topic = %self.group.topic, partition = at.partition, %error, "seek back failed");
        }
    }
}
