//! Opening a broker from a URL, so that one service runs on any broker without a rebuild.
//!
//! Each adapter's [`Connector`] owns its schemes and URL forms; this crate only lists
//! the connectors its features build in, and names the feature a scheme needs when its
//! adapter is left out.

use std::sync::Arc;

use ruststream_core::{Broker, Connector, Server, redact};

/// Why [`connect`] (or [`server`]) did not open or describe a broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL's scheme is not one of a broker.
    #[error("unknown broker url scheme {scheme:?}: use {known}")]
    UnknownScheme {
        /// The scheme found (empty where the URL has none).
        scheme: String,
        /// The schemes ruststream knows, as `memory://, redis://, …`.
        known: String,
    },
    /// The scheme's adapter is not built in: enable the named feature of `ruststream`.
    #[error("{scheme}:// needs the `{feature}` feature of ruststream{hint}")]
    MissingFeature {
        /// The URL's scheme.
        scheme: String,
        /// The feature that builds its adapter in.
        feature: &'static str,
        /// What else may be meant (empty, or starting with `; `).
        hint: &'static str,
    },
    /// The adapter could not connect, or cannot describe the URL (shown without its
    /// password).
    #[error("{url}: {reason}")]
    Broker {
        /// The URL, its password replaced by `***`.
        url: String,
        /// The adapter's error.
        reason: String,
    },
}

/// The feature of this crate that builds in each scheme's adapter: what a scheme needs
/// when its connector is not in [`connectors`]. (The connectors themselves say which
/// schemes they open; this table only names features.)
const FEATURES: &[(&str, &str)] = &[
    ("memory", "memory"),
    ("redis", "redis"),
    ("redis-cluster", "redis"),
    ("redis-sentinel", "redis"),
    ("rediss", "redis-tls"),
    ("rediss-cluster", "redis-tls"),
    ("rediss-sentinel", "redis-tls"),
    ("amqp", "amqp"),
    ("amqps", "amqp-tls"),
    ("amqp091", "lapin"),
    ("amqps091", "lapin-tls"),
    ("nats", "nats"),
    ("tls", "nats"),
    ("nats+tls", "nats"),
    ("postgres", "postgres"),
    ("postgresql", "postgres"),
    ("kafka", "kafka"),
    ("kafkas", "kafka-tls"),
    ("mqtt", "mqtt"),
    ("mqtts", "mqtt-tls"),
];

/// The connectors this build has, one per adapter its features turn on.
///
/// ```
/// let names: Vec<&str> = ruststream::broker::connectors().iter().map(|c| c.name()).collect();
/// assert!(names.contains(&"memory"));
/// ```
pub fn connectors() -> &'static [&'static dyn Connector] {
    CONNECTORS
}

const CONNECTORS: &[&dyn Connector] = &[
    #[cfg(feature = "memory")]
    &ruststream_runtime::memory::MemoryConnector,
    #[cfg(feature = "redis")]
    &ruststream_redis::RedisConnector,
    #[cfg(feature = "amqp")]
    &ruststream_amqp::AmqpConnector,
    #[cfg(feature = "lapin")]
    &ruststream_lapin::LapinConnector,
    #[cfg(feature = "nats")]
    &ruststream_nats::NatsConnector,
    #[cfg(feature = "postgres")]
    &ruststream_postgres::PostgresConnector,
    #[cfg(feature = "kafka")]
    &ruststream_kafka::KafkaConnector,
    #[cfg(feature = "mqtt")]
    &ruststream_mqtt::MqttConnector,
];

