//! Settling deliveries: every settlement marks its offset done, and the group commits
//! up to the lowest offset still in hand; a delayed retry is parked in a delay topic
//! first; an abandoned delivery is read again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rdkafka::Offset;
use rdkafka::consumer::Consumer;
use ruststream_core::{AckError, Acker, Message, Settlement, Settling, Tag};
use tokio::sync::{mpsc, oneshot};

use crate::commit::Ask;
use crate::context::KafkaConsumer;
use crate::delay::Delays;
use crate::group::{Group, Position};

/// The acker of one subscription.
#[derive(Clone)]
pub(crate) struct KafkaAcker {
    pub(crate) group: Arc<Group>,
    pub(crate) consumer: Weak<KafkaConsumer>,
    pub(crate) commits: mpsc::UnboundedSender<Ask>,
    /// Where `RequeueAfter` parks copies, if the subscription delays.
    pub(crate) delays: Option<Arc<Delays>>,
}

fn position(tag: &Tag) -> Option<Position> {
    match tag {
        Tag::Other(any) => any.downcast_ref::<Position>().copied(),
        _ => None,
    }
}

impl KafkaAcker {
    /// Marks the delivery at `at` done: resolved once the commit it allowed is made, or
    /// at once when a delivery below it is still in hand (its commit comes with that
    /// one's).
    fn done(&self, at: Position) -> Settling {
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
    fn give_back(&self, at: Position) {
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

    /// `RequeueAfter(delay)`: the copy is in the delay topic, then the original is done
    /// (a crash in between: a duplicate). A copy that cannot be parked leaves the
    /// original in hand for the delay and then gives it back: nothing is lost, but that
    /// wait is the process's own.
    async fn later(
        self,
        delays: Arc<Delays>,
        at: Position,
        delay: Duration,
        message: Message,
    ) -> Result<(), AckError> {
        match delays.park(delay, message).await {
            Ok(()) => self.done(at).await,
            Err(why) => {
                tracing::warn!(topic = %self.group.topic, error = %why,
                    "kafka: cannot park the delayed copy; holding the delivery for the delay instead");
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    self.give_back(at);
                });
                Err(AckError::Refused(format!(
                    "{why}; held for the delay instead (not durable)"
                )))
            }
        }
    }
}

impl Acker for KafkaAcker {
    /// Every settlement but a delayed retry is the same to Kafka, which keeps only a
    /// position: the offset is done. A delayed retry parks its copy in the delay topic
    /// first.
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Some(at) = position(&tag) else {
            return Settling::done(Err(AckError::Refused("not a kafka delivery".into())));
        };
        match (settlement, &self.delays) {
            (Settlement::RequeueAfter(delay), Some(delays)) => {
                Settling::pending(self.clone().later(delays.clone(), at, delay, message))
            }
            (Settlement::Requeue | Settlement::RequeueAfter(_), _) => {
                Settling::done(Err(AckError::Unsupported))
            }
            _ => self.done(at),
        }
    }

    fn abandon(&self, tag: Tag, _: Message) {
        if let Some(at) = position(&tag) {
            self.give_back(at);
        }
    }
}
