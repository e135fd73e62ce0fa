//! Writing into the outbox against a real PostgreSQL: writers of one key wait for each
//! other, bad input is an error, the outbox migrates without a broker and its depth
//! tells the oldest message's age. Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream_postgres::{Outbox, OutboxError};

use support::outbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_one_key_commit_in_id_order() {
    let (db, outbox, _drop) = outbox("ob_writers").await;
    let mut first = db.pool().begin().await.expect("begin");
    let first_id = outbox
        .message("w", &1)
        .key("order-1")
        .insert(&mut *first)
        .await
        .expect("first");
    let other = outbox.clone();
    let pool = db.pool().clone();
    let second = tokio::spawn(async move {
        let mut tx = pool.begin().await.expect("begin");
        let id = other
            .message("w", &2)
            .key("order-1")
            .insert(&mut *tx)
            .await
            .expect("second");
        tx.commit().await.expect("committed");
        id
    });
    // Another key does not wait; the same key waits for the first commit.
    let mut conn = db.pool().acquire().await.expect("a connection");
    outbox
        .message("w", &3)
        .key("order-2")
        .insert(&mut *conn)
        .await
        .expect("another key");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second writer waits");
    first.commit().await.expect("committed");
    let second_id = second.await.expect("the second writer");
    assert!(second_id > first_id, "{second_id} after {first_id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_an_error() {
    let (db, outbox, _drop) = outbox("ob_bad").await;
    let error = outbox
        .publish(db.pool(), "", &1)
        .await
        .expect_err("no address");
    assert!(matches!(error, OutboxError::BadDestination), "{error}");
    let error = outbox
        .message("x", &1)
        .key("")
        .insert(db.pool())
        .await
        .expect_err("no key");
    assert!(matches!(error, OutboxError::BadKey), "{error}");
    let unencodable: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
    let error = outbox
        .publish(db.pool(), "x", &unencodable)
        .await
        .expect_err("no json");
    assert!(
        error.to_string().starts_with("cannot encode the message: "),
        "{error}"
    );
    let error = Outbox::migrate(db.pool(), "Bad; schema")
        .await
        .expect_err("bad schema");
    assert!(error.to_string().starts_with("bad schema"), "{error}");
    assert_eq!(outbox.depth(db.pool()).await.expect("depth").rows, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_makes_the_outbox_without_a_broker_and_depth_ages() {
    let schema = support::unique_schema("ob_migrate");
    let _drop = support::Dropped(schema.clone());
    let pool = sqlx::PgPool::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("{}", support::missing(&error)));
    let (first, again) = tokio::join!(
        Outbox::migrate(&pool, &schema),
        Outbox::migrate(&pool, &schema)
    );
    let outbox = first.expect("migrated");
    again.expect("migrated at once");
    let mut conn = pool.acquire().await.expect("a connection");
    outbox
        .publish(&mut *conn, "aged", &"old")
        .await
        .expect("written");
    drop(conn);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let depth = outbox.depth(&pool).await.expect("depth");
    assert_eq!(depth.rows, 1);
    assert!(
        depth
            .oldest
            .is_some_and(|age| age >= Duration::from_millis(150)),
        "{depth:?}"
    );
    pool.close().await;
}
