//! `amqps://` against a real TLS listener: RabbitMQ 4 of `scripts/rabbitmq4.sh` (TLS on
//! localhost:5674, AMQP 0-9-1 and 1.0 on one port) with the throwaway CA of
//! `scripts/tls-certs.sh`. Publishing (confirmed), finding out the queue, consuming and
//! settling go over TLS; a client that does not trust the CA is refused; a CA file that
//! does not read is `ConnectError::Tls`.
//!
//! `RUSTSTREAM_AMQP_TLS_URL` (default `amqps://guest:guest@localhost:5674`; the vhost
//! `/%2f` is added) and `RUSTSTREAM_TLS_CA` (default
//! `${RUSTSTREAM_CACHE:-/var/cache/ruststream}/tls/ca.pem`) point elsewhere. Without the
//! listener every test here fails, saying how to start it.
#![cfg(feature = "tls")]

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{ConnectError, ConnectOptions, LapinBroker, QueueType, SubscribeOptions};

const DEFAULT_URL: &str = "amqps://guest:guest@localhost:5674";
const HOW_TO_START: &str = "start it with `sudo scripts/rabbitmq4.sh` (RabbitMQ 4 with a \
TLS listener on 127.0.0.1:5674; it makes the test CA with scripts/tls-certs.sh)";
/// A connection attempt that neither succeeds nor fails by then is a failure too.
const CONNECT_WITHIN: Duration = Duration::from_secs(20);

/// The TLS URL with the default vhost, as AMQP 0-9-1 names it.
fn tls_url() -> String {
    let url = std::env::var("RUSTSTREAM_AMQP_TLS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let authority_end = url.split_once("://").map_or(0, |(scheme, rest)| {
        scheme.len() + 3 + rest.find('/').unwrap_or(rest.len())
    });
    format!("{}/%2f", &url[..authority_end])
}

/// The test CA's certificate, or a failure saying which script makes it.
fn ca() -> PathBuf {
    let path = std::env::var_os("RUSTSTREAM_TLS_CA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("RUSTSTREAM_CACHE")
                .map_or_else(|| PathBuf::from("/var/cache/ruststream"), PathBuf::from);
            cache.join("tls/ca.pem")
        });
    assert!(
        path.is_file(),
        "no test CA at {} (RUSTSTREAM_TLS_CA): {HOW_TO_START}",
        path.display()
    );
    path
}

async fn connect(options: ConnectOptions) -> Result<LapinBroker, ConnectError> {
    let url = tls_url();
    tokio::time::timeout(CONNECT_WITHIN, LapinBroker::connect_with(&url, options))
        .await
        .unwrap_or_else(|_| panic!("connecting to {url} neither succeeded nor failed in time"))
}

fn unique(prefix: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rs-lapin-{prefix}-{}-{t}", std::process::id())
}

#[tokio::test]
async fn publish_consume_and_settle_over_tls_trusting_the_ca_file() {
    let broker = connect(ConnectOptions::new().tls_ca_file(ca()))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "no AMQP 0-9-1 over TLS at {} ({e}): {HOW_TO_START}",
                tls_url()
            )
        });
    let queue = unique("tls");
    let mut spec = SubscribeSpec::new(queue.as_str());
    // A quorum queue made for the test (and deleted after): found out over TLS too.
    spec.options
        .insert(SubscribeOptions::new().declare(QueueType::Quorum));
    let mut sub = broker.subscribe(spec).await.expect("subscribe over TLS");
    assert!(sub.capabilities.counts, "the probe ran over TLS");
    broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("{\"n\":1}").with_header("tenant", "acme"),
        )
        .await
        .expect("a confirmed publish over TLS");
    let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("a delivery within 10 s")
        .expect("open")
        .expect("a delivery");
    assert_eq!(d.payload().as_ref(), b"{\"n\":1}");
    assert_eq!(d.headers().get_str("tenant"), Some("acme"));
    d.settle(Settlement::Accept).await.expect("acked over TLS");
    drop(sub);
    delete(&queue).await;
    broker.close().await;
}

/// Deletes `queue` over a TLS connection of its own.
async fn delete(queue: &str) {
    let pem = std::fs::read_to_string(ca()).expect("read the CA");
    let config = lapin::tcp::OwnedTLSConfig {
        identity: None,
        cert_chain: Some(pem),
    };
    let connection = lapin::DefaultConnectionBuilder::new()
        .expect("runtime")
        .with_uri_str(tls_url())
        .with_tls_config(config)
        .connect()
        .await
        .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    channel
        .queue_delete(queue.into(), Default::default())
        .await
        .expect("delete");
    let _ = connection.close(200, "deleted".into()).await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_is_refused() {
    // The webpki roots alone: the test CA is not among them.
    match connect(ConnectOptions::new()).await {
        Err(ConnectError::Connect { reason, .. }) => {
            assert!(
                reason.to_lowercase().contains("certificate"),
                "a certificate error: {reason}"
            );
        }
        other => panic!("connected without trusting the CA: {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_ca_file_that_does_not_read_is_an_error() {
    let missing = PathBuf::from("/nonexistent/ca.pem");
    match connect(ConnectOptions::new().tls_ca_file(&missing)).await {
        Err(ConnectError::Tls(why)) => assert!(why.contains("/nonexistent/ca.pem"), "{why}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let not_pem = std::env::temp_dir().join(format!("rs-lapin-not-a-ca-{}", std::process::id()));
    std::fs::write(&not_pem, "hello").expect("write");
    match connect(ConnectOptions::new().tls_ca_file(&not_pem)).await {
        Err(ConnectError::Tls(why)) => assert!(why.contains("no PEM certificate"), "{why}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let _ = std::fs::remove_file(not_pem);
}
