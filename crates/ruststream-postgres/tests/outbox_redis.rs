//! The outbox relayed to a real Redis (a stream, the Redis adapter's default form): a
//! committed transaction's messages arrive once each, in order per key. Needs PostgreSQL
//! (`RUSTSTREAM_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`) and
//! Redis (`RUSTSTREAM_REDIS_URL`, default `redis://127.0.0.1:6379`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Settlement, SubscribeSpec};
use ruststream_redis::{RedisBroker, Settings};

async fn redis() -> RedisBroker {
    let url = std::env::var("RUSTSTREAM_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let prefix = format!("{}:", support::unique_schema("outbox"));
    RedisBroker::connect_with(&url, Settings::default().key_prefix(prefix))
        .await
        .unwrap_or_else(|error| {
            panic!(
                "this test needs Redis at {url} (RUSTSTREAM_REDIS_URL): {error}\n\
                 start one with: redis-server --daemonize yes --port 6379 --save '' --appendonly no"
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_arrives_at_redis_once_in_key_order() {
    let schema = support::unique_schema("ob_redis");
    let _drop = support::Dropped(schema.clone());
    let db = support::broker(&schema, "").await;
    let redis = redis().await;
    let mut spec = SubscribeSpec::new("invoices");
    spec.in_flight = 64;
    let mut deliveries = redis.subscribe(spec).await.expect("subscribed").deliveries;

    let outbox = db.outbox();
    let mut tx = db.pool().begin().await.expect("begin");
    for n in 0..20 {
        outbox
            .message("invoices", &n)
            .key(format!("customer-{}", n % 2))
            .insert(&mut *tx)
            .await
            .expect("written");
    }
    tx.commit().await.expect("committed");
    let relay = outbox.relay(db.pool().clone()).spawn(redis.publisher());

    let mut seen = Vec::new();
    while seen.len() < 20 {
        let next = tokio::time::timeout(Duration::from_secs(10), deliveries.next()).await;
        let delivery = match next {
            Ok(Some(Ok(delivery))) => delivery,
            other => panic!(
                "after {seen:?}: {:?}",
                other.map(|d| d.map(|d| d.map(drop)))
            ),
        };
        let n: u32 = std::str::from_utf8(delivery.payload())
            .expect("text")
            .parse()
            .expect("a number");
        seen.push(n);
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    relay.stop().await;
    let extra = tokio::time::timeout(Duration::from_millis(500), deliveries.next()).await;
    assert!(extra.is_err(), "nothing more than the 20");
    for parity in 0..2 {
        let of_key: Vec<u32> = seen.iter().copied().filter(|n| n % 2 == parity).collect();
        let expected: Vec<u32> = (0..20).filter(|n| n % 2 == parity).collect();
        assert_eq!(of_key, expected, "customer-{parity} in order, once each");
    }
    assert_eq!(outbox.depth(db.pool()).await.expect("depth").rows, 0);
    redis.close().await;
    db.close().await;
}
