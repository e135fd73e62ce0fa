//! Settling deliveries: every settlement marks its offset done, and the group commits
//! up to the lowest offset still in hand; a delayed retry is parked in a delay topic
//! first; an abandoned delivery is read again. Under key order a retry is the record
//! itself, handed out again, and a settlement for good frees its key.

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
use crate::headers;
use crate::order::{Note, Waits};
use crate::record::{Read, Record};

/// The acker of one subscription.
#[derive(Clone)]
pub(crate) struct KafkaAcker {
    pub(crate) group: Arc<Group>,
    pub(crate) consumer: Weak<KafkaConsumer>,
    pub(crate) commits: mpsc::UnboundedSender<Ask>,
    /// Where `RequeueAfter` parks copies, if the subscription delays in topics.
    pub(crate) delays: Option<Arc<Delays>>,
    /// Under key order: where retries in place wait for their delay.
    pub(crate) waits: Option<Waits>,
}

impl KafkaAcker {
    /// Marks the delivery at `at` done: resolved once the commit it allowed is made, or
    /// at once when a delivery below it is still in hand (its commit comes with that
    /// one's).
    fn done(&self, at: Position) -> Settling {
        match self.group.settle(at) {
            Err(()) => Settling::done(Err(AckError::Disconnected)),
            Ok(None) => Settling::done(Ok(())),
            Ok(Some(offset)) => self.commit(at.partition, offset),
        }
    }

    /// Asks the committer to commit `offset` on `partition`: resolved once it is made.
    fn commit(&self, partition: i32, offset: i64) -> Settling {
        let (done, answer) = oneshot::channel();
        let ask = Ask {
            partition,
            offset,
            done,
        };
        if self.commits.send(ask).is_err() {
            return Settling::done(Err(AckError::Disconnected));
        }
        Settling::pending(async move { answer.await.unwrap_or(Err(AckError::Disconnected)) })
    }

    /// Seeks the partition back to the lowest delivery given back: the consumer reads
    /// from there again and delivers only what was given back.
    fn give_back(&self, at: Position, key: Option<&[u8]>) {
        let Some(offset) = self.group.abandon(at, key) else {
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

    /// Key order's retry: the record stays in hand (no commit passes it) and is handed
    /// out again as the next attempt after `delay`, before the later records of its key.
    /// Its attempt and due time are committed in the partition's metadata, so that the
    /// next consumer of the partition (after a stop, a crash, a rebalance) hands it out
    /// as that attempt, when due: resolved once that commit is made.
    fn again(&self, read: Read, message: Message, delay: Duration, waits: &Waits) -> Settling {
        let note = Note::after(read.attempt.saturating_add(1), delay);
        let Ok(position) = self.group.settle_later(read.at, note) else {
            return Settling::done(Err(AckError::Disconnected));
        };
        let record = Record::again(read, message);
        if delay.is_zero() {
            self.group.ready(record);
        } else {
            waits.after(delay, record);
        }
        match position {
            Some(offset) => self.commit(read.at.partition, offset),
            None => Settling::done(Ok(())),
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
                    self.give_back(at, None);
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
    /// first. Under key order a retry is the record itself, held in hand and handed out
    /// again (after its delay); any other settlement frees its key.
    fn settle(&self, tag: Tag, message: Message, settlement: Settlement) -> Settling {
        let Some(read) = Read::of(&tag) else {
            return Settling::done(Err(AckError::Refused("not a kafka delivery".into())));
        };
        let at = read.at;
        if let Some(waits) = &self.waits {
            return match settlement {
                Settlement::Requeue => self.again(read, message, Duration::ZERO, waits),
                Settlement::RequeueAfter(delay) => self.again(read, message, delay, waits),
                _ => {
                    let settling = self.done(at);
                    self.group.release(at, headers::key(&message.headers));
                    settling
                }
            };
        }
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

    fn abandon(&self, tag: Tag, message: Message) {
        if let Some(read) = Read::of(&tag) {
            self.give_back(read.at, headers::key(&message.headers));
        }
    }
}
