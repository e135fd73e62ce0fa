//! The mover: returns parked copies to the retry address when they are due.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message as _, Offset, TopicPartitionList};
use ruststream_core::{Message, Publish};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::{DUE, Delays, delay_of, now_ms, pattern};
use crate::headers::from_kafka;
use crate::publisher::KafkaPublisher;
use crate::said::{Plain, Said};

/// How often the mover's consumer looks for delay topics another process made.
const REFRESH: Duration = Duration::from_secs(10);

/// How long a copy that cannot be published back waits before it is tried again.
const AGAIN: Duration = Duration::from_secs(1);

/// A paused partition: where to read it from again, and when.
type Wake = Reverse<(Instant, String, i32, i64)>;

/// One group's mover: a consumer of every delay topic of the group.
pub(crate) struct Mover {
    consumer: Arc<StreamConsumer<Plain>>,
    group: String,
    back_to: String,
    publisher: KafkaPublisher,
    news: Arc<Notify>,
    stop: watch::Receiver<bool>,
    closed: watch::Receiver<bool>,
    /// Paused partitions and the offset each is read again from.
    paused: HashMap<(String, i32), i64>,
    wakes: BinaryHeap<Wake>,
}

impl Mover {
    /// The mover of `delays`' group, subscribed to its delay topics.
    pub(crate) fn new(delays: &Delays) -> Result<Self, KafkaError> {
        let mut config = delays.cluster.config();
        // The mount's session (a killed process's parked partitions move on as soon as
        // its main ones); the mover polls all the time, so librdkafka's poll interval.
        crate::settings::Timeouts {
            session: delays.session_timeout,
            max_poll: None,
        }
        .apply(&mut config);
        let consumer: StreamConsumer<Plain> = config
            .set("group.id", format!("{}.delay", delays.group))
            .set("group.protocol", "classic")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "1000")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("allow.auto.create.topics", "false")
            .set(
                "topic.metadata.refresh.interval.ms",
                REFRESH.as_millis().to_string(),
            )
            .create_with_context(Plain(Said::new("delay mover")))?;
        consumer.subscribe(&[&pattern(&delays.group)])?;
        Ok(Self {
            consumer: Arc::new(consumer),
            group: delays.group.clone(),
            back_to: delays.back_to.clone(),
            publisher: KafkaPublisher {
                producer: delays.producer.clone(),
            },
            news: delays.news.clone(),
            stop: delays.stop.clone(),
            closed: delays.closed.clone(),
            paused: HashMap::new(),
            wakes: BinaryHeap::new(),
        })
    }

    /// Moves due copies until the subscription stops or the broker closes, then commits
    /// what it moved and leaves its group.
    pub(crate) async fn run(mut self) {
        let (mut stop, mut closed) = (self.stop.clone(), self.closed.clone());
        loop {
            let wake = self.wakes.peek().map(|Reverse((at, ..))| *at);
            tokio::select! {
                () = ended(&mut stop) => break,
                () = ended(&mut closed) => break,
                () = self.news.notified() => self.look_again().await,
                () = sleep_until(wake) => self.wake(),
                received = self.consumer.recv() => match received {
                    Ok(record) => {
                        let record = Record::of(&record);
                        self.take(record).await;
                    }
                    Err(error) => {
                        // A cluster away is said once a minute, by the client's context.
                        if !crate::said::is_transport(&error) {
                            tracing::warn!(group = %self.group, %error, "kafka: delay mover");
                        }
                        tokio::time::sleep(AGAIN).await;
                    }
                },
            }
        }
        let consumer = self.consumer;
        crate::close::close(&self.group, move || {
            let _ = consumer.commit_consumer_state(CommitMode::Sync);
            drop(consumer);
        })
        .await;
    }

    /// Asks for the cluster's topics, so that a delay topic made here is read at once.
    async fn look_again(&self) {
        let consumer = self.consumer.clone();
        let _ = tokio::task::spawn_blocking(move || {
            consumer
                .client()
                .fetch_metadata(None, Duration::from_secs(10))
                .map(drop)
        })
        .await;
    }

    /// One copy read: moved back if due, else its partition waits for it.
    async fn take(&mut self, record: Record) {
        let key = (record.topic.clone(), record.partition);
        if self.paused.contains_key(&key) {
            // Fetched before the pause; read again after it.
            return;
        }
        // Due when its header says, never later than its topic's delay from now (a copy
        // whose header was lost or forged waits one delay at most).
        let now = now_ms();
        let delay = delay_of(&self.group, &record.topic).unwrap_or(0);
        let due = record
            .due
            .unwrap_or_else(|| record.timestamp.saturating_add(delay))
            .min(now.saturating_add(delay));
        if due > now {
            self.hold(key, record.offset, Duration::from_millis(due - now));
            return;
        }
        let message = Message {
            payload: record.payload,
            headers: record.headers,
        };
        match self
            .publisher
            .publish(self.back_to.as_str().into(), message)
            .await
        {
            Ok(()) => {
                if let Err(error) =
                    self.consumer
                        .store_offset(&record.topic, record.partition, record.offset)
                {
                    tracing::debug!(topic = %record.topic, %error, "kafka: delay offset not stored");
                }
            }
            Err(error) => {
                tracing::warn!(topic = %record.topic, to = %self.back_to, %error,
                    "kafka: cannot move a due copy back; trying again");
                self.hold(key, record.offset, AGAIN);
            }
        }
    }

    /// Pauses the partition `key` and reads it again from `offset` after `wait`.
    fn hold(&mut self, key: (String, i32), offset: i64, wait: Duration) {
        let mut list = TopicPartitionList::new();
        list.add_partition(&key.0, key.1);
        if let Err(error) = self.consumer.pause(&list) {
            tracing::debug!(topic = %key.0, %error, "kafka: pause failed");
        }
        self.wakes.push(Reverse((
            Instant::now() + wait,
            key.0.clone(),
            key.1,
            offset,
        )));
        self.paused.insert(key, offset);
    }

    /// Resumes every partition whose wait is over, from the copy it waited for.
    fn wake(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, ..))) = self.wakes.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, topic, partition, offset))) = self.wakes.pop() else {
                break;
            };
            let key = (topic, partition);
            if self.paused.get(&key) != Some(&offset) {
                continue;
            }
            self.paused.remove(&key);
            // Resumed first, then sought back to the copy: librdkafka's fetcher is woken
            // by the seek, not by the resume, so a seek made first could wake it while
            // the partition was still paused, and it then slept up to a second before
            // looking again (seen in its debug log). What was fetched before the seek is
            // dropped by librdkafka.
            let mut list = TopicPartitionList::new();
            list.add_partition(&key.0, key.1);
            if let Err(error) = self.consumer.resume(&list) {
                tracing::debug!(topic = %key.0, %error, "kafka: resume failed");
            }
            if let Err(error) =
                self.consumer
                    .seek(&key.0, key.1, Offset::Offset(offset), Duration::ZERO)
            {
                tracing::debug!(topic = %key.0, %error, "kafka: seek failed");
            }
        }
    }
}

/// Waits until `flag` is set or its sender is gone.
async fn ended(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the mover needs of a record, owned.
struct Record {
    topic: String,
    partition: i32,
    offset: i64,
    timestamp: u64,
    due: Option<u64>,
    payload: Bytes,
    headers: ruststream_core::Headers,
}

impl Record {
    fn of(record: &BorrowedMessage<'_>) -> Self {
        let mut headers = from_kafka(record.headers(), record.key()).unwrap_or_default();
        let due = headers.get_str(DUE).and_then(|due| due.parse::<u64>().ok());
        headers.remove(DUE);
        Self {
            topic: record.topic().to_owned(),
            partition: record.partition(),
            offset: record.offset(),
            timestamp: record
                .timestamp()
                .to_millis()
                .and_then(|ms| u64::try_from(ms).ok())
                .unwrap_or(0),
            due,
            payload: Bytes::copy_from_slice(record.payload().unwrap_or_default()),
            headers,
        }
    }
}
