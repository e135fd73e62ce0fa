//! Connecting: the tables are migrated once however many processes start at once, and
//! a PostgreSQL that is not there, a bad URL or a bad setting is a clear error.

mod support;

use ruststream_core::Broker;
use ruststream_postgres::{ConnectError, PostgresBroker, VERSION};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_when_started_twice_and_at_once() {
    let schema = support::unique_schema("migrate");
    let url = support::url_for(&schema, "");
    let starting = (0..6).map(|_| PostgresBroker::connect(&url));
    let brokers: Vec<_> = futures_util::future::join_all(starting).await;
    let mut brokers: Vec<PostgresBroker> = brokers
        .into_iter()
        .map(|b| b.unwrap_or_else(|error| panic!("{}", support::missing(&error))))
        .collect();
    // And once more, later: nothing to do.
    brokers.push(support::broker(&schema, "").await);
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {schema}.ruststream_migrations ORDER BY version"
    ))
    .fetch_all(brokers[0].pool())
    .await
    .expect("versions");
    assert_eq!(versions, (1..=VERSION).collect::<Vec<_>>());
    for broker in &brokers {
        broker.close().await;
    }
    support::drop_schema(&schema);
}

#[tokio::test]
async fn a_postgresql_that_is_not_there_is_a_clear_error() {
    let error = PostgresBroker::connect("postgres://postgres:secret@127.0.0.1:1/test")
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        matches!(error, ConnectError::Unreachable { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with("cannot reach postgresql at postgres://postgres:***@127.0.0.1:1/test"),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
}

#[tokio::test]
async fn bad_urls_and_settings_are_clear_errors() {
    let error = PostgresBroker::connect("postgres://h/db?prefetch=8")
        .await
        .expect_err("unknown key");
    assert!(
        error
            .to_string()
            .contains("unknown key for the postgres broker"),
        "{error}"
    );
    let error = PostgresBroker::connect("postgres://h/db?lease=soon")
        .await
        .expect_err("bad value");
    assert!(error.to_string().contains("lease=\"soon\""), "{error}");
    let error = PostgresBroker::connect("postgres://h:port/db")
        .await
        .expect_err("bad url");
    assert!(matches!(error, ConnectError::BadUrl(_)), "{error:?}");
}

#[test]
fn a_missing_postgresql_says_how_to_get_one() {
    let text = support::missing(&"connection refused");
    assert!(text.contains("RUSTSTREAM_POSTGRES_URL"), "{text}");
    assert!(text.contains("127.0.0.1:5432"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connector_opens_both_schemes() {
    use ruststream_core::Connector;
    use ruststream_postgres::PostgresConnector;

    let schema = support::unique_schema("connector");
    for url in [
        support::url_for(&schema, ""),
        support::url_for(&schema, "").replacen("postgres://", "postgresql://", 1),
    ] {
        let broker = PostgresConnector
            .connect(&url)
            .await
            .unwrap_or_else(|error| panic!("{}", support::missing(&error)));
        assert_eq!(broker.name(), "postgres");
        assert!(broker.inspect().is_some());
        broker.close().await;
    }
    let error = PostgresConnector
        .connect("postgres://h/db?lease=1")
        .await
        .err()
        .expect("bad setting");
    assert!(error.to_string().contains("lease"), "{error}");
    support::drop_schema(&schema);
}
