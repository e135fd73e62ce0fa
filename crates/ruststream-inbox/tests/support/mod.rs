//! What the inbox tests share: the PostgreSQL they write to, tables of their own, and a
//! service on the in-memory broker whose handler writes through the inbox.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::time::Duration;

use std::sync::Arc;

use ruststream_core::{Broker, SubscribeSpec};
use ruststream_inbox::Inbox;
use ruststream_inbox::sqlx::PgPool;
use ruststream_lapin::LapinBroker;

pub use ruststream_conformance::postgres::{pool, unique, url};

/// A connection to RabbitMQ (`RUSTSTREAM_LAPIN_URL`, default the machine's); a missing
/// one fails the test saying how to start it.
pub async fn rabbitmq() -> LapinBroker {
    let url = std::env::var("RUSTSTREAM_LAPIN_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    LapinBroker::connect(&url).await.unwrap_or_else(|e| {
        panic!(
            "this test needs RabbitMQ at {url}: {e}; start the machine's RabbitMQ \
             (service rabbitmq-server start) or set RUSTSTREAM_LAPIN_URL"
        )
    })
}

/// A new RabbitMQ queue, declared as a mount on it declares it (a durable quorum queue),
/// and a publisher to it.
pub async fn rabbitmq_queue(prefix: &str) -> (String, ruststream::Publisher) {
    let queue = unique(prefix);
    let broker = rabbitmq().await;
    drop(
        broker
            .subscribe(SubscribeSpec::new(queue.as_str()))
            .await
            .expect("the queue declared"),
    );
    (queue, ruststream::Publisher::for_broker(Arc::new(broker)))
}

/// A test's tables: an inbox and an effects table the handlers write rows to.
pub struct Tables {
    pub pool: PgPool,
    pub inbox: String,
    pub effects: String,
}

impl Tables {
    pub async fn new(what: &str) -> Self {
        let pool = pool().await;
        let inbox = unique(&format!("{what}_inbox"));
        let effects = unique(&format!("{what}_effects"));
        sqlx_exec(
            &pool,
            &format!("CREATE TABLE {effects} (message text NOT NULL, attempt int NOT NULL)"),
        )
        .await;
        Self {
            pool,
            inbox,
            effects,
        }
    }

    pub async fn inbox(&self) -> Inbox {
        Inbox::with_table(self.pool.clone(), &self.inbox)
            .await
            .expect("the inbox table is made")
    }

    /// The rows of the effects table, as (message, attempt), in order.
    pub async fn effects(&self) -> Vec<(String, i32)> {
        ruststream_inbox::sqlx::query_as(&format!(
            "SELECT message, attempt FROM {} ORDER BY message, attempt",
            self.effects
        ))
        .fetch_all(&self.pool)
        .await
        .expect("effects read")
    }

    /// How many messages the inbox holds.
    pub async fn recorded(&self) -> i64 {
        let (n,): (i64,) =
            ruststream_inbox::sqlx::query_as(&format!("SELECT count(*) FROM {}", self.inbox))
                .fetch_one(&self.pool)
                .await
                .expect("inbox read");
        n
    }

    pub async fn drop_all(self) {
        sqlx_exec(
            &self.pool,
            &format!("DROP TABLE IF EXISTS {}, {}", self.inbox, self.effects),
        )
        .await;
    }
}

pub async fn sqlx_exec(pool: &PgPool, sql: &str) {
    ruststream_inbox::sqlx::query(sql)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Waits up to 20 s for `check`.
pub async fn until<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 20 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
