//! Connections reset while messages flow strand nothing: every entry is handled and the
//! group's pending list empties, with default options. The consumer reaches Redis through
//! the conformance crate's proxy, which cuts every connection a few times; the test
//! publishes and inspects the server directly.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ruststream_conformance::proxy::Proxy;
use ruststream_core::{Broker, Settlement};
use ruststream_redis::{Claiming, RedisBroker, Settings, Stream};
use support::{ctx, msg, n_of, next_within};

const TOTAL: usize = 400;
const RESETS: usize = 5;

/// The server's `host:port`, and its URL with `host:port` replaced by `via`.
fn upstream(via: &str) -> (String, String) {
    let url = support::url();
    let rest = url.strip_prefix("redis://").expect("a redis:// URL");
    let (auth, hostpath) = match rest.rsplit_once('@') {
        Some((auth, hostpath)) => (format!("{auth}@"), hostpath),
        None => (String::new(), rest),
    };
    let (hostport, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
    (hostport.to_owned(), format!("redis://{auth}{via}/{path}"))
}

async fn resets_strand_nothing(options: impl ruststream_core::BrokerOption) {
    let ctx = ctx().await;
    let proxy = Proxy::start(&upstream("").0).await;
    let proxied = upstream(&format!("127.0.0.1:{}", proxy.port())).1;
    let consumer =
        RedisBroker::connect_with(&proxied, Settings::default().key_prefix(ctx.prefix.clone()))
            .await
            .expect("connect through the proxy");
    let mut opts = ruststream_core::Options::default();
    opts.insert(options);
    let spec = ruststream_core::SubscribeSpec {
        address: "q".into(),
        declaration: Default::default(),
        in_flight: 16,
        options: opts,
        drain: Default::default(),
    };
    let mut sub = consumer.subscribe(spec).await.expect("subscribe");
    let handled = Arc::new(Mutex::new(HashSet::new()));
    let handler = tokio::spawn({
        let handled = handled.clone();
        async move {
            while let Some(d) = next_within(&mut sub, Duration::from_secs(60)).await {
                let n = n_of(&d);
                if let Err(error) = d.settle(Settlement::Accept).await {
                    eprintln!("ack of {n} failed (it comes back): {error}");
                    continue;
                }
                handled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(n);
            }
        }
    });
    let publisher = {
        let broker = ctx.broker.clone();
        tokio::spawn(async move {
            for n in 0..TOTAL {
                broker
                    .publisher()
                    .publish("q".into(), msg(n))
                    .await
                    .expect("publish");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    for _ in 0..RESETS {
        tokio::time::sleep(Duration::from_millis(350)).await;
        proxy.cut();
    }
    publisher.await.expect("published");
    let count = || handled.lock().unwrap_or_else(PoisonError::into_inner).len();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count() < TOTAL && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let missing: Vec<usize> = {
        let handled = handled.lock().unwrap_or_else(PoisonError::into_inner);
        (0..TOTAL).filter(|n| !handled.contains(n)).collect()
    };
    assert!(missing.is_empty(), "never handled: {missing:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ctx.pending("q", "g").await > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        ctx.pending("q", "g").await,
        0,
        "stranded in the pending list"
    );
    handler.abort();
    consumer.close().await;
    ctx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_connection_resets_strand_nothing() {
    resets_strand_nothing(Stream::new().group("g")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claiming_connection_resets_strand_nothing() {
    resets_strand_nothing(Claiming::default().group("g")).await;
}

/// A connection reset is said: a WARN naming the server when it is lost, an INFO with
/// the gap when it is back (fred reconnects by itself, so nothing else would tell).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_is_logged_when_lost_and_when_back() {
    let lines = ruststream_conformance::logs::logs();
    let ctx = ctx().await;
    let proxy = Proxy::start(&upstream("").0).await;
    let port = proxy.port();
    let proxied = upstream(&format!("127.0.0.1:{port}")).1;
    let consumer =
        RedisBroker::connect_with(&proxied, Settings::default().key_prefix(ctx.prefix.clone()))
            .await
            .expect("connect through the proxy");
    let mut sub = consumer
        .subscribe(ruststream_core::SubscribeSpec::new("q"))
        .await
        .expect("subscribe");
    ctx.broker
        .publisher()
        .publish("q".into(), msg(1))
        .await
        .expect("publish");
    let first = next_within(&mut sub, Duration::from_secs(10))
        .await
        .expect("a delivery");
    first.settle(Settlement::Accept).await.expect("ack");
    proxy.cut();
    // Other tests of this binary log too: the proxy's port tells this one's lines.
    let at = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(lines.line_with(&["redis connection lost", &at]).is_some()
        && lines.line_with(&["redis connection back", &at]).is_some())
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lost = lines
        .line_with(&["redis connection lost", &at])
        .unwrap_or_else(|| panic!("no loss logged:\n{}", lines.text()));
    assert!(lost.contains("WARN"), "{lost}");
    let back = lines
        .line_with(&["redis connection back", &at])
        .unwrap_or_else(|| panic!("no recovery logged:\n{}", lines.text()));
    assert!(back.contains("INFO") && back.contains("gap="), "{back}");
    consumer.close().await;
    ctx.cleanup().await;
}
