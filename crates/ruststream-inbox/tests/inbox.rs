//! The inbox on the in-memory broker: a message is handled once however often it comes,
//! the handler's writes commit with the record on `ack()` only, and rows are swept.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::{App, Attempt, Mount, Outcome, Running, State, ack, retry};
use ruststream_inbox::{Inbox, InboxError, Tx};
use support::{Tables, until};

/// What the handlers share: the effects table and how often they ran.
#[derive(Clone)]
struct Shared {
    effects: Arc<str>,
    runs: Arc<AtomicUsize>,
    /// The outcome of attempt 1 (later attempts ack).
    first: fn() -> Outcome,
    /// How long a handler takes before it writes.
    takes: Duration,
}

impl Shared {
    fn new(tables: &Tables, first: fn() -> Outcome) -> Self {
        Self {
            effects: tables.effects.as_str().into(),
            runs: Arc::default(),
            first,
            takes: Duration::ZERO,
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

/// Writes `(message, attempt)` to the effects table in the inbox's transaction, then
/// settles attempt 1 as `first` says and later attempts with `ack()`.
async fn writes(
    State(shared): State<Shared>,
    Attempt(attempt): Attempt,
    tx: Tx,
    message: String,
) -> Result<Outcome, InboxError> {
    shared.runs.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(shared.takes).await;
    let mut conn = tx.conn().await?;
    ruststream_inbox::sqlx::query(&format!(
        "INSERT INTO {} (message, attempt) VALUES ($1, $2)",
        shared.effects
    ))
    .bind(&message)
    .bind(attempt as i32)
    .execute(&mut *conn)
    .await?;
    Ok(if attempt == 1 {
        (shared.first)()
    } else {
        ack()
    })
}

async fn start(broker: &MemoryBroker, mount: Mount, shared: &Shared) -> Running {
    App::new(broker.clone())
        .state(shared.clone())
        .mount(mount, writes)
        .start()
        .await
        .expect("starts")
}

async fn publish(running: &Running, id: &str, body: &str) {
    running
        .publisher()
        .message("orders", body)
        .message_id(id.to_owned())
        .send()
        .await
        .expect("published");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_delivered_twice_is_handled_once() {
    let tables = Tables::new("twice").await;
    let inbox = tables.inbox().await;
    let shared = Shared::new(&tables, ack);
    let broker = MemoryBroker::new();
    let running = start(&broker, Mount::new("orders").layer(inbox.clone()), &shared).await;
    publish(&running, "m-1", "first").await;
    until("the first copy handled", async || {
        tables.recorded().await == 1
    })
    .await;
    publish(&running, "m-1", "second copy").await;
    publish(&running, "m-2", "another").await;
    until("the other message handled", async || {
        tables.recorded().await == 2
    })
    .await;
    until("the copy acknowledged", async || inbox.duplicates() == 1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(shared.runs(), 2, "the copy ran no handler");
    assert_eq!(
        tables.effects().await,
        [("another".to_owned(), 1), ("first".to_owned(), 1)]
    );
    assert!(broker.is_idle(), "everything settled");
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_rolls_back_the_handlers_writes() {
    let tables = Tables::new("retry").await;
    let shared = Shared::new(&tables, retry);
    let broker = MemoryBroker::new();
    let mount = Mount::new("orders")
        .max_attempts(3)
        .layer(tables.inbox().await);
    let running = start(&broker, mount, &shared).await;
    publish(&running, "m-1", "order").await;
    until("attempt 2 committed", async || tables.recorded().await == 1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(shared.runs(), 2);
    assert_eq!(
        tables.effects().await,
        [("order".to_owned(), 2)],
        "attempt 1's write rolled back with its retry"
    );
    tables.drop_all().await;
}

fn panics() -> Outcome {
    panic!("the handler fails after its write")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_rolls_back_the_handlers_writes() {
    let tables = Tables::new("panic").await;
    let shared = Shared::new(&tables, panics);
    let broker = MemoryBroker::new();
    let mount = Mount::new("orders")
        .max_attempts(3)
        .on_panic(ruststream::Policy::Retry)
        .layer(tables.inbox().await);
    let running = start(&broker, mount, &shared).await;
    publish(&running, "m-1", "order").await;
    until("attempt 2 committed", async || tables.recorded().await == 1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(tables.effects().await, [("order".to_owned(), 2)]);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_handled_at_once_with_workers_run_the_handler_once() {
    let tables = Tables::new("concurrent").await;
    let inbox = tables.inbox().await;
    let mut shared = Shared::new(&tables, ack);
    shared.takes = Duration::from_millis(300);
    let broker = MemoryBroker::new();
    let mount = Mount::new("orders").workers(4).layer(inbox.clone());
    let running = start(&broker, mount, &shared).await;
    for _ in 0..4 {
        publish(&running, "m-1", "order").await;
    }
    until("the copies acknowledged", async || inbox.duplicates() == 3).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(
        shared.runs(),
        1,
        "the copies waited for the first and ran nothing"
    );
    assert_eq!(tables.effects().await, [("order".to_owned(), 1)]);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_without_tx_is_deduplicated_too() {
    let tables = Tables::new("plain").await;
    let inbox = tables.inbox().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let broker = MemoryBroker::new();
    let running = App::new(broker.clone())
        .mount(
            Mount::new("orders").layer(inbox.clone()),
            move |_: String| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        )
        .start()
        .await
        .expect("starts");
    publish(&running, "m-1", "order").await;
    publish(&running, "m-1", "order").await;
    until("the copy acknowledged", async || inbox.duplicates() == 1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_on_a_mount_without_the_inbox_says_so() {
    let (said, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let broker = MemoryBroker::new();
    let running = App::new(broker.clone())
        .mount(Mount::new("orders"), move |tx: Tx, _: String| {
            let said = said.clone();
            async move {
                let error = tx.conn().await.err().map(|e| e.to_string());
                let _ = said.send(error);
            }
        })
        .start()
        .await
        .expect("starts");
    publish(&running, "m-1", "order").await;
    let error = tokio::time::timeout(Duration::from_secs(10), heard.recv())
        .await
        .expect("handled")
        .expect("an answer");
    running.stop().await.expect("a clean stop");
    let error = error.expect("an error, not a transaction");
    assert!(error.contains("add the Inbox layer"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_an_id_is_handled_each_time_unless_keyed() {
    let tables = Tables::new("noid").await;
    let shared = Shared::new(&tables, ack);
    let broker = MemoryBroker::new();
    let plain = start(
        &broker,
        Mount::new("orders").layer(tables.inbox().await),
        &shared,
    )
    .await;
    for _ in 0..2 {
        plain
            .publisher()
            .publish("orders", "no id")
            .await
            .expect("sent");
    }
    until("both handled", async || tables.effects().await.len() == 2).await;
    plain.stop().await.expect("a clean stop");
    assert_eq!(tables.recorded().await, 0, "nothing to recognise them by");

    // A key from the payload recognises them.
    let keyed = tables
        .inbox()
        .await
        .key(|d| Some(String::from_utf8_lossy(d.payload()).into_owned()));
    let running = start(&broker, Mount::new("orders").layer(keyed.clone()), &shared).await;
    for _ in 0..2 {
        running
            .publisher()
            .publish("orders", "keyed")
            .await
            .expect("sent");
    }
    until("the copy acknowledged", async || keyed.duplicates() == 1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(tables.effects().await.len(), 3);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_past_the_retention_are_swept() {
    let tables = Tables::new("sweep").await;
    let inbox = tables.inbox().await.retention(Duration::from_secs(3600));
    support::sqlx_exec(
        &tables.pool,
        &format!(
            "INSERT INTO {} (subscription, message_id, handled_at) VALUES \
             ('orders', 'old', now() - interval '2 hours'), ('orders', 'new', now())",
            tables.inbox
        ),
    )
    .await;
    assert_eq!(inbox.sweep().await.expect("swept"), 1);
    assert_eq!(tables.recorded().await, 1, "the recent row stays");
    tables.drop_all().await;
}

#[tokio::test]
async fn a_bad_table_name_is_refused_before_any_query() {
    let pool = support::pool().await;
    for bad in ["x; DROP TABLE y", "a.b.c", "", "1x"] {
        let error = Inbox::with_table(pool.clone(), bad)
            .await
            .expect_err("refused");
        assert!(matches!(error, InboxError::BadTable(_)), "{bad}: {error}");
    }
}

#[tokio::test]
async fn inboxes_made_at_once_on_one_table_all_start() {
    let tables = Tables::new("migrate").await;
    let made = futures_join(&tables).await;
    assert!(made.iter().all(Result::is_ok), "{made:?}");
    tables.drop_all().await;
}

async fn futures_join(tables: &Tables) -> Vec<Result<Inbox, InboxError>> {
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (pool, table) = (tables.pool.clone(), tables.inbox.clone());
            tokio::spawn(async move { Inbox::with_table(pool, &table).await })
        })
        .collect();
    let mut made = Vec::new();
    for task in tasks {
        made.push(task.await.expect("no panic"));
    }
    made
}

/// A `Tx` taken on a mount without the inbox never gets the transaction of a delivery
/// the inbox wraps next on the same thread (one thread: every call on it).
#[tokio::test(flavor = "current_thread")]
async fn a_stray_tx_never_gets_another_deliverys_transaction() {
    let tables = Tables::new("stray").await;
    let (said, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let broker = MemoryBroker::new();
    let running = App::new(broker.clone())
        .mount(Mount::new("stray"), move |tx: Tx, _: String| {
            let said = said.clone();
            async move {
                // The inbox mount's delivery is handled meanwhile.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = said.send(tx.conn().await.is_ok());
            }
        })
        .mount(
            Mount::new("orders").layer(tables.inbox().await),
            |_: String| async { tokio::time::sleep(Duration::from_millis(600)).await },
        )
        .start()
        .await
        .expect("starts");
    publish_to(&running, "stray", "s-1").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    publish_to(&running, "orders", "m-1").await;
    let got = tokio::time::timeout(Duration::from_secs(10), heard.recv())
        .await
        .expect("handled")
        .expect("an answer");
    running.stop().await.expect("a clean stop");
    assert!(!got, "the stray Tx got the inbox's transaction");
    tables.drop_all().await;
}

async fn publish_to(running: &Running, to: &str, id: &str) {
    running
        .publisher()
        .message(to, "x")
        .message_id(id.to_owned())
        .send()
        .await
        .expect("published");
}

/// A message without an id, on a mount whose handler takes no `Tx`: the inbox has
/// nothing to record and nothing to commit, so it opens no transaction (here the pool's
/// one connection is held elsewhere, and the handler still runs at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_id_and_no_tx_takes_no_connection() {
    let tables = Tables::new("noconn").await;
    let pool = ruststream_inbox::sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&support::url())
        .await
        .expect("a pool of one");
    let inbox = Inbox::with_table(pool.clone(), &tables.inbox)
        .await
        .expect("the inbox");
    let held = pool.acquire().await.expect("the one connection");
    let (said, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let running = App::new(MemoryBroker::new())
        .mount(Mount::new("orders").layer(inbox), move |_: String| {
            let said = said.clone();
            async move {
                let _ = said.send(());
            }
        })
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish("orders", "no id")
        .await
        .expect("sent");
    tokio::time::timeout(Duration::from_secs(2), heard.recv())
        .await
        .expect("handled without waiting for a connection")
        .expect("running");
    drop(held);
    running.stop().await.expect("a clean stop");
    tables.drop_all().await;
}
