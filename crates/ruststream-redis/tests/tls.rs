//! `rediss://` against a real TLS server: the Redis of `scripts/redis-tls.sh`
//! (TLS only, 127.0.0.1:6390) with the throwaway CA of `scripts/tls-certs.sh`. Every
//! kind of connection the adapter opens (the pool, a stream reader, a list reader, a
//! Pub/Sub subscriber) goes through TLS; a client that does not trust the CA is refused.
//!
//! `RUSTSTREAM_REDIS_TLS_URL` (default `rediss://127.0.0.1:6390`) and
//! `RUSTSTREAM_TLS_CA` (default `${RUSTSTREAM_CACHE:-/var/cache/ruststream}/tls/ca.pem`)
//! point elsewhere. Without the server every test here fails, saying how to start it.
#![cfg(feature = "tls")]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use ruststream_core::{Broker, Declaration, Settlement, Verdict};
use ruststream_redis::rustls::pki_types::CertificateDer;
use ruststream_redis::rustls::pki_types::pem::PemObject;
use ruststream_redis::rustls::{self, ClientConfig, RootCertStore};
use ruststream_redis::{ConnectError, PubSub, RedisBroker, ReliableList, Settings, Stream};
use support::{Ctx, complete, msg, n_of, next, unique_prefix};

const DEFAULT_URL: &str = "rediss://127.0.0.1:6390";
const HOW_TO_START: &str = "start it with `sudo scripts/redis-tls.sh` (TLS Redis on \
127.0.0.1:6390; it makes the test CA with scripts/tls-certs.sh)";
/// A connection attempt that neither succeeds nor fails by then is a failure too.
const CONNECT_WITHIN: Duration = Duration::from_secs(15);

fn url() -> String {
    std::env::var("RUSTSTREAM_REDIS_TLS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
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

/// Connects with `settings`, bounded in time.
async fn connect(settings: Settings) -> Result<RedisBroker, ConnectError> {
    let url = url();
    tokio::time::timeout(CONNECT_WITHIN, RedisBroker::connect_with(&url, settings))
        .await
        .unwrap_or_else(|_| panic!("connecting to {url} neither succeeded nor failed within 15 s"))
}

/// A rustls configuration of the test's own that trusts the test CA only.
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

/// A plain fred client over TLS, to look at the server from outside.
async fn admin() -> Client {
    let url = url();
    let plain = url.replacen("rediss://", "redis://", 1);
    let mut config = Config::from_url(&plain).expect("url");
    config.tls = Some(client_config_trusting_the_ca().into());
    let mut builder = Builder::from_config(config);
    builder.with_performance_config(|p| p.default_command_timeout = Duration::from_secs(10));
    let client = builder.build().expect("client");
    match tokio::time::timeout(CONNECT_WITHIN, client.init()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("no TLS Redis at {url} ({e}): {HOW_TO_START}"),
        Err(_) => panic!("no TLS Redis at {url} (timed out): {HOW_TO_START}"),
    }
}

/// A broker trusting the test CA (by [`Settings::tls_ca_file`]), with a fresh prefix.
async fn ctx() -> Ctx {
    let admin = admin().await;
    let prefix = unique_prefix();
    let settings = Settings::default()
        .key_prefix(prefix.clone())
        .tls_ca_file(ca());
    let broker = connect(settings)
        .await
        .unwrap_or_else(|e| panic!("no TLS Redis at {} ({e}): {HOW_TO_START}", url()));
    Ctx {
        broker,
        admin,
        prefix,
    }
}

#[tokio::test]
async fn a_stream_round_trip_over_tls_trusting_the_ca_file() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "orders",
            Stream::new().group("g").block(Duration::from_millis(200)),
            8,
        )
        .await;
    let caps = sub.capabilities;
    ctx.publish("orders", msg(1)).await;
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 1);
    assert_eq!(
        d.headers().get_str("content-type"),
        Some("application/json")
    );
    assert_eq!(ctx.pending("orders", "g").await, 1);
    complete(
        d,
        caps,
        Verdict::Ack,
        &Declaration::default(),
        &*ctx.broker.publisher(),
    )
    .await
    .expect("ack");
    assert_eq!(ctx.pending("orders", "g").await, 0, "XACK went over TLS");
    ctx.cleanup().await;
    ctx.broker.close().await;
}

