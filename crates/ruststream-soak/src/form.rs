//! The broker forms a scenario runs on, and the mount options each one gets.

use std::str::FromStr;
use std::time::Duration;

use ruststream::Mount;
use ruststream_amqp::{QueueType, SubscribeOptions};
use ruststream_lapin::{QueueType as LapinQueueType, SubscribeOptions as LapinOptions};
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
    /// A RabbitMQ 4 quorum queue made by the operator (`x-queue-type` only), over AMQP
    /// 1.0, the mount's default options.
    AmqpQuorum,
    /// A RabbitMQ 4 quorum queue that dead-letters itself, made by the mount's
    /// `declare(Quorum)` (AMQP 1.0).
    AmqpDeclared,
    /// A RabbitMQ 4 classic queue made by the operator, over AMQP 1.0, default options.
    AmqpClassic,
    /// A RabbitMQ 4 quorum queue made by the operator (`x-queue-type` only: no delivery
    /// limit, no dead-letter exchange), over AMQP 0-9-1 (lapin), the mount's default
    /// options.
    LapinQuorum,
    /// A RabbitMQ 4 quorum queue that dead-letters itself, made by the mount's
    /// `declare(Quorum)`, over AMQP 0-9-1 (lapin).
    LapinDeclared,
    /// A RabbitMQ 4 classic queue made by the operator, over AMQP 0-9-1 (lapin), the
    /// mount's default options.
    LapinClassic,
    /// A NATS JetStream durable pull consumer (the stream made from the mount).
    Nats,
    /// A PostgreSQL queue (rows claimed under a lease), the adapter's default options.
    Postgres,
    /// A Kafka topic of three partitions made by the operator, read by the adapter's
    /// default mount: one delivery at a time, the group the adapter chooses.
    Kafka,
    /// The same with `workers(8)`: deliveries of one partition settled out of order, the
    /// group committing only below the lowest one unfinished.
    KafkaWorkers,
    /// The default mount with the URL's `session_timeout=6s`: a killed consumer's
    /// partitions go to the others after 6 s instead of librdkafka's 45.
    KafkaSession6s,
    /// The default mount with `KeyOrder`, messages published with 16 keys: a retry is
    /// the record itself, kept in hand (no commit passes it) while its key's later
    /// records wait.
    KafkaKeyOrder,
    /// MQTT 5 on Mosquitto, the adapter's default mount: a QoS 1 subscription shared in
    /// the group `ruststream`, on a persistent session of each consumer's own.
    Mqtt,
}

/// The broker a form runs on: where its URL comes from, and how what is left on it is
/// asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Server {
    /// The in-memory broker, in the harness's process.
    Memory,
    /// Redis (`RUSTSTREAM_REDIS_URL`).
    Redis,
    /// RabbitMQ 4 over AMQP 1.0 (`RUSTSTREAM_AMQP_URL`).
    Amqp,
    /// RabbitMQ 4 over AMQP 0-9-1 (`RUSTSTREAM_LAPIN4_URL`).
    Lapin,
    /// NATS with JetStream (`RUSTSTREAM_NATS_URL`).
    Nats,
    /// PostgreSQL (`RUSTSTREAM_POSTGRES_URL`).
    Postgres,
    /// A Kafka-protocol broker (`RUSTSTREAM_KAFKA_URL`).
    Kafka,
    /// An MQTT 5 broker, Mosquitto 2 (`RUSTSTREAM_MQTT_URL`).
    Mqtt,
}

