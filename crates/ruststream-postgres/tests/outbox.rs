//! The transactional outbox against a real PostgreSQL, relayed to the memory broker:
//! a rollback publishes nothing, a commit publishes once, per-key order holds through a
//! failing destination, and two relays share the rows.
//! Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream_core::{Broker, CONTENT_TYPE, Publish};
use support::recording::{self, Recording};

use support::outbox;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_transaction_publishes_nothing() {
    let (db, outbox, _drop) = outbox("ob_rollback").await;
    let memory = MemoryBroker::new();
    let mut tx = db.pool().begin().await.expect("begin");
    outbox
        .publish(&mut *tx, "orders", &serde_json::json!({"id": 1}))
        .await
        .expect("written");
    tx.rollback().await.expect("rolled back");
    let relay = outbox.relay(db.pool().clone());
    assert_eq!(
        relay
            .relay_once(&*memory.publisher())
            .await
            .expect("a round"),
        0
    );
    assert_eq!(memory.ready("orders"), 0);
    assert_eq!(outbox.depth(db.pool()).await.expect("depth").rows, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_publishes_once_woken_by_its_notification() {
    let (db, outbox, _drop) = outbox("ob_commit").await;
    let table = format!("{}.orders", outbox.schema());
    sqlx::query(&format!("CREATE TABLE {table} (id int PRIMARY KEY)"))
        .execute(db.pool())
        .await
        .expect("the service's own table");
    let memory = MemoryBroker::new();
    // A minute's poll: only the insert's notification can wake the relay in time.
    let relay = outbox
        .relay(db.pool().clone())
        .poll(Duration::from_secs(60))
        .spawn(memory.publisher());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut tx = db.pool().begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {table} VALUES (7)"))
        .execute(&mut *tx)
        .await
        .expect("the service's own write");
    outbox
        .publish(&mut *tx, "orders", &serde_json::json!({"id": 7}))
        .await
        .expect("written");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(memory.ready("orders"), 0, "nothing before the commit");
    tx.commit().await.expect("committed");

    let arrived = support::eventually(Duration::from_secs(5), || memory.ready("orders") == 1).await;
    assert!(arrived, "the notification woke the relay");
    tokio::time::sleep(Duration::from_millis(500)).await;
    relay.stop().await;
    let messages = memory.messages("orders");
    assert_eq!(messages.len(), 1, "exactly once");
    assert_eq!(messages[0].payload.as_ref(), br#"{"id":7}"#);
    assert_eq!(
        messages[0].headers.get(CONTENT_TYPE).map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let depth = outbox.depth(db.pool()).await.expect("depth");
    assert_eq!((depth.rows, depth.oldest), (0, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_order_holds_and_a_failing_row_blocks_its_key_only() {
    let (db, outbox, _drop) = outbox("ob_order").await;
    let mut tx = db.pool().begin().await.expect("begin");
    for n in 0..5 {
        for key in ["a", "b"] {
            outbox
                .message("events", &format!("{key}{n}"))
                .key(key)
                .insert(&mut *tx)
                .await
                .expect("keyed");
        }
        outbox
            .publish(&mut *tx, "events", &format!("u{n}"))
            .await
            .expect("unkeyed");
    }
    tx.commit().await.expect("committed");
    let memory = MemoryBroker::new();
    let log = recording::Log::default();
    let failing: Arc<dyn Publish> =
        Arc::new(Recording::new(memory.publisher(), log.clone(), 0).failing("a0", 3));
    let relay = outbox
        .relay(db.pool().clone())
        .retry(Duration::from_millis(50), Duration::from_millis(200));

    // The first round: `a0` fails, which holds back a1…a4 and nothing else.
    assert_eq!(relay.relay_once(&*failing).await.expect("a round"), 10);
    let published = recording::payloads(&log);
    assert!(published.iter().all(|p| !p.contains('a')), "{published:?}");
    let (attempts, error): (i32, Option<String>) = sqlx::query_as(&format!(
        "SELECT attempts, last_error FROM {} ORDER BY id LIMIT 1",
        outbox.table()
    ))
    .fetch_one(db.pool())
    .await
    .expect("the failed row");
    assert_eq!(attempts, 1);
    assert!(error.is_some_and(|e| e.contains("the destination is down")));
    let depth = outbox.depth(db.pool()).await.expect("depth");
    assert_eq!((depth.rows, depth.failing), (5, 1));

    let handle = relay.spawn(failing);
    let done = support::eventually(Duration::from_secs(10), || {
        recording::payloads(&log).len() == 15
    });
    assert!(
        done.await,
        "every row published: {:?}",
        recording::payloads(&log)
    );
    handle.stop().await;
    let published = recording::payloads(&log);
    for key in ["a", "b", "u"] {
        let of_key: Vec<_> = published
            .iter()
            .filter(|p| p.contains(key))
            .cloned()
            .collect();
        let expected: Vec<_> = (0..5).map(|n| format!("\"{key}{n}\"")).collect();
        assert_eq!(of_key, expected, "{key} in order, each once");
    }
    assert_eq!(memory.ready("events"), 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_share_the_rows_and_publish_each_once() {
    let (db, outbox, _drop) = outbox("ob_share").await;
    let mut tx = db.pool().begin().await.expect("begin");
    for n in 0..300_u32 {
        let entry = outbox.message("shared", &n);
        let entry = if n.is_multiple_of(3) {
            entry
        } else {
            entry.key(format!("k{}", n % 7))
        };
        entry.insert(&mut *tx).await.expect("written");
    }
    tx.commit().await.expect("committed");
    let memory = MemoryBroker::new();
    let log = recording::Log::default();
    let relays: Vec<_> = (1..=2)
        .map(|relay| {
            let publisher = Recording::new(memory.publisher(), log.clone(), relay)
                .delay(Duration::from_millis(2));
            outbox
                .relay(db.pool().clone())
                .batch(10)
                .spawn(Arc::new(publisher))
        })
        .collect();
    let done = support::eventually(Duration::from_secs(30), || memory.ready("shared") >= 300);
    assert!(done.await, "published: {}", memory.ready("shared"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for relay in relays {
        relay.stop().await;
    }
    let log = log.lock().expect("the log").clone();
    let mut times: BTreeMap<u32, usize> = BTreeMap::new();
    let mut by_relay = [0, 0];
    for (relay, payload) in &log {
        *times.entry(payload.parse().expect("a number")).or_default() += 1;
        by_relay[relay - 1] += 1;
    }
    assert_eq!(times.len(), 300, "every row");
    assert!(times.values().all(|&n| n == 1), "none twice");
    assert!(
        by_relay.iter().all(|&n| n > 0),
        "both relays worked: {by_relay:?}"
    );
    // Per key, in the order written, whichever relay published.
    for key in 0..7 {
        let of_key: Vec<u32> = log
            .iter()
            .map(|(_, p)| p.parse().expect("a number"))
            .filter(|n: &u32| !n.is_multiple_of(3) && n % 7 == key)
            .collect();
        assert!(of_key.windows(2).all(|w| w[0] < w[1]), "k{key}: {of_key:?}");
    }
    assert_eq!(outbox.depth(db.pool()).await.expect("depth").rows, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_finishes_the_batch_in_hand() {
    let (db, outbox, _drop) = outbox("ob_stop").await;
    let mut tx = db.pool().begin().await.expect("begin");
    for n in 0..20 {
        let entry = outbox.message("slow", &n).key("one");
        entry.insert(&mut *tx).await.expect("written");
    }
    tx.commit().await.expect("committed");
    let memory = MemoryBroker::new();
    let log = recording::Log::default();
    let slow = Recording::new(memory.publisher(), log.clone(), 0).delay(Duration::from_millis(40));
    let relay = outbox
        .relay(db.pool().clone())
        .batch(10)
        .spawn(Arc::new(slow));
    let started = support::eventually(Duration::from_secs(5), || {
        !recording::payloads(&log).is_empty()
    });
    assert!(started.await, "the relay started publishing");
    relay.stop().await;
    // The batch in hand (one key: ten rows one after the other) was published and
    // deleted; the next batch was never claimed.
    assert_eq!(memory.ready("slow"), 10);
    assert_eq!(outbox.depth(db.pool()).await.expect("depth").rows, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_outlives_its_connections_being_terminated() {
    let (db, outbox, _drop) = outbox("ob_cut").await;
    // The relay's connections carry the schema as their name, so they can be found and cut.
    let relay_db = support::broker(
        outbox.schema(),
        &format!("&application_name={}", outbox.schema()),
    )
    .await;
    let memory = MemoryBroker::new();
    let relay = outbox
        .relay(relay_db.pool().clone())
        .poll(Duration::from_secs(60))
        .spawn(memory.publisher());
    outbox.publish(db.pool(), "cut", &1).await.expect("written");
    let first = support::eventually(Duration::from_secs(5), || memory.ready("cut") == 1);
    assert!(first.await, "relayed before the cut");

    support::terminate_connections(db.pool(), outbox.schema()).await;

    outbox.publish(db.pool(), "cut", &2).await.expect("written");
    let second = support::eventually(Duration::from_secs(5), || memory.ready("cut") == 2);
    assert!(second.await, "woken after the cut, well before its poll");
    relay.stop().await;
    relay_db.close().await;
}
