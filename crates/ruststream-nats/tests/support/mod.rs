//! Shared test support: the server under test (a real NATS with JetStream), unique
//! subjects, and the clean-up of the streams a test binary made.
#![allow(dead_code, unreachable_pub)]

pub mod server;

use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::StreamExt;
use ruststream_nats::NatsBroker;

/// The server under test: `RUSTSTREAM_NATS_URL`, default `nats://127.0.0.1:4222`.
pub fn url() -> String {
    ruststream_nats::default_url()
}

/// How to start the server a test needs.
pub const HOW: &str = "Start NATS with JetStream (`nats-server -js -a 127.0.0.1 -p 4222 -sd /tmp/nats`), \
     or point RUSTSTREAM_NATS_URL at one.";

/// Connects to the server under test, or fails saying how to start it.
pub async fn broker() -> NatsBroker {
    let url = url();
    match NatsBroker::connect(&url).await {
        Ok(broker) => broker,
        Err(error) => panic!("NATS is not reachable at {url} ({error}). {HOW}"),
    }
}

/// A plain client of the server under test, for watching from outside.
pub async fn client() -> async_nats::Client {
    let url = url();
    match async_nats::connect(&url).await {
        Ok(client) => client,
        Err(error) => panic!("NATS is not reachable at {url} ({error}). {HOW}"),
    }
}

static NAMES: AtomicU32 = AtomicU32::new(0);

/// A subject token unique to this test run: `rstest<pid>x<time>x<n>`.
pub fn unique(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rstest-{prefix}-{}-{t}-{n}", std::process::id())
}

/// Deletes the streams whose names start with `prefix` (what a test made), on a
/// runtime of its own: callable from `Drop`.
pub fn delete_streams(prefix: &str) {
    let (url, prefix) = (url(), prefix.to_owned());
    let cleaned = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let Ok(client) = async_nats::connect(&url).await else {
                return;
            };
            let js = async_nats::jetstream::new(client);
            let names: Vec<String> = js
                .stream_names()
                .filter_map(|name| async move { name.ok() })
                .collect()
                .await;
            for name in names.iter().filter(|name| name.starts_with(&prefix)) {
                let _ = js.delete_stream(name).await;
            }
        });
    });
    let _ = cleaned.join();
}

use std::time::Duration;

use ruststream_core::{Broker, BrokerOption, Delivery, Message, SubscribeSpec, Subscription};

/// Subscribes to `subject` with `option` (and `in_flight` 8), failing the test if it fails.
pub async fn subscribe<O: BrokerOption>(
    broker: &NatsBroker,
    subject: &str,
    option: Option<O>,
) -> Subscription {
    let mut spec = SubscribeSpec::new(subject);
    spec.in_flight = 8;
    if let Some(option) = option {
        spec.options.insert(option);
    }
    match broker.subscribe(spec).await {
        Ok(subscription) => subscription,
        Err(error) => panic!("subscribe to {subject}: {error}"),
    }
}

/// The next delivery within `wait`, skipping reports; panics if none comes.
pub async fn next(subscription: &mut Subscription, wait: Duration) -> Delivery {
    match try_next(subscription, wait).await {
        Some(delivery) => delivery,
        None => panic!("no delivery within {wait:?}"),
    }
}

/// The next delivery within `wait`, skipping reports.
pub async fn try_next(subscription: &mut Subscription, wait: Duration) -> Option<Delivery> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, subscription.deliveries.next()).await {
            Ok(Some(Ok(delivery))) => return Some(delivery),
            Ok(Some(Err(report))) => eprintln!("report: {report}"),
            Ok(None) => panic!("the subscription ended"),
            Err(_) => return None,
        }
    }
}

/// Publishes `message` to `subject` through `broker`, failing the test if it fails.
pub async fn publish(broker: &NatsBroker, subject: &str, message: Message) {
    if let Err(error) = broker.publisher().publish(subject.into(), message).await {
        panic!("publish to {subject}: {error}");
    }
}

/// Publishes `message`, again while the broker is not connected (a publish during a
/// reconnect fails with the message handed back), for up to 30 s.
pub async fn publish_until_connected(broker: &NatsBroker, subject: &str, message: Message) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut message = message;
    loop {
        match broker.publisher().publish(subject.into(), message).await {
            Ok(()) => return,
            Err(error)
                if matches!(error.kind, ruststream_core::PublishErrorKind::Disconnected)
                    && std::time::Instant::now() < deadline =>
            {
                message = error.message;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("publish to {subject}: {error}"),
        }
    }
}

/// Whether the server stores a header block that begins with a status line as it was
/// published. nats-server 2.9 does; 2.15 stores such a message without its header block
/// (an ordinary message), so a client that writes the protocol by hand cannot make a
/// stored message look like the server's status. Asked of a stream of its own.
pub async fn keeps_status_lines() -> bool {
    let subject = unique("statusprobe");
    let client = client().await;
    let js = async_nats::jetstream::new(client.clone());
    let name = subject.replace('.', "_");
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        storage: async_nats::jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .expect("the probe's stream");
    let hpub = subject.clone();
    tokio::task::spawn_blocking(move || {
        raw_hpub(&hpub, b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", b"probe");
    })
    .await
    .expect("raw publish");
    let answer = client
        .request(
            format!("$JS.API.STREAM.MSG.GET.{name}"),
            r#"{"seq":1}"#.into(),
        )
        .await
        .expect("STREAM.MSG.GET");
    let _ = js.delete_stream(&name).await;
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).expect("a JSON answer");
    answer["message"]["hdrs"]
        .as_str()
        .is_some_and(|hdrs| !hdrs.is_empty())
}

/// Publishes `payload` with a raw header block on `subject`, over a socket of its own.
pub fn raw_hpub(subject: &str, header: &[u8], payload: &[u8]) {
    let address = url().trim_start_matches("nats://").to_owned();
    let mut socket = std::net::TcpStream::connect(&address).expect("connect raw");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut info = [0u8; 4096];
    let _ = std::io::Read::read(&mut socket, &mut info).expect("INFO");
    let mut frame = b"CONNECT {\"headers\":true,\"verbose\":false,\"pedantic\":false}\r\n".to_vec();
    frame.extend(
        format!(
            "HPUB {subject} {} {}\r\n",
            header.len(),
            header.len() + payload.len()
        )
        .bytes(),
    );
    frame.extend(header);
    frame.extend(payload);
    frame.extend(b"\r\nPING\r\n");
    std::io::Write::write_all(&mut socket, &frame).expect("write");
    let mut answer = [0u8; 256];
    let n = std::io::Read::read(&mut socket, &mut answer).expect("PONG");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.contains("PONG"), "the server answered {answer:?}");
}

/// Makes a sealed stream holding `subject` (JetStream refuses every publish to it), on a
/// runtime of its own: a dead letter that cannot be published.
pub fn sealed_stream(subject: &str) {
    let (url, subject) = (url(), subject.to_owned());
    let made = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let client = async_nats::connect(&url)
                .await
                .unwrap_or_else(|error| panic!("NATS at {url} ({error}). {HOW}"));
            let js = async_nats::jetstream::new(client);
            let mut config = async_nats::jetstream::stream::Config {
                name: subject.replace('.', "_"),
                subjects: vec![subject.clone()],
                ..Default::default()
            };
            js.create_stream(config.clone()).await.expect("the stream");
            config.sealed = true;
            js.update_stream(config).await.expect("sealed");
        });
    });
    made.join().expect("the sealed stream");
}
