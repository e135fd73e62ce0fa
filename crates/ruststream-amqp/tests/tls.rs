//! `amqps://` against a real TLS listener: RabbitMQ 4 of `scripts/rabbitmq4.sh` (TLS on
//! localhost:5674) with the throwaway CA of `scripts/tls-certs.sh`. Publishing,
//! consuming and settling go over TLS; a dead letter (RabbitMQ's `x-opt-deaths`) decodes
//! under TLS too; a client that does not trust the CA is refused.
//!
//! `RUSTSTREAM_AMQP_TLS_URL` (default `amqps://guest:guest@localhost:5674`) and
//! `RUSTSTREAM_TLS_CA` (default `${RUSTSTREAM_CACHE:-/var/cache/ruststream}/tls/ca.pem`)
//! point elsewhere. Without the listener every test here fails, saying how to start it.
#![cfg(feature = "tls")]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ruststream_amqp::rustls::pki_types::CertificateDer;
use ruststream_amqp::rustls::pki_types::pem::PemObject;
use ruststream_amqp::rustls::{self, ClientConfig, RootCertStore};
use ruststream_amqp::{AmqpBroker, ConnectError, ConnectOptions, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Message, Original, Settlement, Verdict};
use support::*;

const DEFAULT_URL: &str = "amqps://guest:guest@localhost:5674";
const HOW_TO_START: &str = "start it with `sudo scripts/rabbitmq4.sh` (RabbitMQ 4 with a \
TLS listener on 127.0.0.1:5674; it makes the test CA with scripts/tls-certs.sh)";
/// A connection attempt that neither succeeds nor fails by then is a failure too.
const CONNECT_WITHIN: Duration = Duration::from_secs(20);

fn topology(q: &mut Queues) {
    q.quorum("tls-ack");
    q.quorum("tls-own-config");
    q.quorum_with_dlx("tls-drop", None);
}

fn q(role: &str) -> String {
    name(topology, role)
}

fn tls_url() -> String {
    std::env::var("RUSTSTREAM_AMQP_TLS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
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

/// Connects with `options`, bounded in time.
async fn connect(options: ConnectOptions) -> Result<AmqpBroker, ConnectError> {
    let url = tls_url();
    tokio::time::timeout(CONNECT_WITHIN, AmqpBroker::connect_with(&url, options))
        .await
        .unwrap_or_else(|_| panic!("connecting to {url} neither succeeded nor failed in time"))
}

/// A broker over TLS trusting the test CA, or a failure saying how to start the server.
async fn tls_broker() -> AmqpBroker {
    connect(ConnectOptions::new().tls_ca_file(ca()))
        .await
        .unwrap_or_else(|e| panic!("no AMQP over TLS at {} ({e}): {HOW_TO_START}", tls_url()))
}

fn client_config_trusting_the_ca() -> ClientConfig {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca()).expect("read the CA file") {
        roots.add(cert.expect("a PEM certificate")).expect("a CA");
    }
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

#[tokio::test]
async fn publish_consume_and_settle_over_tls_trusting_the_ca_file() {
    let broker = tls_broker().await;
    let queue = q("tls-ack");
    broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("{\"n\":1}").with_header("tenant", "acme"),
        )
        .await
        .expect("publish over TLS");
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    assert!(
        sub.capabilities.counts,
        "found out over TLS (management on a TLS connection of its own) that a quorum queue counts"
    );
    let d = next(&mut sub, 10).await;
    assert_eq!(d.defect(), None);
    assert_eq!(d.payload().as_ref(), b"{\"n\":1}");
    assert_eq!(d.headers().get_str("tenant"), Some("acme"));
    assert_eq!(d.broker_attempt(), Some(1));
    let done = run(&broker, &sub, &decl, d, Verdict::Ack).await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Accept));
    assert!(matches!(done.settled, Some(Ok(()))));
    drop(sub);
    empty(&broker, &queue, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn a_dead_letter_decodes_under_tls_too() {
    let broker = tls_broker().await;
    let (queue, dead) = (q("tls-drop"), q("tls-drop-dead"));
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let done = run(&broker, &sub, &decl, d, Verdict::Drop).await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Reject));
    // RabbitMQ writes `x-opt-deaths` (an array of maps, which fe2o3 cannot decode) on
    // the dead letter: the frame patch works on the frames under TLS as well.
    let mut dead_sub = subscribe(&broker, spec(&dead, SubscribeOptions::new(), decl)).await;
    let d = next(&mut dead_sub, 10).await;
    assert_eq!(d.defect(), None, "the dead letter must decode over TLS");
    assert_eq!(d.payload().as_ref(), b"m-0");
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn a_rustls_config_of_the_callers_own_is_used_as_it_is() {
    let broker = connect(ConnectOptions::new().tls_client_config(client_config_trusting_the_ca()))
        .await
        .unwrap_or_else(|e| panic!("no AMQP over TLS at {} ({e}): {HOW_TO_START}", tls_url()));
    let queue = q("tls-own-config");
    publish_n(&broker, &queue, 1, "own").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"own-0");
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;

    // The config wins over the CA files: one trusting no root at all is refused,
    // whatever file is named next to it.
    let trusts_nothing =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth();
    let refused = connect(
        ConnectOptions::new()
            .tls_ca_file(ca())
            .tls_client_config(trusts_nothing),
    )
    .await;
    assert!(matches!(refused, Err(ConnectError::Tls(_))), "{refused:?}");
}

