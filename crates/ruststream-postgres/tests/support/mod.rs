//! What the PostgreSQL tests share: the server's URL, a fresh schema per test, and a
//! failure that says how to get a PostgreSQL when there is none.

#![allow(dead_code, unreachable_pub)]

use ruststream_postgres::{Outbox, PostgresBroker};

/// The server under test (`RUSTSTREAM_POSTGRES_URL`, else the local one), and a schema
/// name no other test uses.
pub use ruststream_conformance::postgres::{unique as unique_schema, url};

/// The server's URL with `schema` and further settings (`&lease=2s`) in its query.
pub fn url_for(schema: &str, more: &str) -> String {
    let base = url();
    let join = if base.contains('?') { '&' } else { '?' };
    format!("{base}{join}schema={schema}{more}")
}

/// A broker on `schema`; a missing PostgreSQL fails the test saying how to get one.
pub async fn broker(schema: &str, more: &str) -> PostgresBroker {
    let url = url_for(schema, more);
    match PostgresBroker::connect(&url).await {
        Ok(broker) => broker,
        Err(error) => panic!("{}", missing(&error)),
    }
}

/// The failure of a test that needs PostgreSQL and has none.
pub fn missing(error: &dyn std::fmt::Display) -> String {
    format!(
        "these tests need PostgreSQL: {error}\n\
         start one (PostgreSQL 15 on 127.0.0.1:5432, trust auth, database `test`, as in CI) \
         or set RUSTSTREAM_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test)"
    )
}

/// Runs `statements` on a connection of its own, from outside any runtime (a harness's
/// `Drop`, its synchronous set-up).
pub fn run_blocking(schema: String, statements: Vec<String>) {
    let done = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let broker = broker(&schema, "").await;
            for statement in statements {
                sqlx::query(&statement)
                    .execute(broker.pool())
                    .await
                    .unwrap_or_else(|error| panic!("{statement}: {error}"));
            }
            ruststream_core::Broker::close(&broker).await;
        });
    })
    .join();
    assert!(done.is_ok(), "the statements failed");
}

/// Drops a test's schema and everything in it.
pub fn drop_schema(schema: &str) {
    run_blocking(
        schema.to_owned(),
        vec![format!("DROP SCHEMA IF EXISTS {schema} CASCADE")],
    );
}

/// Makes a publish to any queue whose name starts with `sealed` fail in `schema`: a
/// trigger refuses the row.
pub fn seal(schema: &str) {
    run_blocking(
        schema.to_owned(),
        vec![
            format!(
                "CREATE OR REPLACE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN RAISE EXCEPTION 'queue % is sealed', NEW.queue; END $$"
            ),
            format!(
                "CREATE OR REPLACE TRIGGER sealed BEFORE INSERT ON {schema}.ruststream_messages
                 FOR EACH ROW WHEN (NEW.queue LIKE 'sealed%') EXECUTE FUNCTION {schema}.refuse()"
            ),
        ],
    );
}

pub mod recording;

/// Waits up to `limit` for `done`, checking every 20 ms.
pub async fn eventually(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    done()
}

/// Drops its schema when the test ends, passed or failed.
pub struct Dropped(pub String);

impl Drop for Dropped {
    fn drop(&mut self) {
        drop_schema(&self.0);
    }
}

/// A broker in a fresh schema, its outbox, and the guard that drops the schema.
pub async fn outbox(what: &str) -> (PostgresBroker, Outbox, Dropped) {
    let schema = unique_schema(what);
    let broker = broker(&schema, "").await;
    let outbox = broker.outbox();
    (broker, outbox, Dropped(schema))
}

/// Terminates, from the server's side, every connection named `name` (its
/// `application_name`), as a failover or an operator would; asserts there were at least
/// two (a pool's and a listener's), then waits 500 ms for the clients to notice.
pub async fn terminate_connections(pool: &sqlx::PgPool, name: &str) {
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .expect("terminated");
    assert!(
        cut.len() >= 2,
        "the pool's and the listener's connections: {cut:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
}