/// The connector that opens `url`, or why there is none in this build.
pub(crate) fn connector_of(url: &str) -> Result<&'static dyn Connector, ConnectError> {
    let scheme = url
        .split_once("://")
        .map_or("", |(scheme, _)| scheme)
        .to_ascii_lowercase();
    for &connector in connectors() {
        if let Some(found) = connector.schemes().iter().find(|s| s.name == scheme) {
            if found.tls && !connector.tls() {
                return Err(missing(&scheme));
            }
            return Ok(connector);
        }
    }
    if FEATURES.iter().any(|(known, _)| *known == scheme) {
        return Err(missing(&scheme));
    }
    Err(ConnectError::UnknownScheme {
        scheme,
        known: FEATURES
            .iter()
            .map(|(scheme, _)| format!("{scheme}://"))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

fn missing(scheme: &str) -> ConnectError {
    let feature = FEATURES
        .iter()
        .find(|(known, _)| *known == scheme)
        .map_or("", |(_, feature)| feature);
    // `amqp://` is AMQP 1.0 whatever is built in: point a RabbitMQ 0-9-1 user to its own.
    let hint = if scheme == "amqp" && cfg!(feature = "lapin") {
        "; for RabbitMQ over AMQP 0-9-1 (the `lapin` feature) write amqp091://"
    } else {
        ""
    };
    ConnectError::MissingFeature {
        scheme: scheme.to_owned(),
        feature,
        hint,
    }
}

/// The schemes [`connect`] opens in this build, as `redis://`, for help texts.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn schemes() -> Vec<String> {
    connectors()
        .iter()
        .flat_map(|c| {
            c.schemes()
                .iter()
                .filter(|s| !s.tls || c.tls())
                .map(|s| format!("{}://", s.name))
        })
        .collect()
}

/// Opens the broker a URL names, with the adapter whose [`Connector`] answers its
/// scheme: `memory://` (the in-memory broker, feature `memory`), `redis://`,
/// `rediss://`, `redis-cluster://`, `rediss-cluster://` (feature `redis`; TLS needs
/// `redis-tls`), `amqp://`, `amqps://` (AMQP 1.0, feature `amqp`; TLS needs `amqp-tls`),
/// `amqp091://`, `amqps091://` (RabbitMQ over AMQP 0-9-1, feature `lapin`; TLS needs
/// `lapin-tls`), `nats://`, `tls://`, `nats+tls://` (NATS, feature `nats`),
/// `postgres://`, `postgresql://` (PostgreSQL as a broker, feature `postgres`),
/// `kafka://`, `kafkas://` (Kafka, feature `kafka`; TLS needs `kafka-tls`), `mqtt://`, `mqtts://` (MQTT 5,
/// feature `mqtt`; TLS needs `mqtt-tls`).
///
/// `amqp://` stays AMQP 1.0 whatever features are on, so that enabling one never changes
/// what a URL opens; AMQP 0-9-1 has schemes of its own. The URL's query is the adapter's
/// settings, as each adapter reads them (the memory broker reads none: a query key is an
/// error).
///
/// The broker comes back type-erased, as [`App::with_broker`](crate::App::with_broker)
/// takes it; a service that uses one adapter only can still call that adapter's own
/// `connect` and pay for nothing else.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let url = std::env::var("BROKER_URL").unwrap_or_else(|_| "memory://".into());
/// let app = ruststream::App::with_broker(ruststream::connect(&url).await?);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    let connector = connector_of(url)?;
    tracing::info!(url = %redact(url), broker = connector.name(), "connecting to the broker");
    connector
        .connect(url)
        .await
        .map_err(|error| failed(url, &error))
}

/// The server a URL names as a description of the service gives it (the AsyncAPI
/// document's `servers.broker`), by its adapter; no connection is made.
///
/// ```
/// let server = ruststream::broker::server("memory://").unwrap();
/// assert_eq!(server.protocol, "memory");
/// ```
pub fn server(url: &str) -> Result<Server, ConnectError> {
    connector_of(url)?
        .server(url)
        .map_err(|reason| failed(url, &reason))
}