impl Server {
    /// The broker's URL: its variable, or the address `scripts/test` runs it on.
    pub(crate) fn url(self) -> String {
        let (var, default) = match self {
            Server::Memory => return "memory://".to_owned(),
            Server::Redis => ("RUSTSTREAM_REDIS_URL", "redis://127.0.0.1:6379"),
            Server::Amqp => ("RUSTSTREAM_AMQP_URL", "amqp://guest:guest@127.0.0.1:5673"),
            Server::Lapin => (
                "RUSTSTREAM_LAPIN4_URL",
                "amqp://guest:guest@127.0.0.1:5673/%2f",
            ),
            Server::Nats => ("RUSTSTREAM_NATS_URL", "nats://127.0.0.1:4222"),
            Server::Postgres => (
                "RUSTSTREAM_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            Server::Kafka => ("RUSTSTREAM_KAFKA_URL", "kafka://127.0.0.1:9092"),
            Server::Mqtt => ("RUSTSTREAM_MQTT_URL", "mqtt://127.0.0.1:1883"),
        };
        std::env::var(var).unwrap_or_else(|_| default.to_owned())
    }

    /// Whether it is the machine's RabbitMQ 4 (`scripts/rabbitmq4.sh`), either protocol.
    pub(crate) fn is_rabbit(self) -> bool {
        matches!(self, Server::Amqp | Server::Lapin)
    }
}

/// How long an entry of the claiming form stays pending before it is claimed again.
///
/// `Claiming::new` takes it (its default is 30 s); a retry waits that long, so a soak
/// with 30 % retries uses a shorter one.
pub(crate) const CLAIMING_MIN_IDLE: Duration = Duration::from_secs(2);

impl Form {
    pub(crate) const ALL: [Form; 18] = [
        Form::Memory,
        Form::RedisStream,
        Form::RedisZset,
        Form::RedisClaiming,
        Form::RedisList,
        Form::AmqpQuorum,
        Form::AmqpDeclared,
        Form::AmqpClassic,
        Form::LapinQuorum,
        Form::LapinDeclared,
        Form::LapinClassic,
        Form::Nats,
        Form::Postgres,
        Form::Kafka,
        Form::KafkaWorkers,
        Form::KafkaSession6s,
        Form::KafkaKeyOrder,
        Form::Mqtt,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Form::Memory => "memory",
            Form::RedisStream => "redis-stream",
            Form::RedisZset => "redis-zset",
            Form::RedisClaiming => "redis-claiming",
            Form::RedisList => "redis-list",
            Form::AmqpQuorum => "amqp-quorum",
            Form::AmqpDeclared => "amqp-declared",
            Form::AmqpClassic => "amqp-classic",
            Form::LapinQuorum => "lapin-quorum",
            Form::LapinDeclared => "lapin-declared",
            Form::LapinClassic => "lapin-classic",
            Form::Nats => "nats",
            Form::Postgres => "postgres",
            Form::Kafka => "kafka",
            Form::KafkaWorkers => "kafka-workers",
            Form::KafkaSession6s => "kafka-session-6s",
            Form::KafkaKeyOrder => "kafka-key-order",
            Form::Mqtt => "mqtt",
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
            Form::AmqpQuorum => {
                "RabbitMQ 4 quorum queue made by the operator (AMQP 1.0, default options)"
            }
            Form::AmqpDeclared => {
                "RabbitMQ 4 quorum queue, `declare(Quorum)` (AMQP 1.0, dead-letters itself)"
            }
            Form::AmqpClassic => {
                "RabbitMQ 4 classic queue made by the operator (AMQP 1.0, default options)"
            }
            Form::LapinQuorum => {
                "RabbitMQ 4 quorum queue made by the operator (AMQP 0-9-1, lapin, default options)"
            }
            Form::LapinDeclared => {
                "RabbitMQ 4 quorum queue, `declare(Quorum)` (AMQP 0-9-1, lapin, dead-letters itself)"
            }
            Form::LapinClassic => {
                "RabbitMQ 4 classic queue made by the operator (AMQP 0-9-1, lapin, default options)"
            }
            Form::Nats => "NATS JetStream (durable pull consumer, `-NAK` with delay)",
            Form::Postgres => {
                "PostgreSQL queue (rows claimed with SKIP LOCKED under a 30 s lease, durable delays)"
            }
            Form::Kafka => {
                "Kafka topic of 3 partitions made by the operator (default mount and group, delay topics)"
            }
            Form::KafkaWorkers => {
                "Kafka topic of 3 partitions made by the operator, `workers(8)` (out-of-order settlements)"
            }
            Form::KafkaSession6s => {
                "Kafka topic of 3 partitions made by the operator, `?session_timeout=6s` (default mount otherwise)"
            }
            Form::KafkaKeyOrder => {
                "Kafka topic of 3 partitions made by the operator, `KeyOrder`, 16 keys (retries in place)"
            }
            Form::Mqtt => {
                "MQTT 5 on Mosquitto (default mount: shared subscription, a persistent session per consumer)"
            }
        }
    }

    /// The broker it runs on.
    pub(crate) fn server(self) -> Server {
        match self {
            Form::Memory => Server::Memory,
            Form::RedisStream | Form::RedisZset | Form::RedisClaiming | Form::RedisList => {
                Server::Redis
            }
            Form::AmqpQuorum | Form::AmqpDeclared | Form::AmqpClassic => Server::Amqp,
            Form::LapinQuorum | Form::LapinDeclared | Form::LapinClassic => Server::Lapin,
            Form::Nats => Server::Nats,
            Form::Postgres => Server::Postgres,
            Form::Kafka | Form::KafkaWorkers | Form::KafkaSession6s | Form::KafkaKeyOrder => {
                Server::Kafka
            }
            Form::Mqtt => Server::Mqtt,
        }
    }

