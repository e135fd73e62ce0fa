//! Opening a broker from a URL, so that one service runs on any broker without a rebuild.

use std::sync::Arc;

use ruststream_core::Broker;

/// Why [`connect`] did not open a broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL's scheme is not one of a broker.
    #[error(
        "unknown broker url scheme {scheme:?}: use memory://, redis://, rediss://, redis-cluster://, \
         rediss-cluster://, amqp://, amqps://, amqp091://, nats:// or tls://"
    )]
    UnknownScheme {
        /// The scheme found (empty where the URL has none).
        scheme: String,
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
    /// The adapter could not connect (the URL is shown without its password).
    #[error("{url}: {reason}")]
    Broker {
        /// The URL, its password replaced by `***`.
        url: String,
        /// The adapter's error.
        reason: String,
    },
}

/// Opens the broker a URL names: `memory://` (the in-memory broker, feature `memory`),
/// `redis://`, `rediss://`, `redis-cluster://`, `rediss-cluster://` (feature `redis`;
/// TLS needs `redis-tls`), `amqp://`, `amqps://` (AMQP 1.0, feature `amqp`; TLS needs
/// `amqp-tls`), `amqp091://`, `amqps091://` (RabbitMQ over AMQP 0-9-1, feature `lapin`;
/// TLS needs `lapin-tls`; the adapter gets the URL as `amqp://` or `amqps://`), `nats://`, `tls://`, `nats+tls://` (NATS, feature
/// `nats`; `nats+tls://` is given to the adapter as `tls://`).
///
/// `amqp://` stays AMQP 1.0 whatever features are on, so that enabling one never changes
/// what a URL opens; AMQP 0-9-1 has schemes of its own. The URL's query is the adapter's settings, as each
/// adapter reads them (the memory broker reads none: a query key is an error).
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
    let scheme = url
        .split_once("://")
        .map_or("", |(scheme, _)| scheme)
        .to_ascii_lowercase();
    tracing::info!(url = %redact(url), "connecting to the broker");
    match scheme.as_str() {
        "memory" => memory(url, &scheme),
        "redis" | "rediss" | "redis-cluster" | "rediss-cluster" => redis(url, &scheme).await,
        "amqp" | "amqps" => amqp(url, &scheme).await,
        "amqp091" | "amqps091" => lapin(url, &scheme).await,
        "nats" | "tls" | "nats+tls" => nats(url, &scheme).await,
        _ => Err(ConnectError::UnknownScheme { scheme }),
    }
}

#[cfg(feature = "memory")]
fn memory(url: &str, _: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    // It reads no settings: a query is meant for another broker.
    let (_, settings) = ruststream_core::split_query(url, |_| false);
    if let Some(setting) = settings.first() {
        return Err(failed(url, &setting.unknown("memory", &[])));
    }
    Ok(Arc::new(crate::memory::MemoryBroker::new()))
}

#[cfg(not(feature = "memory"))]
fn memory(_: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    Err(missing(scheme, "memory"))
}

/// The schemes [`connect`] opens in this build (those whose feature is on), for help
/// texts.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn schemes() -> Vec<&'static str> {
    let mut all = Vec::new();
    if cfg!(feature = "memory") {
        all.push("memory://");
    }
    if cfg!(feature = "redis") {
        all.extend(["redis://", "redis-cluster://"]);
    }
    if cfg!(feature = "redis-tls") {
        all.extend(["rediss://", "rediss-cluster://"]);
    }
    if cfg!(feature = "amqp") {
        all.push("amqp://");
    }
    if cfg!(feature = "amqp-tls") {
        all.push("amqps://");
    }
    if cfg!(feature = "lapin") {
        all.push("amqp091://");
    }
    if cfg!(feature = "lapin-tls") {
        all.push("amqps091://");
    }
    if cfg!(feature = "nats") {
        all.extend(["nats://", "tls://", "nats+tls://"]);
    }
    all
}

#[cfg(feature = "redis")]
async fn redis(url: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    if scheme.starts_with("rediss") && !cfg!(feature = "redis-tls") {
        return Err(missing(scheme, "redis-tls"));
    }
    match ruststream_redis::RedisBroker::connect(url).await {
        Ok(broker) => Ok(Arc::new(broker)),
        Err(error) => Err(failed(url, &error)),
    }
}

#[cfg(not(feature = "redis"))]
async fn redis(_: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    Err(missing(
        scheme,
        if scheme.starts_with("rediss") {
            "redis-tls"
        } else {
            "redis"
        },
    ))
}

