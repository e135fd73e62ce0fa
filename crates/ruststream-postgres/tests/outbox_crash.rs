//! A relay process killed (SIGKILL) while it publishes (its broker stopped answering in
//! the middle of a batch): the rows of that batch it had published, and not yet deleted,
//! are published again by the next relay, and no row is lost. The
//! destination is a real broker that outlives the process: the adapter's own queue. Its
//! consumer, with the inbox, then runs each message's effects once: the copies carry
//! the message id the outbox gave the row.
//! Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ruststream_core::Broker;
use support::recording::{Log, Recording};

/// The variable that makes this test binary a relay child, naming its schema.
const CHILD: &str = "RUSTSTREAM_OUTBOX_RELAY_CHILD";
const ROWS: u32 = 400;

/// Where the child's destination stops answering.
const STALL_AFTER: usize = 110;

/// The child: relays the schema's outbox to the queue `relayed`, slowly, until killed; its
/// publishes from the 111th on never finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_child() {
    let Ok(schema) = std::env::var(CHILD) else {
        return; // a test run of its own: nothing to do
    };
    let broker = support::broker(&schema, "").await;
    let slow = Recording::new(broker.publisher(), Log::default(), 0)
        .delay(Duration::from_millis(2))
        .stall_after(STALL_AFTER);
    eprintln!("relay child started");
    broker
        .outbox()
        .relay(broker.pool().clone())
        .batch(25)
        .run(Arc::new(slow), std::future::pending())
        .await;
}

async fn relayed(broker: &ruststream_postgres::PostgresBroker, schema: &str) -> BTreeMap<u32, i64> {
    let rows: Vec<(Vec<u8>, i64)> = sqlx::query_as(&format!(
        "SELECT payload, count(*) FROM {schema}.ruststream_messages
         WHERE queue = 'relayed' GROUP BY payload"
    ))
    .fetch_all(broker.pool())
    .await
    .expect("the destination");
    rows.into_iter()
        .map(|(payload, n)| {
            let text = String::from_utf8(payload).expect("text");
            (text.parse().expect("a number"), n)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_mid_publishing_duplicates_and_loses_nothing() {
    let schema = support::unique_schema("ob_kill");
    let _drop = support::Dropped(schema.clone());
    let broker = support::broker(&schema, "").await;
    let outbox = broker.outbox();
    let mut tx = broker.pool().begin().await.expect("begin");
    for n in 0..ROWS {
        let entry = outbox.message("relayed", &n);
        let entry = if n.is_multiple_of(2) {
            entry
        } else {
            entry.key(format!("k{}", n % 5))
        };
        entry.insert(&mut *tx).await.expect("written");
    }
    tx.commit().await.expect("committed");

    let exe = std::env::current_exe().expect("this test binary");
    let mut child = tokio::process::Command::new(exe)
        .args(["--exact", "relay_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, &schema)
        .kill_on_drop(true)
        .spawn()
        .expect("the relay child");
    // Kill it once it is stuck in a batch: published at the destination, not yet deleted
    // from the outbox.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the child relayed too little"
        );
        let published: i64 = relayed(&broker, &schema).await.values().sum();
        let waiting = outbox.depth(broker.pool()).await.expect("depth").rows;
        let deleted = i64::from(ROWS) - i64::try_from(waiting).expect("rows");
        if published >= i64::try_from(STALL_AFTER).expect("small") && published > deleted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.start_kill().expect("SIGKILL");
    let status = child.wait().await.expect("the child's end");
    assert!(!status.success(), "killed, not finished: {status}");
    let left = outbox.depth(broker.pool()).await.expect("depth").rows;
    assert!(left > 0, "the child was killed before the end");

    // The next relay finishes the outbox.
    let handle = outbox
        .relay(broker.pool().clone())
        .spawn(broker.publisher());
    let done = async {
        while outbox.depth(broker.pool()).await.expect("depth").rows > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), done)
        .await
        .expect("the outbox emptied");
    handle.stop().await;

    let relayed = relayed(&broker, &schema).await;
    let missing: Vec<u32> = (0..ROWS).filter(|n| !relayed.contains_key(n)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
    let duplicates: i64 = relayed.values().map(|n| n - 1).sum();
    eprintln!("{left} rows left at the kill, {duplicates} published twice");
    assert!(
        duplicates > 0,
        "the batch out at the kill was published again"
    );
    effects_once(&schema, broker.pool().clone(), duplicates).await;
    broker.close().await;
}

/// Consumes `relayed` through the inbox, writing each number to a table in the inbox's
/// transaction: every number once, and each copy acknowledged without a run.
async fn effects_once(schema: &str, pool: sqlx::PgPool, duplicates: i64) {
    use ruststream::{App, Mount, Outcome, ack};
    use ruststream_inbox::{Inbox, InboxError, Tx};

    let consumer = support::broker(schema, "").await;
    let effects = format!("{schema}.effects");
    sqlx::query(&format!("CREATE TABLE {effects} (n int NOT NULL)"))
        .execute(&pool)
        .await
        .expect("the effects table");
    let inbox = Inbox::with_table(pool.clone(), &format!("{schema}.inbox"))
        .await
        .expect("the inbox");
    let table: Arc<str> = effects.as_str().into();
    let running = App::new(consumer)
        .mount(
            Mount::new("relayed").layer(inbox.clone()),
            move |tx: Tx, n: u32| {
                let table = table.clone();
                async move {
                    sqlx::query(&format!("INSERT INTO {table} (n) VALUES ($1)"))
                        .bind(i64::from(n))
                        .execute(&mut *tx.conn().await?)
                        .await
                        .map_err(InboxError::from)?;
                    Ok::<Outcome, InboxError>(ack())
                }
            },
        )
        .start()
        .await
        .expect("the consumer starts");
    let counted = || async {
        let (all, distinct): (i64, i64) = sqlx::query_as(&format!(
            "SELECT count(*), count(DISTINCT n) FROM {effects}"
        ))
        .fetch_one(&pool)
        .await
        .expect("effects");
        (all, distinct)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while counted().await.1 < i64::from(ROWS) || (inbox.duplicates() as i64) < duplicates {
        assert!(
            tokio::time::Instant::now() < deadline,
            "handled {:?} of {ROWS}, {} of {duplicates} copies acknowledged",
            counted().await,
            inbox.duplicates()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop().await.expect("a clean stop");
    assert_eq!(
        counted().await,
        (i64::from(ROWS), i64::from(ROWS)),
        "every number's effect once"
    );
    assert_eq!(inbox.duplicates() as i64, duplicates);
}
