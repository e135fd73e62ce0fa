//! `ruststream::connect` on the NATS and AMQP 0-9-1 schemes, against the real brokers:
//! each opens its adapter and carries a message; the URL's query reaches the adapter's
//! settings; bad URLs are clear errors, without the password. (Built with the `nats`
//! and `lapin` features, as `scripts/test`'s workspace run does: the demo enables them.)
#![cfg(any(feature = "nats", feature = "lapin"))]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream::core::{Broker, Message, Settlement};

/// A unique name for this run.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000_000)
        .unwrap_or(0);
    format!("rs-connect-{what}-{}-{nanos}", std::process::id())
}

/// The error `connect(url)` gives, as text.
async fn refused(url: &str) -> String {
    match ruststream::connect(url).await {
        Ok(broker) => panic!("{url} connected to {}", broker.name()),
        Err(error) => error.to_string(),
    }
}

/// A message through the broker and back: published to a reply address of its own.
async fn round_trip(broker: &Arc<dyn Broker>) {
    let mut replies = broker
        .replies(unique("trip").as_str().into())
        .await
        .expect("a reply subscription");
    broker
        .publisher()
        .publish(replies.address.clone(), Message::new("there and back"))
        .await
        .expect("published");
    let delivery = tokio::time::timeout(
        Duration::from_secs(10),
        replies.subscription.deliveries.next(),
    )
    .await
    .expect("a delivery within 10 s")
    .expect("open")
    .expect("ok");
    assert_eq!(delivery.payload().as_ref(), b"there and back");
    let _ = delivery.settle(Settlement::Accept).await;
    broker.close().await;
}

#[cfg(feature = "nats")]
mod nats {
    use super::*;

    fn url() -> String {
        std::env::var("RUSTSTREAM_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
    }

    #[tokio::test]
    async fn nats_urls_open_the_nats_broker() {
        let url = url();
        let broker = ruststream::connect(&url).await.unwrap_or_else(|error| {
            panic!(
                "{error}: start NATS with JetStream (`nats-server -js -a 127.0.0.1 -p 4222`), \
                 or point RUSTSTREAM_NATS_URL at one"
            )
        });
        assert_eq!(broker.name(), "nats");
        round_trip(&broker).await;
    }

    #[tokio::test]
    async fn nats_urls_take_only_their_settings_and_bad_ones_say_why() {
        let with_query = format!("{}?prefetch=8", url());
        assert!(
            refused(&with_query)
                .await
                .ends_with("unknown key for the nats broker (known: confirm_acks)"),
            "{with_query}"
        );
        for (url, says) in [
            ("nats://127.0.0.1:abc", "port \"abc\" is not a number"),
            ("nats://", "no host"),
            ("nats://me:secret@127.0.0.1:1", "cannot connect"),
            // The TLS schemes reach the adapter (the test server speaks no TLS).
            (
                "nats+tls://127.0.0.1:1",
                "cannot connect to tls://127.0.0.1:1",
            ),
            ("tls://127.0.0.1:1", "cannot connect to tls://127.0.0.1:1"),
        ] {
            let error = refused(url).await;
            assert!(error.contains(says), "{url}: {error}");
            assert!(!error.contains("secret"), "{url}: {error}");
        }
    }
}

#[cfg(feature = "lapin")]
mod lapin {
    use super::*;

    /// `RUSTSTREAM_LAPIN_URL` (RabbitMQ 3) or `RUSTSTREAM_LAPIN4_URL` (RabbitMQ 4), as
    /// an `amqp091://` URL.
    fn url(var: &str, default: &str) -> String {
        let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        match url.split_once("://") {
            Some((_, rest)) => format!("amqp091://{rest}"),
            None => url,
        }
    }

    fn urls() -> [String; 2] {
        [
            url(
                "RUSTSTREAM_LAPIN_URL",
                "amqp://guest:guest@127.0.0.1:5672/%2f",
            ),
            url(
                "RUSTSTREAM_LAPIN4_URL",
                "amqp://guest:guest@127.0.0.1:5673/%2f",
            ),
        ]
    }

    #[tokio::test]
    async fn amqp091_urls_open_rabbitmq_over_amqp_0_9_1() {
        for url in urls() {
            let broker = ruststream::connect(&url).await.unwrap_or_else(|error| {
                panic!(
                    "{error}: start the machine's RabbitMQ 3 (127.0.0.1:5672) and RabbitMQ 4 \
                     (`sudo scripts/rabbitmq4.sh`, 127.0.0.1:5673), or point \
                     RUSTSTREAM_LAPIN_URL / RUSTSTREAM_LAPIN4_URL at them"
                )
            });
            assert_eq!(broker.name(), "lapin", "{url}");
            round_trip(&broker).await;
        }
    }

    #[tokio::test]
    async fn amqp091_settings_come_from_the_query() {
        let [url, _] = urls();
        // The adapter's keys and lapin's own both pass.
        let broker = ruststream::connect(&format!("{url}?prefetch=8&heartbeat=30"))
            .await
            .expect("known keys connect");
        broker.close().await;
        let error = refused(&format!("{url}?prefetch=0")).await;
        assert!(
            error.contains("prefetch=\"0\" (url): must be at least 1"),
            "{error}"
        );
        let error = refused(&format!("{url}?credit=5")).await;
        assert!(error.contains("unknown key"), "{error}");
    }

    #[tokio::test]
    async fn bad_amqp091_urls_say_why() {
        for (url, says) in [
            ("amqp091://127.0.0.1:notaport/%2f", "notaport"),
            ("amqp091://guest:guest@/%2f", "no host"),
            ("amqp091://guest:secret@127.0.0.1:1/%2f", "127.0.0.1:1"),
            #[cfg(not(feature = "lapin-tls"))]
            (
                "amqps091://guest:secret@127.0.0.1:5671/%2f",
                "needs the `lapin-tls` feature",
            ),
        ] {
            let error = refused(url).await;
            assert!(error.contains(says), "{url}: {error}");
            assert!(!error.contains("secret"), "{url}: {error}");
        }
        let [url, _] = urls();
        let wrong = url.replacen("guest:guest", "guest:wrong-password", 1);
        let error = refused(&wrong).await;
        assert!(!error.contains("wrong-password"), "{error}");
    }
}
