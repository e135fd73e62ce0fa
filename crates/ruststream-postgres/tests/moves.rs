//! A dead letter replaces its row in one statement (`Capabilities::moves`): a consumer
//! process SIGKILLed while it dead-letters thousands of rows leaves every message exactly
//! once, either still in its queue or in the dead letter's, never in both and never twice
//! in the dead letter's, once another consumer has taken over its leased rows.

mod support;

use std::time::Duration;

use ruststream::{App, Mount, retry};
use ruststream_conformance::child::Child;
use ruststream_core::{Broker, Message};

/// The child's schema, set by the parent.
const CHILD: &str = "RUSTSTREAM_PG_MOVES_SCHEMA";

/// How many messages are dead-lettered.
const N: usize = 3000;

/// Every row dead-letters at its first attempt, many at once.
fn mount() -> Mount {
    Mount::new("jobs")
        .max_attempts(1)
        .dead_letter("jobs.dead")
        .workers(16)
}

/// In the child only: dead-letters every row of `jobs` until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_dead_lettering() {
    let Ok(schema) = std::env::var(CHILD) else {
        return;
    };
    let broker = support::broker(&schema, "&lease=2s").await;
    let _running = App::new(broker)
        .mount(mount(), || async { retry() })
        .start()
        .await
        .expect("the child starts");
    println!("dead-lettering");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

async fn count(pool: &sqlx::PgPool, schema: &str, query: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(
        &query.replace("{messages}", &format!("{schema}.ruststream_messages")),
    )
    .fetch_one(pool)
    .await
    .expect("counted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_while_dead_lettering_leaves_each_message_once() {
    let schema = support::unique_schema("moves");
    let broker = support::broker(&schema, "&lease=2s").await;
    let publisher = broker.publisher();
    for n in 0..N {
        publisher
            .publish("jobs".into(), Message::new(format!("m{n}")))
            .await
            .expect("published");
    }
    let pool = broker.pool().clone();
    let child = Child::started(
        "child_dead_lettering",
        (CHILD, &schema),
        "dead-lettering",
        Duration::from_secs(30),
    )
    .await;
    // Killed in the middle: some rows dead-lettered, most not yet.
    let dead_query = "SELECT count(*) FROM {messages} WHERE queue = 'jobs.dead'";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while count(&pool, &schema, dead_query).await < (N / 5) as i64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the child dead-lettered too little"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill();

    // Another consumer takes over the killed one's rows once their lease runs out.
    let running = App::new(broker.clone())
        .mount(mount(), || async { retry() })
        .start()
        .await
        .expect("the next consumer starts");
    let left = "SELECT count(*) FROM {messages} WHERE queue = 'jobs'";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while count(&pool, &schema, left).await > 0 {
        assert!(tokio::time::Instant::now() < deadline, "rows left in jobs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let copies = "SELECT count(*) FROM {messages} WHERE queue = 'jobs.dead'";
    let distinct = "SELECT count(DISTINCT payload) FROM {messages} WHERE queue = 'jobs.dead'";
    let (copies, distinct) = (
        count(&pool, &schema, copies).await,
        count(&pool, &schema, distinct).await,
    );
    running.stop().await.expect("stopped");
    assert_eq!(distinct, N as i64, "every message dead-lettered");
    assert_eq!(
        copies, N as i64,
        "each dead-lettered once ({copies} dead letters)"
    );
    support::drop_schema(&schema);
}
