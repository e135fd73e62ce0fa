//! The `archive` setting: a settled row is moved to the archive table (with how it was
//! settled and when) in the statement that deletes it, instead of being deleted only.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

async fn settle_three(more: &str) -> (String, sqlx::PgPool) {
    let schema = support::unique_schema("archive");
    let broker = support::broker(&schema, more).await;
    for payload in ["kept", "removed", "rejected"] {
        broker
            .publisher()
            .publish("jobs".into(), Message::new(payload))
            .await
            .expect("published");
    }
    let mut spec = SubscribeSpec::new("jobs");
    spec.in_flight = 3;
    let mut deliveries = broker.subscribe(spec).await.expect("subscribed").deliveries;
    for settlement in [Settlement::Accept, Settlement::Remove, Settlement::Reject] {
        let next = tokio::time::timeout(Duration::from_secs(5), deliveries.next());
        let delivery = next
            .await
            .expect("claimed")
            .expect("a row")
            .expect("no error");
        delivery.settle(settlement).await.expect("settled");
    }
    broker.close().await;
    let pool = sqlx::PgPool::connect(&support::url())
        .await
        .unwrap_or_else(|e| panic!("{}", support::missing(&e)));
    (schema, pool)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_archive_a_settled_row_moves_to_the_archive() {
    let (schema, pool) = settle_three("&archive=true").await;
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {schema}.ruststream_messages"
    ))
    .fetch_one(&pool)
    .await
    .expect("counted");
    assert_eq!(left, 0, "settled rows leave the queue");
    let archived: Vec<(String, Vec<u8>, i32, String)> = sqlx::query_as(&format!(
        "SELECT queue, payload, attempts, settlement FROM {schema}.ruststream_archive
         WHERE settled_at >= created_at ORDER BY id"
    ))
    .fetch_all(&pool)
    .await
    .expect("archived");
    let expected = [
        ("jobs", "kept", 1, "accept"),
        ("jobs", "removed", 1, "remove"),
        ("jobs", "rejected", 1, "reject"),
    ];
    let got: Vec<(&str, &str, i32, &str)> = archived
        .iter()
        .map(|(q, p, a, s)| {
            (
                q.as_str(),
                std::str::from_utf8(p).expect("text"),
                *a,
                s.as_str(),
            )
        })
        .collect();
    assert_eq!(got, expected);
    pool.close().await;
    support::drop_schema(&schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_settled_row_is_deleted_and_not_archived() {
    let (schema, pool) = settle_three("").await;
    let (left, archived): (i64, i64) = sqlx::query_as(&format!(
        "SELECT (SELECT count(*) FROM {schema}.ruststream_messages),
                (SELECT count(*) FROM {schema}.ruststream_archive)"
    ))
    .fetch_one(&pool)
    .await
    .expect("counted");
    assert_eq!((left, archived), (0, 0));
    pool.close().await;
    support::drop_schema(&schema);
}