#[cfg(feature = "amqp")]
async fn amqp(url: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    if scheme == "amqps" && !cfg!(feature = "amqp-tls") {
        return Err(missing(scheme, "amqp-tls"));
    }
    match ruststream_amqp::AmqpBroker::connect(url).await {
        Ok(broker) => Ok(Arc::new(broker)),
        Err(error) => Err(failed(url, &error)),
    }
}

#[cfg(not(feature = "amqp"))]
async fn amqp(_: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    let mut error = missing(
        scheme,
        if scheme == "amqps" {
            "amqp-tls"
        } else {
            "amqp"
        },
    );
    if cfg!(feature = "lapin")
        && let ConnectError::MissingFeature { hint, .. } = &mut error
    {
        *hint = "; for RabbitMQ over AMQP 0-9-1 (the `lapin` feature) write amqp091://";
    }
    Err(error)
}

#[cfg(feature = "lapin")]
async fn lapin(url: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    let tls = scheme == "amqps091";
    if tls && !cfg!(feature = "lapin-tls") {
        return Err(missing(scheme, "lapin-tls"));
    }
    // `amqp091://` and `amqps091://` are ruststream's names; lapin reads `amqp(s)://`.
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    let lapin_scheme = if tls { "amqps" } else { "amqp" };
    match ruststream_lapin::LapinBroker::connect(&format!("{lapin_scheme}://{rest}")).await {
        Ok(broker) => Ok(Arc::new(broker)),
        Err(error) => Err(failed(url, &error)),
    }
}

#[cfg(not(feature = "lapin"))]
async fn lapin(_: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    Err(missing(
        scheme,
        if scheme == "amqps091" {
            "lapin-tls"
        } else {
            "lapin"
        },
    ))
}

#[cfg(feature = "nats")]
async fn nats(url: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    // The query is the NATS broker's settings: it reads them (an unknown key is an error).
    // `nats+tls://` is ruststream's other name for the client's `tls://`.
    let servers = if scheme == "nats+tls" {
        url.split(',')
            .map(|one| match one.trim().split_once("://") {
                Some((s, rest)) if s.eq_ignore_ascii_case("nats+tls") => format!("tls://{rest}"),
                _ => one.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(",")
    } else {
        url.to_owned()
    };
    match ruststream_nats::NatsBroker::connect(&servers).await {
        Ok(broker) => Ok(Arc::new(broker)),
        Err(error) => Err(failed(url, &error)),
    }
}

#[cfg(not(feature = "nats"))]
async fn nats(_: &str, scheme: &str) -> Result<Arc<dyn Broker>, ConnectError> {
    Err(missing(scheme, "nats"))
}

#[allow(dead_code)] // not with every feature
fn missing(scheme: &str, feature: &'static str) -> ConnectError {
    ConnectError::MissingFeature {
        scheme: scheme.to_owned(),
        feature,
        hint: "",
    }
}

#[allow(dead_code)] // not with every feature
fn failed(url: &str, error: &dyn std::fmt::Display) -> ConnectError {
    let url = redact(url);
    let reason = error.to_string();
    ConnectError::Broker { url, reason }
}

/// `url` with the password of its user information, if any, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None if !user_info.is_empty() => format!("{scheme}://***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{ConnectError, connect, redact};

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("amqp://guest:secret@h:5672/v"),
            "amqp://guest:***@h:5672/v"
        );
        assert_eq!(redact("redis://:secret@h:6379"), "redis://:***@h:6379");
        assert_eq!(redact("rediss://token@h"), "rediss://***@h");
        assert_eq!(redact("redis://h:6379/0?x=a@b"), "redis://h:6379/0?x=a@b");
        assert_eq!(redact("memory://"), "memory://");
        assert_eq!(redact("no scheme"), "no scheme");
    }

    #[tokio::test]
    async fn unknown_schemes_are_named() {
        match connect("kafka://h:9092").await {
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
                    matches!(error, ConnectError::UnknownScheme { scheme } if scheme == "kafka")
                );
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("connected to kafka"),
        }
        assert!(matches!(
            connect("h:9092").await,
            Err(ConnectError::UnknownScheme { .. })
        ));
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
        assert_eq!(schemes.contains(&"memory://"), cfg!(feature = "memory"));
        assert_eq!(schemes.contains(&"redis://"), cfg!(feature = "redis"));
        assert_eq!(schemes.contains(&"rediss://"), cfg!(feature = "redis-tls"));
        assert_eq!(schemes.contains(&"amqp091://"), cfg!(feature = "lapin"));
        assert_eq!(schemes.contains(&"nats://"), cfg!(feature = "nats"));
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
}
