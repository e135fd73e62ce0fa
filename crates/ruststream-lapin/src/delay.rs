//! Durable delayed redelivery: delay queues that dead-letter back to the queue.
//!
//! `RequeueAfter(d)` publishes a copy of the delivery (with publisher confirms) to the
//! delay queue `QUEUE.delay.MS.quorum` and only then acks the original: a crash in
//! between leaves a duplicate, never a loss. The delay queue is a quorum queue with
//! `x-message-ttl` = `MS`, dead-lettering to the default exchange with `QUEUE` as key, so
//! RabbitMQ moves the copy back when the delay is over, whether or not any consumer
//! process is still running. Its dead-lettering is at least once
//! (`x-dead-letter-strategy: at-least-once`, which needs `x-overflow: reject-publish`;
//! RabbitMQ 3.10 or later): the delay queue keeps an expired copy until `QUEUE` has
//! confirmed it, so a RabbitMQ node that stops or crashes while moving a copy back
//! moves it after its restart instead of dropping it (a classic queue's dead-lettering,
//! the form of the earlier `QUEUE.delay.MS` queues, is at most once). The name says the
//! form: a queue declared with other arguments would refuse the declaration. RabbitMQ expires messages only at a queue's head, so every
//! delay has a queue of its own (one TTL per queue: no copy waits behind a longer one).
//!
//! Delays map to queues by rounding **up** to two significant digits of milliseconds
//! (exact below 100 ms; 1234 ms waits 1300 ms): at most 10 % later than asked, never
//! sooner, and at most 90 delay queues per decade of delays. A delay queue has
//! `x-expires` of its TTL plus [`IDLE_MS`] and is declared again (renewing it) when it
//! is used and its last declaration is older than [`REDECLARE_AFTER`], so RabbitMQ
//! deletes idle ones but never one still holding a copy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lapin::Channel;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use ruststream_core::{Address, Message, PublishErrorKind};

use crate::address::Target;
use crate::connection::Connector;
use crate::publisher::LapinPublisher;

/// The longest delay a delay queue honours: 24 days (RabbitMQ takes a TTL of at most
/// 2³² − 1 ms; this leaves room for the rounding and `x-expires`). A longer
/// `retry_after` is the runtime's copy.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 24 * 3600);

/// How long a delay queue outlives the TTL of its last copy when nobody uses it.
pub(crate) const IDLE_MS: u64 = 600_000;

/// A delay queue is declared again when used after this long (well under [`IDLE_MS`]).
const REDECLARE_AFTER: Duration = Duration::from_secs(60);

/// What a delay queue's name adds to the queue's: `.delay.`, the milliseconds and
/// [`FORM`].
const SUFFIX: &str = ".delay.";

/// The delay queues' form, at the end of their names.
const FORM: &str = ".quorum";

/// The longest queue name RabbitMQ takes.
const MAX_NAME: usize = 255;

/// The milliseconds a delay waits: `delay` rounded up to two significant digits.
pub(crate) fn delay_ms(delay: Duration) -> u64 {
    ruststream_adapter::rounded_delay_ms(delay)
}

/// The delay queue of `queue` for `ms`.
pub(crate) fn queue_name(queue: &str, ms: u64) -> String {
    format!("{queue}{SUFFIX}{ms}{FORM}")
}

/// Whether every delay queue of `queue` has a name RabbitMQ takes.
pub(crate) fn fits(queue: &str) -> bool {
    queue_name(queue, delay_ms(MAX_DELAY)).len() <= MAX_NAME
}

/// The arguments of `queue`'s delay queue for `ms`.
pub(crate) fn arguments(queue: &str, ms: u64) -> FieldTable {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    let number = |n: u64| AMQPValue::LongLongInt(i64::try_from(n).unwrap_or(i64::MAX));
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), text("quorum"));
    args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
    args.insert("x-overflow".into(), text("reject-publish"));
    args.insert("x-message-ttl".into(), number(ms));
    args.insert("x-expires".into(), number(ms.saturating_add(IDLE_MS)));
    args.insert("x-dead-letter-exchange".into(), text(""));
    args.insert("x-dead-letter-routing-key".into(), text(queue));
    args
}

