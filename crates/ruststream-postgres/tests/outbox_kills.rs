//! The outbox relay under repeated kills, to Redis and to RabbitMQ: relay processes, each
//! SIGKILLed at a random moment while it publishes, then a last relay that empties the
//! outbox. Every row then arrives at its broker at least once (duplicates counted, never
//! a loss). Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`), Redis (`RUSTSTREAM_REDIS_URL`,
//! default `redis://127.0.0.1:6379`) and RabbitMQ (`RUSTSTREAM_LAPIN_URL`, default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`).
//!
//! `RUSTSTREAM_OUTBOX_KILLS_ROWS` (default 2,000) and `RUSTSTREAM_OUTBOX_KILLS` (default
//! 12) scale it: `RELIABILITY.md`'s 100,000-row figures are this test's.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_conformance::child::Child;
use ruststream_core::{Broker, DeliveryStream, Settlement, SubscribeSpec};
use ruststream_postgres::PostgresBroker;

/// The child's schema, destination and address (`schema redis|rabbitmq address`).
const CHILD: &str = "RUSTSTREAM_OUTBOX_KILLS_CHILD";

fn scale(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The destination broker: Redis with keys under `address`'s prefix, or RabbitMQ.
async fn destination(to: &str, address: &str) -> Arc<dyn Broker> {
    match to {
        "redis" => {
            let url = std::env::var("RUSTSTREAM_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            let settings = ruststream_redis::Settings::default().key_prefix(format!("{address}:"));
            match ruststream_redis::RedisBroker::connect_with(&url, settings).await {
                Ok(broker) => Arc::new(broker),
                Err(error) => panic!(
                    "this test needs Redis at {url} (RUSTSTREAM_REDIS_URL): {error}; start one \
                     with `redis-server --daemonize yes --port 6379 --save '' --appendonly no`"
                ),
            }
        }
        _ => {
            let url = std::env::var("RUSTSTREAM_LAPIN_URL")
                .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
            match ruststream_lapin::LapinBroker::connect(&url).await {
                Ok(broker) => Arc::new(broker),
                Err(error) => panic!(
                    "this test needs RabbitMQ at {url} (RUSTSTREAM_LAPIN_URL): {error}; start \
                     the machine's (`service rabbitmq-server start`)"
                ),
            }
        }
    }
}

/// In the child only (the parent runs it, then kills it): relays the outbox until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_child() {
    let Ok(given) = std::env::var(CHILD) else {
        return;
    };
    let [schema, to, address] = given.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{CHILD}={given}");
    };
    let db = support::broker(schema, "").await;
    let publisher = destination(to, address).await.publisher();
    println!("relaying");
    db.outbox()
        .relay(db.pool().clone())
        .run(publisher, std::future::pending())
        .await;
}

/// Reads `address` until `rows` distinct numbers came and nothing more comes for 2 s:
/// how many times each number arrived.
async fn arrived(deliveries: &mut DeliveryStream, rows: u64) -> HashMap<u64, u64> {
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut last = Instant::now();
    loop {
        let quiet = if seen.len() as u64 >= rows { 2 } else { 60 };
        match tokio::time::timeout(Duration::from_secs(quiet), deliveries.next()).await {
            Ok(Some(Ok(delivery))) => {
                let n: u64 = std::str::from_utf8(delivery.payload())
                    .expect("text")
                    .parse()
                    .expect("a number");
                *seen.entry(n).or_default() += 1;
                delivery.settle(Settlement::Accept).await.expect("acked");
                last = Instant::now();
            }
            Ok(Some(Err(error))) => panic!("reading the destination: {error}"),
            Ok(None) => panic!("the destination's stream ended"),
            Err(_) => {
                assert!(
                    seen.len() as u64 >= rows,
                    "{} of {rows} arrived, nothing for {:?}",
                    seen.len(),
                    last.elapsed()
                );
                return seen;
            }
        }
    }
}

async fn relays_killed_lose_nothing(to: &str) {
    let rows = scale("RUSTSTREAM_OUTBOX_KILLS_ROWS", 2_000);
    let kills = scale("RUSTSTREAM_OUTBOX_KILLS", 12);
    let schema = support::unique_schema("ob_kills");
    let _drop = support::Dropped(schema.clone());
    let db: PostgresBroker = support::broker(&schema, "").await;
    let address = schema.clone();
    let dest = destination(to, &address).await;
    // Subscribed first: the queue (or the stream's group) is there before the first row.
    let mut spec = SubscribeSpec::new(address.as_str());
    spec.in_flight = 256;
    let mut deliveries = dest.subscribe(spec).await.expect("subscribed").deliveries;

    let outbox = db.outbox();
    let started = Instant::now();
    for first in (0..rows).step_by(1_000) {
        let mut tx = db.pool().begin().await.expect("begin");
        for n in first..(first + 1_000).min(rows) {
            outbox
                .message(address.as_str(), &n)
                .insert(&mut *tx)
                .await
                .expect("written");
        }
        tx.commit().await.expect("committed");
    }
    let depth = || async { outbox.depth(db.pool()).await.expect("depth").rows };
    let given = format!("{schema} {to} {address}");
    let mut killed = 0;
    // A relay at a time, killed 50-250 ms after it starts relaying, while rows are left.
    while killed < kills && depth().await > 0 {
        let child = Child::started(
            "relay_child",
            (CHILD, &given),
            "relaying",
            Duration::from_secs(30),
        )
        .await;
        child.kill_soon().await;
        killed += 1;
    }
    let left = depth().await;
    // What the kills left is relayed here.
    let last = outbox.relay(db.pool().clone()).spawn(dest.publisher());
    let emptied = async {
        while depth().await > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(600), emptied)
        .await
        .expect("the outbox emptied");
    last.stop().await;

    let seen = arrived(&mut deliveries, rows).await;
    let missing: Vec<u64> = (0..rows).filter(|n| !seen.contains_key(n)).collect();
    let duplicates: u64 = seen.values().map(|n| n - 1).sum();
    eprintln!(
        "{to}: {rows} rows, {killed} relays killed, {left} rows left after the kills, \
         {} lost, {duplicates} duplicates, {:.1} s",
        missing.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(killed > 0, "no relay was killed");
    assert!(missing.is_empty(), "lost: {missing:?}");
    dest.close().await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_killed_while_publishing_to_redis_lose_nothing() {
    relays_killed_lose_nothing("redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_killed_while_publishing_to_rabbitmq_lose_nothing() {
    relays_killed_lose_nothing("rabbitmq").await;
}
