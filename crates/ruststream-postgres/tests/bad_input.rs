//! A server or a table the adapter cannot work with is refused at connect, saying why:
//! a read-only server (a standby given as the URL, or `default_transaction_read_only`),
//! and the adapter's tables altered by hand (a column dropped or retyped). Nothing is
//! written to them.

mod support;

use ruststream_core::Broker;
use ruststream_postgres::{ConnectError, PostgresBroker};

#[tokio::test]
async fn a_read_only_server_is_refused_at_connect() {
    let schema = support::unique_schema("readonly");
    // What a standby looks like to a client: every transaction read-only.
    let url = support::url_for(&schema, "&options=-c%20default_transaction_read_only%3Don");
    let error = PostgresBroker::connect(&url)
        .await
        .expect_err("a read-only server takes no queue");
    assert!(
        matches!(error, ConnectError::ReadOnly { .. }),
        "{}",
        support::missing(&error)
    );
    let text = error.to_string();
    assert!(
        text.contains("is read-only (default_transaction_read_only): connect to the primary"),
        "{text}"
    );
    // Nothing was made.
    let broker = support::broker(&schema, "").await;
    broker.close().await;
    support::drop_schema(&schema);
}

/// Drops `schema` over a plain connection (the broker refuses an altered one).
async fn drop_altered(schema: &str) {
    let pool = ruststream_conformance::postgres::pool().await;
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&pool)
        .await
        .expect("dropped");
}

async fn refused_after(schema: &str, statement: &str) -> String {
    let broker = support::broker(schema, "").await;
    sqlx::query(statement)
        .execute(broker.pool())
        .await
        .expect("the table altered by hand");
    broker.close().await;
    let error = PostgresBroker::connect(&support::url_for(schema, ""))
        .await
        .expect_err("an altered table is refused");
    assert!(matches!(error, ConnectError::Altered { .. }), "{error:?}");
    error.to_string()
}

#[tokio::test]
async fn a_dropped_column_is_refused_at_connect() {
    let schema = support::unique_schema("altered");
    let text = refused_after(
        &schema,
        &format!("ALTER TABLE {schema}.ruststream_messages DROP COLUMN attempts"),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "table {schema}.ruststream_messages was altered: column attempts (integer) is missing"
        )
    );
    drop_altered(&schema).await;
}

#[tokio::test]
async fn a_retyped_column_is_refused_at_connect() {
    let schema = support::unique_schema("retyped");
    let text = refused_after(
        &schema,
        &format!(
            "ALTER TABLE {schema}.ruststream_outbox ALTER COLUMN destination TYPE bytea \
             USING destination::bytea"
        ),
    )
    .await;
    assert_eq!(
        text,
        format!(
            "table {schema}.ruststream_outbox was altered: column destination is bytea, expected text"
        )
    );
    drop_altered(&schema).await;
}

#[tokio::test]
async fn a_column_of_the_operators_own_is_fine() {
    let schema = support::unique_schema("extra");
    let broker = support::broker(&schema, "").await;
    sqlx::query(&format!(
        "ALTER TABLE {schema}.ruststream_messages ADD COLUMN tenant text"
    ))
    .execute(broker.pool())
    .await
    .expect("a column added");
    broker.close().await;
    support::broker(&schema, "").await.close().await;
    support::drop_schema(&schema);
}
