//! The inbox under repeated kills: consumer processes on RabbitMQ (AMQP 0-9-1), each
//! SIGKILLed at a random moment while it handles, until every message is handled. The
//! effect of each message (a row its handler writes in the inbox's transaction) is then
//! there exactly once: the published ids, each once, whatever the kills cut.
//! Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`) and RabbitMQ (`RUSTSTREAM_LAPIN_URL`,
//! default amqp://guest:guest@127.0.0.1:5672/%2f).

mod support;

use std::sync::Arc;
use std::time::Duration;

use ruststream::{App, Mount, Outcome, ack};
use ruststream_conformance::child::Child;
use ruststream_inbox::{Inbox, InboxError, Tx};
use support::Tables;

/// The child's queue and tables (`queue inbox effects`), set by the parent.
const CHILD: &str = "RUSTSTREAM_INBOX_KILLS";

/// How many messages and kills: `RUSTSTREAM_INBOX_KILLS_MESSAGES` (default 2,000) and
/// `RUSTSTREAM_INBOX_KILLS_COUNT` (default 12); `RELIABILITY.md`'s 100,000-message
/// figures are this test's.
fn scale(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A consumer of `queue` through the inbox: each message's number written to `effects`
/// in the inbox's transaction, with a few milliseconds on either side of the write so
/// that a kill lands anywhere.
async fn consumer(queue: &str, inbox: Inbox, effects: &str) -> ruststream::Running {
    let effects: Arc<str> = effects.into();
    App::new(support::rabbitmq().await)
        .mount(Mount::new(queue).layer(inbox), move |tx: Tx, n: u64| {
            let effects = effects.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(n % 3)).await;
                ruststream_inbox::sqlx::query(&format!(
                    "INSERT INTO {effects} (message, attempt) VALUES ($1, 0)"
                ))
                .bind(n.to_string())
                .execute(&mut *tx.conn().await?)
                .await?;
                tokio::time::sleep(Duration::from_millis(n % 2)).await;
                Ok::<Outcome, InboxError>(ack())
            }
        })
        .start()
        .await
        .expect("the consumer starts")
}

/// In the child only (the parent runs it, then kills it): consumes until killed. Run
/// alone, without the parent's variable, it has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_consuming_through_the_inbox() {
    let Ok(given) = std::env::var(CHILD) else {
        return;
    };
    let [queue, inbox, effects] = given.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{CHILD}={given}");
    };
    let inbox = Inbox::with_table(support::pool().await, inbox)
        .await
        .expect("the inbox");
    let _running = consumer(queue, inbox, effects).await;
    println!("consuming");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_consumers_leave_every_effect_exactly_once() {
    let (messages, kill_count) = (
        scale("RUSTSTREAM_INBOX_KILLS_MESSAGES", 2_000),
        scale("RUSTSTREAM_INBOX_KILLS_COUNT", 12),
    );
    let started = std::time::Instant::now();
    let tables = Tables::new("kills").await;
    let (queue, publisher) = support::rabbitmq_queue("inbox_kills").await;
    for n in 0..messages {
        publisher
            .message(queue.as_str(), &n)
            .message_id(format!("m-{n}"))
            .send()
            .await
            .expect("published");
    }
    let given = format!("{queue} {} {}", tables.inbox, tables.effects);
    let distinct = || async {
        let (n,): (i64,) = ruststream_inbox::sqlx::query_as(&format!(
            "SELECT count(DISTINCT message) FROM {}",
            tables.effects
        ))
        .fetch_one(&tables.pool)
        .await
        .expect("effects");
        n as u64
    };
    let mut kills = 0;
    // A child at a time, killed 50-250 ms after it starts consuming, while messages are
    // left.
    while kills < kill_count && distinct().await < messages {
        let child = Child::started(
            "child_consuming_through_the_inbox",
            (CHILD, &given),
            "consuming",
            Duration::from_secs(30),
        )
        .await;
        child.kill_soon().await;
        kills += 1;
    }
    // What the kills left is handled here.
    let inbox = tables.inbox().await;
    let running = consumer(&queue, inbox.clone(), &tables.effects).await;
    // 20 s, and a second more per 100 messages (a 100,000-message run).
    let deadline = std::time::Instant::now() + Duration::from_secs(20 + messages / 100);
    while distinct().await < messages {
        assert!(
            std::time::Instant::now() < deadline,
            "not every message's effect: {} of {messages}",
            distinct().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop().await.expect("a clean stop");

    let (all, distinct_now): (i64, i64) = ruststream_inbox::sqlx::query_as(&format!(
        "SELECT count(*), count(DISTINCT message) FROM {}",
        tables.effects
    ))
    .fetch_one(&tables.pool)
    .await
    .expect("effects");
    eprintln!(
        "{messages} messages, {kills} consumers killed; {} copies acknowledged by the last \
         one without a run; effects {all} ({distinct_now} distinct); {:.1} s",
        inbox.duplicates(),
        started.elapsed().as_secs_f64()
    );
    assert!(kills > 0, "no consumer was killed");
    assert_eq!(
        (all, distinct_now),
        (messages as i64, messages as i64),
        "each message's effect exactly once"
    );
    assert_eq!(tables.recorded().await, messages as i64);
    tables.drop_all().await;
}
