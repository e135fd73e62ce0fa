//! Lease extensions beside settlements: an extension never waits for a row another
//! statement has locked, so it never closes a deadlock with a batched delete.

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

/// The extension of a subscription's leases skips a row locked by a statement under
/// way. It used to wait for it while holding the rows it had updated already; a batched
/// delete holding that row and waiting for one of those made a deadlock, which
/// PostgreSQL ended by failing one of the two (`examples/bench.rs`, `workers(16)`, met
/// it in one run of three: 144 settlements failed with `deadlock detected`). Here the
/// test's own transaction plays the delete: it locks the second of two held rows, lets
/// an extension start, then locks the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_skips_a_locked_row_instead_of_deadlocking() {
    let lines = ruststream_conformance::logs::logs();
    let schema = support::unique_schema("extend");
    // A lease of 1 s: the held rows are extended every third of it.
    let broker = support::broker(&schema, "&lease=1s").await;
    for payload in ["first", "second"] {
        broker
            .publisher()
            .publish("jobs".into(), Message::new(payload))
            .await
            .expect("published");
    }
    let mut spec = SubscribeSpec::new("jobs");
    spec.in_flight = 2;
    let mut deliveries = broker.subscribe(spec).await.expect("subscribed").deliveries;
    let mut held = Vec::new();
    for _ in 0..2 {
        let next = tokio::time::timeout(Duration::from_secs(5), deliveries.next());
        let delivery = next
            .await
            .expect("claimed")
            .expect("a row")
            .expect("no error");
        held.push(delivery);
    }

    let pool = sqlx::PgPool::connect(&support::url())
        .await
        .unwrap_or_else(|e| panic!("{}", support::missing(&e)));
    let messages = format!("{schema}.ruststream_messages");
    let ids: Vec<i64> = sqlx::query_scalar(&format!("SELECT id FROM {messages} ORDER BY id"))
        .fetch_all(&pool)
        .await
        .expect("ids");
    assert_eq!(ids.len(), 2);
    let mut tx = pool.begin().await.expect("a transaction");
    sqlx::query(&format!(
        "SELECT id FROM {messages} WHERE id = $1 FOR UPDATE"
    ))
    .bind(ids[1])
    .fetch_one(&mut *tx)
    .await
    .expect("the second row locked");
    // An extension runs meanwhile (every 333 ms).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let started = Instant::now();
    sqlx::query(&format!(
        "SELECT id FROM {messages} WHERE id = $1 FOR UPDATE"
    ))
    .bind(ids[0])
    .fetch_one(&mut *tx)
    .await
    .expect("the first row locked");
    let waited = started.elapsed();
    tx.rollback().await.expect("rolled back");
    assert!(
        lines.line_with(&["lease extension failed"]).is_none(),
        "{}",
        lines.text()
    );
    assert!(
        waited < Duration::from_millis(300),
        "the first row was held by an extension waiting for the second: {waited:?}"
    );
    for delivery in held {
        delivery
            .settle(Settlement::Accept)
            .await
            .expect("still this claim's row");
    }
    broker.close().await;
    support::drop_schema(&schema);
}
