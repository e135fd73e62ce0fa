//! Durable delayed retries: delay topics, and a mover that sends their copies back.
//!
//! `RequeueAfter(d)` publishes a copy of the delivery to the delay topic
//! `<group>.delay.<ms>` (made where missing, with the source topic's partitions and a
//! retention of the delay plus [`KEEP_AFTER_DUE`]) and only then marks the original
//! done: a crash in between leaves a duplicate, never a loss. The copy carries the next
//! attempt in `x-ruststream-retry-count` and the moment it is due in [`DUE`].
//!
//! The group's mover (a consumer of its own, group `<group>.delay`, on every delay topic
//! of the group) publishes each copy back to the mount's retry address when it is due,
//! and only then commits past it. A partition whose head is not due yet is paused until
//! it is, so a copy waits in the topic, not in memory, and never behind a longer delay:
//! every delay has a topic of its own (rounded up to two significant digits of
//! milliseconds: at most 10 % later than asked). Whichever process of the group is
//! running moves the copies, whether or not the one that parked them still is.

mod mover;

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{NewTopic, TopicReplication};
use ruststream_adapter::rounded_delay_ms;
use ruststream_core::{Declaration, Facts, Message, Publish, RETRY_COUNT};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin;
use crate::cluster::Cluster;
use crate::producer::Producer;
use crate::publisher::KafkaPublisher;

pub(crate) use mover::Mover;

/// The header a parked copy carries: when it is due, in milliseconds since the Unix
/// epoch. The mover takes it off before the copy goes back.
pub(crate) const DUE: &str = "x-ruststream-due";

/// How long a delay topic keeps a copy after it is due (Kafka's `retention.ms` of the
/// topic is the delay plus this): a mover stopped for less than this loses nothing.
pub(crate) const KEEP_AFTER_DUE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest topic name Kafka takes.
const MAX_NAME: usize = 249;

/// What a delay topic's name adds to the group's.
const SUFFIX: &str = ".delay.";

/// The delay topic of `group` for `ms`.
pub(crate) fn topic_name(group: &str, ms: u64) -> String {
    format!("{group}{SUFFIX}{ms}")
}

/// Whether every delay topic of `group` has a name Kafka takes (ASCII letters, digits,
/// `.`, `_`, `-`; at most 249).
pub(crate) fn fits(group: &str) -> bool {
    group
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && topic_name(group, u64::MAX).len() <= MAX_NAME
}

/// The delay of a delay topic of `group`, if `topic` is one.
pub(crate) fn delay_of(group: &str, topic: &str) -> Option<u64> {
    let ms = topic.strip_prefix(group)?.strip_prefix(SUFFIX)?;
    if ms.is_empty() || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    ms.parse().ok()
}

/// The subscription pattern of `group`'s delay topics (librdkafka's regular expression).
pub(crate) fn pattern(group: &str) -> String {
    format!("^{}\\.delay\\.[0-9]+$", group.replace('.', "\\."))
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One subscription's delay topics: where its `RequeueAfter` parks copies.
pub(crate) struct Delays {
    pub(crate) cluster: Cluster,
    pub(crate) producer: Arc<Producer>,
    pub(crate) group: String,
    /// Where a due copy goes: the mount's retry address (its own topic by default).
    pub(crate) back_to: String,
    /// The source topic's partitions: a delay topic gets as many.
    pub(crate) partitions: i32,
    pub(crate) max_attempts: Option<NonZeroU32>,
    /// The delays whose topics are known to exist.
    made: Mutex<HashSet<u64>>,
    /// The group's mover, once started, with what ends it.
    mover: Mutex<Option<JoinHandle<()>>>,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) closed: watch::Receiver<bool>,
    /// Told when this process made a delay topic, for the mover to look again.
    pub(crate) news: Arc<tokio::sync::Notify>,
    /// The mount's `session_timeout`, which the mover's consumer takes too.
    pub(crate) session_timeout: Option<std::time::Duration>,
}

/// Why a copy could not be parked.
pub(crate) type ParkError = String;