fn failed(url: &str, error: &dyn std::fmt::Display) -> ConnectError {
    ConnectError::Broker {
        url: redact(url),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{ConnectError, FEATURES, connect, connectors};

    #[tokio::test]
    async fn unknown_schemes_are_named() {
        match connect("stomp://h:61613").await {
            Err(error @ ConnectError::UnknownScheme { .. }) => {
                let text = error.to_string();
                for scheme in [
                    "memory://",
                    "redis-cluster://",
                    "amqps://",
                    "amqp091://",
                    "nats://",
                ] {
                    assert!(text.contains(scheme), "{text}");
                }
                assert!(
                    matches!(error, ConnectError::UnknownScheme { scheme, .. } if scheme == "stomp")
                );
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("connected to stomp"),
        }
        assert!(matches!(
            connect("h:9092").await,
            Err(ConnectError::UnknownScheme { .. })
        ));
    }

    /// Every scheme a connector of this build opens has its feature named here, and the
    /// connectors answer no scheme twice.
    #[test]
    fn every_connector_scheme_has_its_feature() {
        let mut seen = Vec::new();
        for &connector in connectors() {
            for scheme in connector.schemes() {
                assert!(
                    FEATURES.iter().any(|(known, _)| *known == scheme.name),
                    "{} has no feature in FEATURES",
                    scheme.name
                );
                assert!(!seen.contains(&scheme.name), "{} twice", scheme.name);
                seen.push(scheme.name);
            }
        }
    }

    #[cfg(feature = "memory")]
    #[tokio::test]
    async fn memory_is_a_url_too() {
        let broker = connect("memory://").await.expect("memory");
        assert_eq!(broker.name(), "memory");
        let error = connect("memory://?form=list")
            .await
            .err()
            .expect("no settings");
        assert_eq!(
            error.to_string(),
            "memory://?form=list: bad option: setting form=\"list\" (url): unknown key for \
             the memory broker (it reads no settings)"
        );
    }

    /// The feature named is `ruststream`'s (the crate a user depends on), never the
    /// adapter's own `tls`.
    #[cfg(not(feature = "redis-tls"))]
    #[tokio::test]
    async fn rediss_without_its_feature_names_redis_tls() {
        for url in ["rediss://h:6380", "rediss-cluster://h:7001"] {
            let error = connect(url).await.err().expect("no TLS");
            assert!(
                error
                    .to_string()
                    .contains("needs the `redis-tls` feature of ruststream"),
                "{error}"
            );
        }
    }

    #[cfg(not(feature = "amqp-tls"))]
    #[tokio::test]
    async fn amqps_without_its_feature_names_amqp_tls() {
        let error = connect("amqps://h:5671").await.err().expect("no TLS");
        assert!(
            error
                .to_string()
                .contains("needs the `amqp-tls` feature of ruststream"),
            "{error}"
        );
    }

    #[test]
    fn the_schemes_are_those_of_the_build() {
        let schemes = super::schemes();
        let has = |s: &str| schemes.iter().any(|known| known == s);
        assert_eq!(has("memory://"), cfg!(feature = "memory"));
        assert_eq!(has("redis://"), cfg!(feature = "redis"));
        assert_eq!(has("rediss://"), cfg!(feature = "redis-tls"));
        assert_eq!(has("amqp091://"), cfg!(feature = "lapin"));
        assert_eq!(has("amqps091://"), cfg!(feature = "lapin-tls"));
        assert_eq!(has("nats://"), cfg!(feature = "nats"));
        assert_eq!(has("postgres://"), cfg!(feature = "postgres"));
        assert_eq!(has("postgresql://"), cfg!(feature = "postgres"));
        assert_eq!(has("kafka://"), cfg!(feature = "kafka"));
        assert_eq!(has("kafkas://"), cfg!(feature = "kafka-tls"));
        assert_eq!(has("mqtt://"), cfg!(feature = "mqtt"));
        assert_eq!(has("mqtts://"), cfg!(feature = "mqtt-tls"));
    }

    #[cfg(not(feature = "postgres"))]
    #[tokio::test]
    async fn postgres_without_its_feature_is_named() {
        for url in ["postgres://h/db", "postgresql://h/db"] {
            let error = connect(url).await.err().expect("no postgres");
            assert!(
                error
                    .to_string()
                    .ends_with("needs the `postgres` feature of ruststream"),
                "{error}"
            );
        }
    }

    #[cfg(not(feature = "lapin-tls"))]
    #[tokio::test]
    async fn amqps091_without_its_feature_names_it() {
        let error = connect("amqps091://guest:secret@h:5671/%2f")
            .await
            .err()
            .expect("no TLS");
        assert_eq!(
            error.to_string(),
            "amqps091:// needs the `lapin-tls` feature of ruststream"
        );
    }

    #[cfg(all(feature = "lapin", not(feature = "amqp")))]
    #[tokio::test]
    async fn amqp_without_its_feature_points_to_amqp091() {
        let error = connect("amqp://guest:guest@127.0.0.1:5672")
            .await
            .err()
            .expect("no amqp");
        assert_eq!(
            error.to_string(),
            "amqp:// needs the `amqp` feature of ruststream; for RabbitMQ over AMQP 0-9-1 \
             (the `lapin` feature) write amqp091://"
        );
    }

    #[cfg(not(feature = "nats"))]
    #[tokio::test]
    async fn nats_without_its_feature_is_named() {
        for url in ["nats://127.0.0.1:4222", "tls://h:4222", "nats+tls://h:4222"] {
            let error = connect(url).await.err().expect("no nats");
            assert!(
                error
                    .to_string()
                    .ends_with("needs the `nats` feature of ruststream"),
                "{error}"
            );
        }
    }

    #[cfg(not(feature = "kafka"))]
    #[tokio::test]
    async fn kafka_without_its_feature_is_named() {
        let error = connect("kafka://127.0.0.1:9092")
            .await
            .err()
            .expect("no kafka");
        assert_eq!(
            error.to_string(),
            "kafka:// needs the `kafka` feature of ruststream"
        );
    }

    #[cfg(not(feature = "mqtt"))]
    #[tokio::test]
    async fn mqtt_without_its_feature_is_named() {
        let error = connect("mqtt://127.0.0.1:1883")
            .await
            .err()
            .expect("no mqtt");
        assert_eq!(
            error.to_string(),
            "mqtt:// needs the `mqtt` feature of ruststream"
        );
    }

    #[cfg(not(feature = "kafka-tls"))]
    #[tokio::test]
    async fn kafkas_without_its_feature_names_kafka_tls() {
        let error = connect("kafkas://h:9093").await.err().expect("no TLS");
        assert!(
            error
                .to_string()
                .contains("needs the `kafka-tls` feature of ruststream"),
            "{error}"
        );
    }

    #[cfg(not(feature = "mqtt-tls"))]
    #[tokio::test]
    async fn mqtts_without_its_feature_names_mqtt_tls() {
        let error = connect("mqtts://h:8883").await.err().expect("no TLS");
        assert!(
            error
                .to_string()
                .contains("needs the `mqtt-tls` feature of ruststream"),
            "{error}"
        );
    }

    #[cfg(not(feature = "lapin"))]
    #[tokio::test]
    async fn amqp091_without_its_feature_is_named() {
        let error = connect("amqp091://h").await.err().expect("no lapin");
        assert_eq!(
            error.to_string(),
            "amqp091:// needs the `lapin` feature of ruststream"
        );
    }

    #[cfg(not(feature = "redis"))]
    #[tokio::test]
    async fn a_missing_feature_is_named() {
        let error = connect("redis://127.0.0.1:6379")
            .await
            .err()
            .expect("no redis");
        assert_eq!(
            error.to_string(),
            "redis:// needs the `redis` feature of ruststream"
        );
    }

    #[test]
    fn servers_are_described_by_their_adapter() {
        let described = super::server("memory://").expect("memory");
        assert_eq!(described.host, "localhost");
        assert!(matches!(
            super::server("stomp://h"),
            Err(ConnectError::UnknownScheme { .. })
        ));
    }
}
