//! TLS to a real PostgreSQL, as the URL's `sslmode` asks: `require` encrypts every
//! connection of the broker (the pool and `LISTEN`), `verify-full` against a CA that did
//! not sign the server's certificate is refused. Built with the `tls` feature only; the
//! server must have TLS on (`ssl = on`: Debian's PostgreSQL has it, with its snakeoil
//! certificate, as in CI). `RUSTSTREAM_TLS_CA`: the throwaway CA of
//! `scripts/tls-certs.sh`.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_postgres::{ConnectError, PostgresBroker};

fn ca() -> String {
    std::env::var("RUSTSTREAM_TLS_CA").unwrap_or_else(|_| "/var/cache/ruststream/tls/ca.pem".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_encrypts_every_connection() {
    let schema = support::unique_schema("tls");
    let broker = support::broker(
        &schema,
        &format!("&sslmode=require&application_name={schema}"),
    )
    .await;
    let (ssl, version): (bool, Option<String>) =
        sqlx::query_as("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(broker.pool())
            .await
            .expect("pg_stat_ssl");
    assert!(
        ssl,
        "the connection is not encrypted: the server under test needs `ssl = on` \
         (Debian's PostgreSQL has it)"
    );
    // Every connection of this broker is encrypted, LISTEN's too.
    let (all, plain): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE NOT s.ssl) FROM pg_stat_activity a \
         JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.application_name = $1",
    )
    .bind(&schema)
    .fetch_one(broker.pool())
    .await
    .expect("pg_stat_activity");
    assert!(
        all >= 2 && plain == 0,
        "{plain} of {all} connections in plain text"
    );
    assert!(version.is_some_and(|v| v.starts_with("TLS")));

    let mut deliveries = broker
        .subscribe(SubscribeSpec::new("orders"))
        .await
        .expect("subscribed")
        .deliveries;
    broker
        .publisher()
        .publish("orders".into(), Message::new("over tls"))
        .await
        .expect("published");
    let delivery = tokio::time::timeout(Duration::from_secs(10), deliveries.next())
        .await
        .expect("woken within 10 s")
        .expect("open")
        .expect("a delivery");
    assert_eq!(delivery.payload().as_ref(), b"over tls");
    delivery.settle(Settlement::Accept).await.expect("settled");
    broker.close().await;
    support::drop_schema(&schema);
}

#[tokio::test]
async fn verify_full_against_a_ca_that_did_not_sign_the_server_is_refused() {
    let schema = support::unique_schema("tls_verify");
    let url = support::url_for(
        &schema,
        &format!("&sslmode=verify-full&sslrootcert={}", ca()),
    );
    let Err(error) = PostgresBroker::connect(&url).await else {
        panic!("taken, though the test CA did not sign the server's certificate");
    };
    assert!(matches!(error, ConnectError::Unreachable { .. }), "{error}");
    assert!(error.to_string().contains("certificate"), "{error}");
}