impl Delays {
    /// The delay topics of `group`; nothing is made or started yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cluster: Cluster,
        producer: Arc<Producer>,
        group: String,
        back_to: String,
        partitions: i32,
        declaration: &Declaration,
        stop: watch::Receiver<bool>,
        closed: watch::Receiver<bool>,
    ) -> Self {
        Self {
            cluster,
            producer,
            group,
            back_to,
            partitions: partitions.max(1),
            max_attempts: declaration.max_attempts,
            made: Mutex::new(HashSet::new()),
            mover: Mutex::new(None),
            stop,
            closed,
            news: Arc::new(tokio::sync::Notify::new()),
            session_timeout: None,
        }
    }

    /// The copy of `message` that replaces it: the next attempt, due in `ms`.
    fn copy_of(&self, mut message: Message, ms: u64) -> Message {
        let facts = Facts {
            attempt: message.headers.retry_count().saturating_add(1),
            counts: false,
        };
        let declaration = Declaration {
            max_attempts: self.max_attempts,
            ..Declaration::default()
        };
        let attempt = facts.within(&declaration).attempt;
        message.headers.insert(RETRY_COUNT, attempt);
        message
            .headers
            .insert(DUE, now_ms().saturating_add(ms).to_string());
        message
    }

    /// Parks a copy of `message` for `delay`: resolved once the delay topic has it.
    pub(crate) async fn park(
        self: &Arc<Self>,
        delay: Duration,
        message: Message,
    ) -> Result<(), ParkError> {
        let ms = rounded_delay_ms(delay);
        let topic = topic_name(&self.group, ms);
        self.make(&topic, ms).await?;
        self.start_mover();
        let copy = self.copy_of(message, ms);
        let publisher = KafkaPublisher {
            producer: self.producer.clone(),
        };
        publisher
            .publish(topic.as_str().into(), copy)
            .await
            .map_err(|error| format!("delay topic {topic}: {}", error.kind))
    }

    /// Makes the delay topic of `ms` where the cluster lacks it.
    async fn make(&self, topic: &str, ms: u64) -> Result<(), ParkError> {
        if self.made().contains(&ms) {
            return Ok(());
        }
        let (cluster, name) = (self.cluster.clone(), topic.to_owned());
        let found = tokio::task::spawn_blocking(move || admin::exists(&cluster, &name))
            .await
            .map_err(|_| "closing".to_owned())?
            .map_err(|error| error.to_string())?;
        if !found {
            let retention = Duration::from_millis(ms)
                .saturating_add(KEEP_AFTER_DUE)
                .as_millis()
                .to_string();
            let new = NewTopic::new(topic, self.partitions, TopicReplication::Fixed(-1))
                .set("retention.ms", &retention);
            match admin::create_with(&self.cluster, new).await {
                Ok(()) => {
                    tracing::info!(%topic, group = %self.group, "kafka: made a delay topic");
                    self.news.notify_one();
                }
                Err(why) if why.contains("TopicAlreadyExists") => {}
                Err(why) => return Err(format!("cannot make the delay topic {topic}: {why}")),
            }
        }
        self.made().insert(ms);
        Ok(())
    }

    fn made(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the group's mover if it is not running.
    pub(crate) fn start_mover(self: &Arc<Self>) {
        let mut mover = self.mover.lock().unwrap_or_else(PoisonError::into_inner);
        if mover.is_some() {
            return;
        }
        match Mover::new(self) {
            Ok(one) => *mover = Some(tokio::spawn(one.run())),
            Err(error) => {
                tracing::warn!(group = %self.group, %error, "kafka: cannot start the delay mover");
            }
        }
    }

    /// Waits for the mover to end (after the subscription's stop or the broker's close).
    pub(crate) async fn finished(&self) {
        let handle = self
            .mover
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        assert_eq!(
            topic_name("ruststream.orders", 1300),
            "ruststream.orders.delay.1300"
        );
        assert_eq!(
            delay_of("ruststream.orders", "ruststream.orders.delay.1300"),
            Some(1300)
        );
        assert_eq!(
            delay_of("ruststream.orders", "ruststream.orders.delay."),
            None
        );
        assert_eq!(
            delay_of("ruststream.orders", "ruststream.orders.delay.1x"),
            None
        );
        assert_eq!(delay_of("ruststream.orders", "other.delay.1"), None);
        assert_eq!(pattern("a.b-c"), "^a\\.b-c\\.delay\\.[0-9]+$");
    }

    #[test]
    fn a_group_kafka_cannot_name_topics_after_does_not_delay() {
        assert!(fits("ruststream.orders"));
        assert!(!fits("billing team"));
        assert!(!fits(&"g".repeat(230)));
    }
}