    /// Whether the broker moves spent messages to the dead letter itself (a quorum queue
    /// with a delivery limit, on either protocol). Elsewhere, what the broker
    /// dead-letters on its own is a rejected original (a classic queue declared with a
    /// dead-letter exchange rejects the original of each `retry_after` copy into it), not
    /// a spent message. JetStream does not dead-letter: the runtime does.
    pub(crate) fn broker_dead_letters(self) -> bool {
        matches!(self, Form::AmqpDeclared | Form::LapinDeclared)
    }

    /// Whether `retry_after(50ms)` is a copy held in the consumer's process (lost if the
    /// process is killed before it is published).
    ///
    /// Durable elsewhere: `DurableZset` and `Claiming` keep the entry on Redis, JetStream
    /// naks with the delay, a quorum queue that dead-letters itself (AMQP 1.0 or lapin)
    /// holds the delivery unsettled through the delay, then requeues it, and lapin's
    /// classic and operator-made quorum queues send a confirmed copy to a delay queue
    /// (`QUEUE.delay.MS.quorum`) that dead-letters it back at least once; Kafka parks a
    /// copy in a delay topic before the original is done. MQTT has no delay of its own:
    /// the original's PUBACK goes first and the copy waits in the process.
    pub(crate) fn delays_in_process(self) -> bool {
        matches!(
            self,
            Form::RedisStream | Form::RedisList | Form::AmqpQuorum | Form::AmqpClassic | Form::Mqtt
        )
    }

    /// The consumer's mount options for this form: the form's defaults (the operator
    /// made the queue), or the option a form is named after (`*-declared`, the Redis
    /// forms).
    pub(crate) fn configure(self, mount: Mount) -> Mount {
        match self {
            Form::Memory => mount,
            Form::RedisStream => mount.option(Stream::new()),
            Form::RedisZset => mount.option(Stream::new().delayed_retry(DelayedRetry::DurableZset)),
            Form::RedisClaiming => mount.option(Claiming::new(CLAIMING_MIN_IDLE)),
            Form::RedisList => mount.option(ReliableList::new()),
            Form::AmqpQuorum | Form::AmqpClassic => mount,
            Form::AmqpDeclared => mount.option(SubscribeOptions::new().declare(QueueType::Quorum)),
            Form::LapinQuorum => mount,
            Form::LapinDeclared => {
                mount.option(LapinOptions::new().declare(LapinQueueType::Quorum))
            }
            Form::LapinClassic => mount,
            Form::Nats | Form::Postgres | Form::Kafka | Form::KafkaSession6s | Form::Mqtt => mount,
            Form::KafkaWorkers => mount.workers(8),
            Form::KafkaKeyOrder => mount.option(ruststream::kafka::KeyOrder),
        }
    }

    /// How many keys the producer spreads its messages over (the header `kafka-key`,
    /// `k0`…), where the form keeps key order; `None`: no key.
    pub(crate) fn keys(self) -> Option<u64> {
        match self {
            Form::KafkaKeyOrder => Some(16),
            _ => None,
        }
    }

    /// The query the form adds to its consumers' URL: the setting a form is named after
    /// where it is a URL setting.
    pub(crate) fn url_query(self) -> Option<&'static str> {
        match self {
            Form::KafkaSession6s => Some("session_timeout=6s"),
            _ => None,
        }
    }

    /// How long the group waits for a killed consumer of a Kafka form (its session
    /// timeout: librdkafka's default, 45 s, which the adapter keeps, or the form's own).
    pub(crate) fn kafka_session(self) -> Duration {
        match self {
            Form::KafkaSession6s => Duration::from_secs(6),
            _ => Duration::from_secs(45),
        }
    }

    /// The dead-letter consumer's mount options: a plain stream on Redis, a classic
    /// queue on RabbitMQ, the default JetStream consumer (its stream made from the
    /// mount) on NATS, the default mount elsewhere.
    pub(crate) fn configure_dead(self, mount: Mount) -> Mount {
        match self.server() {
            Server::Amqp => mount.option(SubscribeOptions::new().declare(QueueType::Classic)),
            Server::Lapin => mount.option(LapinOptions::new().declare(LapinQueueType::Classic)),
            Server::Memory
            | Server::Redis
            | Server::Nats
            | Server::Postgres
            | Server::Kafka
            | Server::Mqtt => mount,
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

/// Whether the operator makes the form's queue before the consumers start (the harness
/// does, with `x-queue-type` alone). The Kafka forms' topic is made too (`kafka::declare`):
/// the adapter reads only a topic that exists.
pub(crate) fn operator_made(form: Form) -> Option<&'static str> {
    match form {
        Form::LapinQuorum | Form::AmqpQuorum => Some("quorum"),
        Form::LapinClassic | Form::AmqpClassic => Some("classic"),
        _ => None,
    }
}