/// Why a copy could not be parked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParkError {
    /// The delay queue could not be declared.
    #[error("declaring delay queue {0}: {1}")]
    Declare(String, String),
    /// The copy was not confirmed.
    #[error("publishing to delay queue {0}: {1}")]
    Publish(String, PublishErrorKind),
}

/// The delay queues of one broker connection: which were declared when, and a channel to
/// declare them on.
#[derive(Debug)]
pub(crate) struct Delays {
    connector: Arc<Connector>,
    publisher: Arc<LapinPublisher>,
    declared: Mutex<HashMap<String, Instant>>,
    channel: tokio::sync::Mutex<Option<Channel>>,
}

impl Delays {
    pub(crate) fn new(connector: Arc<Connector>, publisher: Arc<LapinPublisher>) -> Self {
        Self {
            connector,
            publisher,
            declared: Mutex::new(HashMap::new()),
            channel: tokio::sync::Mutex::new(None),
        }
    }

    /// Waits until the broker closes.
    pub(crate) async fn closing(&self) {
        self.connector.closing().await;
    }

    /// Publishes `copy` to `queue`'s delay queue for `delay`, confirmed by the broker.
    pub(crate) async fn park(
        &self,
        queue: &str,
        delay: Duration,
        copy: Message,
    ) -> Result<(), ParkError> {
        let ms = delay_ms(delay);
        let name = queue_name(queue, ms);
        let target = Target {
            exchange: String::new(),
            routing_key: name.clone(),
        };
        if !self.recently_declared(&name) {
            self.declare(queue, &name, ms).await?;
        }
        let to = || Address::new(name.as_str());
        let copy = match self.publisher.send_to(&target, to(), copy).await {
            Ok(()) => return Ok(()),
            // Returned unroutable: the delay queue went away since it was declared.
            Err(e) if matches!(e.kind, PublishErrorKind::Refused(_)) => e.message,
            Err(e) => return Err(ParkError::Publish(name, e.kind)),
        };
        self.declare(queue, &name, ms).await?;
        self.publisher
            .send_to(&target, to(), copy)
            .await
            .map_err(|e| ParkError::Publish(name.clone(), e.kind))
    }

    fn recently_declared(&self, name: &str) -> bool {
        self.declared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .is_some_and(|at| at.elapsed() < REDECLARE_AFTER)
    }

    async fn declare(&self, queue: &str, name: &str, ms: u64) -> Result<(), ParkError> {
        let failed = |why: String| ParkError::Declare(name.to_owned(), why);
        let mut slot = self.channel.lock().await;
        let channel = match slot.take().filter(|c| c.status().connected()) {
            Some(channel) => channel,
            None => {
                let connection = self.connector.connection().await.map_err(failed)?;
                connection
                    .create_channel()
                    .await
                    .map_err(|e| failed(e.to_string()))?
            }
        };
        let at = Instant::now();
        channel
            .queue_declare(
                name.into(),
                QueueDeclareOptions::durable(),
                arguments(queue, ms),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        // A refusal closes the channel: only a channel that declared is kept.
        *slot = Some(channel);
        drop(slot);
        self.declared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), at);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_delay_fits_rabbitmq() {
        assert_eq!(delay_ms(MAX_DELAY), 2_100_000_000);
        // The longest delay queue's TTL and expiry fit RabbitMQ's 2^32 - 1 ms.
        assert!(delay_ms(MAX_DELAY) + IDLE_MS < u64::from(u32::MAX));
    }

    #[test]
    fn names_fit_or_are_refused() {
        assert_eq!(queue_name("orders", 1300), "orders.delay.1300.quorum");
        assert!(fits("orders"));
        assert!(!fits(&"q".repeat(240)));
    }
}