#[tokio::test]
async fn without_trusting_the_ca_the_connection_is_refused() {
    tls_broker().await.close().await; // the listener is there: a refusal is about trust
    for (what, options) in [
        ("default roots only", ConnectOptions::new()),
        (
            "default roots switched off, another CA",
            ConnectOptions::new()
                .tls_default_roots(false)
                .tls_ca_file(other_ca()),
        ),
    ] {
        match connect(options).await {
            Err(ConnectError::Tls(message)) => {
                eprintln!("{what}: refused: {message}");
                assert!(
                    message.contains("certificate") || message.contains("UnknownIssuer"),
                    "{what}: refused, but not for the certificate: {message}"
                );
            }
            Err(other) => panic!("{what}: another error: {other}"),
            Ok(_) => panic!("{what}: connected without trusting the server's CA"),
        }
    }
}

#[tokio::test]
async fn a_bad_ca_file_is_a_clear_error_before_any_connection() {
    for (path, expected) in [
        (PathBuf::from("/nonexistent/ca.pem"), "cannot read CA file"),
        (
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"),
            "holds no PEM certificate",
        ),
        (not_a_certificate(), "certificate 1 is not usable"),
    ] {
        // Nobody listens on port 1: the error comes before the connection.
        let result = tokio::time::timeout(
            CONNECT_WITHIN,
            AmqpBroker::connect_with(
                "amqps://guest:guest@127.0.0.1:1",
                ConnectOptions::new().tls_ca_file(&path),
            ),
        )
        .await
        .expect("fails at once");
        match result {
            Err(ConnectError::Tls(message)) => {
                assert!(message.contains(expected), "{message}");
                assert!(message.contains(&path.display().to_string()), "{message}");
            }
            Err(other) => panic!("{}: not a TLS error: {other}", path.display()),
            Ok(_) => panic!("{}: accepted", path.display()),
        }
    }
}

#[tokio::test]
async fn no_root_to_trust_is_a_clear_error() {
    let result = AmqpBroker::connect_with(
        "amqps://guest:guest@127.0.0.1:1",
        ConnectOptions::new().tls_default_roots(false),
    )
    .await;
    match result {
        Err(ConnectError::Tls(message)) => {
            assert!(message.contains("no root certificate"), "{message}")
        }
        Err(other) => panic!("not a TLS error: {other}"),
        Ok(_) => panic!("connected trusting nothing"),
    }
}

/// A PEM file whose CERTIFICATE block is not a certificate.
fn not_a_certificate() -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "ruststream-amqp-tls-{}-not-a-certificate.pem",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    )
    .expect("write a temp file");
    path
}

/// A CA that signed nothing the server has, made with the `openssl` command line
/// (scripts/tls-certs.sh needs it too) in a temp folder.
fn other_ca() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruststream-amqp-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (key, cert) = (dir.join("other-ca.key"), dir.join("other-ca.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=another CA", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl could not make another CA");
    cert
}
