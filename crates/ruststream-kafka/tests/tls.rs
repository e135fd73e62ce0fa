//! `kafkas://` and SASL against real listeners: nisshi 0.8.1 with TLS on 127.0.0.1:9093,
//! TLS and SASL SCRAM on 9094, SASL SCRAM over plain text on 9095, with the throwaway CA
//! of `scripts/tls-certs.sh` and the users alice (SCRAM-SHA-512) and bob (SCRAM-SHA-256)
//! (`scripts/kafka-secure.sh` starts them; `RUSTSTREAM_TLS_CA`). Built with the `tls`
//! feature only. Every client a mount makes goes through the same settings: a delayed
//! retry (producer, admin client, the consumer and the delay topics' mover) is the round
//! trip.

mod support;

use std::time::Duration;

use ruststream_core::{Broker, Message, RETRY_COUNT, Settlement, SubscribeSpec};
use ruststream_kafka::{ConnectError, KafkaBroker};

const HOW: &str = "Start the TLS and SASL listeners with `scripts/kafka-secure.sh` (nisshi on \
     127.0.0.1:9093-9095 with the CA of scripts/tls-certs.sh), or set RUSTSTREAM_TLS_CA.";

fn ca() -> String {
    std::env::var("RUSTSTREAM_TLS_CA").unwrap_or_else(|_| "/var/cache/ruststream/tls/ca.pem".into())
}

/// `kafkas://[login@]127.0.0.1:port` trusting the test CA, with `more` settings.
fn tls_url(login: &str, port: u16, more: &str) -> String {
    format!(
        "kafkas://{login}127.0.0.1:{port}?tls_ca_file={}&partitions=1{more}",
        ca()
    )
}

async fn connect(url: &str) -> KafkaBroker {
    match KafkaBroker::connect(url).await {
        Ok(broker) => broker,
        Err(error) => panic!("cannot connect to {} ({error}). {HOW}", redacted(url)),
    }
}

fn redacted(url: &str) -> String {
    ruststream_core::redact(url)
}

/// A record published on `broker`, read back by a mount that makes its topic, retried
/// after a second through the delay topics, and read again as attempt 2.
async fn round_trip(broker: &KafkaBroker) {
    let topic = support::unique("secure");
    let mut subscription = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed");
    broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("secret"))
        .await
        .expect("published");
    let first = support::next(&mut subscription.deliveries, Duration::from_secs(30)).await;
    assert_eq!(first.payload().as_ref(), b"secret");
    first
        .settle(Settlement::RequeueAfter(Duration::from_secs(1)))
        .await
        .expect("parked in a delay topic");
    let again = support::next(&mut subscription.deliveries, Duration::from_secs(30)).await;
    assert_eq!(again.payload().as_ref(), b"secret");
    assert_eq!(again.headers().get_str(RETRY_COUNT), Some("1"));
    again.settle(Settlement::Accept).await.expect("committed");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_trip_over_tls_with_a_private_ca() {
    round_trip(&connect(&tls_url("", 9093, "")).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_the_system_roots_do_not_vouch_for_is_refused() {
    let error = KafkaBroker::connect("kafkas://127.0.0.1:9093")
        .await
        .err()
        .expect("the test CA is not among the system's roots");
    assert!(matches!(error, ConnectError::Refused { .. }), "{error:?}");
    assert!(
        error.to_string().contains("certificate verify failed"),
        "{error}"
    );
    let error = KafkaBroker::connect("kafkas://127.0.0.1:9093?tls_ca_file=/nonexistent/ca.pem")
        .await
        .err()
        .expect("no such file");
    assert!(matches!(error, ConnectError::Tls(_)), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_over_tls_speaks_the_strongest_mechanism_by_default() {
    round_trip(&connect(&tls_url("alice:alice-secret@", 9094, "")).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_over_plain_text() {
    round_trip(&connect("kafka://alice:alice-secret@127.0.0.1:9095?partitions=1").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_mechanism_picks_the_one_a_user_has() {
    // bob has SCRAM-SHA-256 credentials only: the default (SCRAM-SHA-512, which the
    // broker offers too) is refused, the one named gets through.
    let error = KafkaBroker::connect(&tls_url("bob:bob-secret@", 9094, ""))
        .await
        .err()
        .expect("bob has no SCRAM-SHA-512 credentials");
    assert!(matches!(error, ConnectError::Refused { .. }), "{error:?}");
    let broker = connect(&tls_url(
        "bob:bob-secret@",
        9094,
        "&sasl_mechanism=SCRAM-SHA-256",
    ))
    .await;
    round_trip(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mechanism_the_broker_does_not_offer_is_refused_naming_the_ones_it_does() {
    let started = std::time::Instant::now();
    let error =
        KafkaBroker::connect("kafka://alice:alice-secret@127.0.0.1:9095?sasl_mechanism=PLAIN")
            .await
            .err()
            .expect("nisshi offers no PLAIN");
    assert!(matches!(error, ConnectError::Refused { .. }), "{error:?}");
    let text = error.to_string();
    // The words the adapter reads the broker's mechanisms from, when it chooses.
    assert!(
        text.contains("broker's supported mechanisms: SCRAM-SHA-256,SCRAM-SHA-512")
            || text.contains("broker's supported mechanisms: SCRAM-SHA-512,SCRAM-SHA-256"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_at_once_and_never_shown() {
    let started = std::time::Instant::now();
    let error = KafkaBroker::connect(&tls_url("alice:not-her-secret@", 9094, ""))
        .await
        .err()
        .expect("a wrong password");
    assert!(matches!(error, ConnectError::Refused { .. }), "{error:?}");
    let text = format!("{error} {error:?}");
    assert!(!text.contains("not-her-secret"), "{text}");
    assert!(text.to_lowercase().contains("authentication"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // And no user at all is refused too: the listener requires SASL.
    let error = KafkaBroker::connect(&tls_url("", 9094, ""))
        .await
        .err()
        .expect("no user");
    assert!(
        matches!(
            error,
            ConnectError::Refused { .. } | ConnectError::Unreachable { .. }
        ),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_loaded_and_a_key_that_is_not_its_refused() {
    // nisshi never asks for a client certificate: this proves librdkafka takes the pair
    // (the test server's own certificate and key stand in for a client's), not that a
    // server checks it.
    let ca = ca();
    let dir = std::path::Path::new(&ca)
        .parent()
        .expect("the CA's folder")
        .display()
        .to_string();
    let pair = |cert: &str, key: &str| {
        tls_url(
            "",
            9093,
            &format!("&tls_cert_file={dir}/{cert}&tls_key_file={dir}/{key}"),
        )
    };
    let broker = connect(&pair("server.pem", "server.key")).await;
    broker.close().await;
    let error = KafkaBroker::connect(&pair("server.pem", "ca.key"))
        .await
        .err()
        .expect("the CA's key is not the certificate's");
    assert!(matches!(error, ConnectError::Kafka(_)), "{error:?}");
    assert!(error.to_string().contains("ssl"), "{error}");
}
