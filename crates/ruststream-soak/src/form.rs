//! The broker forms a scenario runs on, and the mount options each one gets.

use std::str::FromStr;
use std::time::Duration;

use ruststream::Mount;
use ruststream_amqp::{QueueType, SubscribeOptions};
use ruststream_redis::{Claiming, DelayedRetry, ReliableList, Stream};

/// A broker and the form of its subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// The in-memory broker (producer and consumers in one process).
    Memory,
    /// A Redis stream with a consumer group, `retry_after` as an in-process copy.
    RedisStream,
    /// A Redis stream with `DelayedRetry::DurableZset`.
    RedisZset,
    /// A Redis stream read by `Claiming`.
    RedisClaiming,
    /// A Redis reliable list.
    RedisList,
    /// A RabbitMQ 4 quorum queue that dead-letters itself (AMQP 1.0).
    AmqpQuorum,
    /// A RabbitMQ 4 classic queue (AMQP 1.0).
    AmqpClassic,
}

/// How long an entry of the claiming form stays pending before it is claimed again.
///
/// `Claiming::new` takes it (its default is 30 s); a retry waits that long, so a soak
/// with 30 % retries uses a shorter one.
pub(crate) const CLAIMING_MIN_IDLE: Duration = Duration::from_secs(2);

impl Form {
    pub(crate) const ALL: [Form; 7] = [
        Form::Memory,
        Form::RedisStream,
        Form::RedisZset,
        Form::RedisClaiming,
        Form::RedisList,
        Form::AmqpQuorum,
        Form::AmqpClassic,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Form::Memory => "memory",
            Form::RedisStream => "redis-stream",
            Form::RedisZset => "redis-zset",
            Form::RedisClaiming => "redis-claiming",
            Form::RedisList => "redis-list",
            Form::AmqpQuorum => "amqp-quorum",
            Form::AmqpClassic => "amqp-classic",
        }
    }

    /// What the form is, in words, for the report.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Form::Memory => "memory broker",
            Form::RedisStream => "Redis stream (consumer group, in-process delayed retry)",
            Form::RedisZset => "Redis stream + `DelayedRetry::DurableZset`",
            Form::RedisClaiming => "Redis `Claiming` (min_idle 2 s)",
            Form::RedisList => "Redis `ReliableList`",
            Form::AmqpQuorum => "RabbitMQ 4 quorum queue (AMQP 1.0, dead-letters itself)",
            Form::AmqpClassic => "RabbitMQ 4 classic queue (AMQP 1.0)",
        }
    }

    pub(crate) fn is_redis(self) -> bool {
        matches!(
            self,
            Form::RedisStream | Form::RedisZset | Form::RedisClaiming | Form::RedisList
        )
    }

    pub(crate) fn is_amqp(self) -> bool {
        matches!(self, Form::AmqpQuorum | Form::AmqpClassic)
    }

    /// Whether the broker moves spent messages to the dead letter itself (a quorum queue
    /// with a delivery limit). Elsewhere, what the broker dead-letters on its own is a
    /// rejected original (a classic queue declared with a dead-letter exchange rejects the
    /// original of each `retry_after` copy into it), not a spent message.
    pub(crate) fn broker_dead_letters(self) -> bool {
        self == Form::AmqpQuorum
    }

    /// Whether `retry_after(50ms)` is a copy held in the consumer's process (lost if the
    /// process is killed before it is published).
    pub(crate) fn delays_in_process(self) -> bool {
        matches!(
            self,
            Form::RedisStream | Form::RedisList | Form::AmqpClassic
        )
    }

    /// The consumer's mount options for this form: the form's defaults, plus the
    /// queue declaration AMQP needs.
    pub(crate) fn configure(self, mount: Mount) -> Mount {
        match self {
            Form::Memory => mount,
            Form::RedisStream => mount.option(Stream::new()),
            Form::RedisZset => mount.option(Stream::new().delayed_retry(DelayedRetry::DurableZset)),
            Form::RedisClaiming => mount.option(Claiming::new(CLAIMING_MIN_IDLE)),
            Form::RedisList => mount.option(ReliableList::new()),
            Form::AmqpQuorum => mount.option(SubscribeOptions::new().declare(QueueType::Quorum)),
            Form::AmqpClassic => mount.option(SubscribeOptions::new().declare(QueueType::Classic)),
        }
    }

    /// The dead-letter consumer's mount options: a plain stream on Redis, a classic
    /// queue on AMQP.
    pub(crate) fn configure_dead(self, mount: Mount) -> Mount {
        if self.is_amqp() {
            mount.option(SubscribeOptions::new().declare(QueueType::Classic))
        } else {
            mount
        }
    }
}

impl FromStr for Form {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Form::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown form {s}"))
    }
}
