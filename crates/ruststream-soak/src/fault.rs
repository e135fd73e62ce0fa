//! The faults a scenario injects.

use std::str::FromStr;

use crate::form::{Form, Server};

/// One kind of fault per scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// None: the baseline (the memory broker's scenario).
    None,
    /// A consumer SIGKILLed every 1–3 s and a new process started.
    Kill,
    /// The harness's own redis-server SIGKILLed and restarted.
    RedisKill,
    /// RabbitMQ 4 restarted (`scripts/rabbitmq4.sh restart`).
    RabbitRestart,
    /// The harness's own nats-server (JetStream, its own store) SIGKILLed and restarted.
    NatsRestart,
    /// The harness's own PostgreSQL (every process of it) SIGKILLed and restarted.
    PostgresRestart,
    /// The harness's own Kafka-protocol broker (nisshi on PostgreSQL storage) SIGKILLed
    /// and restarted.
    KafkaRestart,
    /// One of three Kafka-protocol brokers of the harness's own (nisshi, sharing one
    /// PostgreSQL storage: a cluster whose clients move to another broker) SIGKILLed and
    /// restarted.
    KafkaNodeKill,
    /// The harness's own Mosquitto (persistence on, saving every second) SIGKILLed and
    /// restarted.
    MqttRestart,
    /// Every consumer connection reset by the proxy, every 1–3 s.
    Reset,
    /// Every consumer connection black-holed by the proxy for a while, then resumed.
    BlackHole,
}

impl Fault {
    pub(crate) const ALL: [Fault; 11] = [
        Fault::None,
        Fault::Kill,
        Fault::RedisKill,
        Fault::RabbitRestart,
        Fault::NatsRestart,
        Fault::PostgresRestart,
        Fault::KafkaRestart,
        Fault::KafkaNodeKill,
        Fault::MqttRestart,
        Fault::Reset,
        Fault::BlackHole,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Kill => "kill",
            Fault::RedisKill => "redis-kill",
            Fault::RabbitRestart => "rabbit-restart",
            Fault::NatsRestart => "nats-restart",
            Fault::PostgresRestart => "postgres-restart",
            Fault::KafkaRestart => "kafka-restart",
            Fault::KafkaNodeKill => "kafka-node-kill",
            Fault::MqttRestart => "mqtt-restart",
            Fault::Reset => "reset",
            Fault::BlackHole => "black-hole",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Fault::None => "no faults (handler failures only)",
            Fault::Kill => {
                "consumers SIGKILLed at random every 1–3 s, a new process started each time"
            }
            Fault::RedisKill => {
                "the Redis server SIGKILLed and restarted (its own server, AOF appendfsync always)"
            }
            Fault::RabbitRestart => "RabbitMQ 4 restarted (`scripts/rabbitmq4.sh restart`)",
            Fault::PostgresRestart => {
                "the PostgreSQL server SIGKILLed, every process of it, and restarted (its own server, fsync on)"
            }
            Fault::NatsRestart => {
                "the NATS server SIGKILLed and restarted (its own nats-server, JetStream store of its own)"
            }
            Fault::KafkaRestart => {
                "the Kafka-protocol broker SIGKILLed and restarted (its own nisshi, PostgreSQL storage)"
            }
            Fault::KafkaNodeKill => {
                "one of three Kafka-protocol brokers sharing one storage SIGKILLed and restarted (its own nisshi cluster, PostgreSQL storage)"
            }
            Fault::MqttRestart => {
                "the MQTT broker SIGKILLed and restarted (its own Mosquitto, saving every second; its unsaved losses apart)"
            }
            Fault::Reset => {
                "every consumer connection (on Kafka every client's) reset by a TCP proxy, every 1–3 s"
            }
            Fault::BlackHole => {
                "every consumer connection (on Kafka every client's) black-holed by a TCP proxy (nothing forwarded, nothing closed), then resumed"
            }
        }
    }

    /// Whether the consumers connect through the harness's proxy.
    pub(crate) fn proxied(self) -> bool {
        matches!(self, Fault::Reset | Fault::BlackHole)
    }

    /// The fewest faults a run injects, even once everything is published.
    pub(crate) fn at_least(self) -> usize {
        match self {
            Fault::None => 0,
            Fault::RabbitRestart | Fault::BlackHole => 1,
            Fault::RedisKill
            | Fault::NatsRestart
            | Fault::PostgresRestart
            | Fault::KafkaRestart
            | Fault::KafkaNodeKill
            | Fault::MqttRestart => 2,
            Fault::Kill | Fault::Reset => 3,
        }
    }
}

impl Fault {
    /// Why `self` cannot be injected on `form`, if it cannot: a broker fault is of one
    /// broker, and the memory broker has no connection to cut nor process to kill.
    pub(crate) fn check(self, form: Form) -> Result<(), String> {
        let fits = match self {
            Fault::None => true,
            Fault::Kill | Fault::Reset | Fault::BlackHole => form.server() != Server::Memory,
            Fault::RedisKill => form.server() == Server::Redis,
            Fault::RabbitRestart => form.server().is_rabbit(),
            Fault::NatsRestart => form.server() == Server::Nats,
            Fault::PostgresRestart => form.server() == Server::Postgres,
            Fault::KafkaRestart | Fault::KafkaNodeKill => form.server() == Server::Kafka,
            Fault::MqttRestart => form.server() == Server::Mqtt,
        };
        if fits {
            Ok(())
        } else {
            Err(format!(
                "fault {} does not apply to form {}",
                self.name(),
                form.name()
            ))
        }
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown fault {s}"))
    }
}