#[tokio::test]
async fn a_reliable_list_and_pub_sub_over_tls() {
    let ctx = ctx().await;
    // A list reader: a blocking client of its own.
    let mut list = ctx
        .subscribe(
            "jobs",
            ReliableList::new().block(Duration::from_millis(200)),
            8,
        )
        .await;
    ctx.publish("jobs", msg(2)).await;
    let d = next(&mut list).await;
    assert_eq!(n_of(&d), 2);
    d.settle(Settlement::Accept).await.expect("LREM");
    // A Pub/Sub subscriber: fred's subscriber client.
    let mut channel = ctx.subscribe("news", PubSub::new(), 8).await;
    let publisher = ctx.broker.publisher();
    let mut received = None;
    for attempt in 0..50 {
        // A message published before the SUBSCRIBE is active is lost: publish again
        // until one arrives.
        publisher
            .publish("news".into(), msg(attempt))
            .await
            .expect("publish");
        if let Some(d) = support::next_within(&mut channel, Duration::from_millis(100)).await {
            received = Some(d);
            break;
        }
    }
    let d = received.expect("a Pub/Sub message over TLS within 5 s");
    assert_eq!(
        d.headers().get_str("content-type"),
        Some("application/json")
    );
    ctx.cleanup().await;
    ctx.broker.close().await;
}

#[tokio::test]
async fn a_rustls_config_of_the_callers_own_is_used_as_it_is() {
    let admin = admin().await; // the server is there
    let settings = Settings::default()
        .key_prefix(unique_prefix())
        .tls_client_config(client_config_trusting_the_ca());
    let broker = connect(settings)
        .await
        .expect("connects with the caller's rustls config");
    let mut sub = {
        let mut spec = ruststream_core::SubscribeSpec::new("q");
        spec.options
            .insert(Stream::new().block(Duration::from_millis(200)));
        broker.subscribe(spec).await.expect("subscribe")
    };
    broker
        .publisher()
        .publish("q".into(), msg(3))
        .await
        .expect("publish");
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 3);
    d.settle(Settlement::Accept).await.expect("ack");
    broker.close().await;

    // The config wins over the CA files: a config trusting no root at all is refused,
    // whatever file is named next to it.
    let trusts_nothing = Settings::default().tls_ca_file(ca()).tls_client_config(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth(),
    );
    assert!(matches!(
        connect(trusts_nothing).await,
        Err(ConnectError::Connect(_))
    ));
    drop(admin);
}

#[tokio::test]
async fn without_trusting_the_ca_the_connection_is_refused() {
    let _admin = admin().await; // the server is there: a refusal is about the certificate
    for (what, settings) in [
        ("system roots only", Settings::default()),
        (
            "system roots switched off, another CA",
            Settings::default()
                .tls_system_roots(false)
                .tls_ca_file(other_ca()),
        ),
    ] {
        match connect(settings).await {
            Err(ConnectError::Connect(message)) => {
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
        // A URL nobody listens on: the error comes before the connection.
        let result = tokio::time::timeout(
            CONNECT_WITHIN,
            RedisBroker::connect_with(
                "rediss://127.0.0.1:1",
                Settings::default().tls_ca_file(&path),
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
    let result = RedisBroker::connect_with(
        "rediss://127.0.0.1:1",
        Settings::default().tls_system_roots(false),
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
        "ruststream-redis-tls-{}-not-a-certificate.pem",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    )
    .expect("write a temp file");
    path
}

/// A CA that signed nothing the server has: made by this test in a temp folder with
/// the `openssl` command line (scripts/tls-certs.sh needs it too).
fn other_ca() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruststream-redis-tls-{}", std::process::id()));
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
