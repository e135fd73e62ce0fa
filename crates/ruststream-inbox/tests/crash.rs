//! A consumer process killed (SIGKILL) on either side of the inbox's commit, on a real
//! broker (RabbitMQ over AMQP 0-9-1, which gives a dead connection's deliveries back at
//! once): killed before the commit, the handler runs again and its writes are there
//! once; killed after the commit and before the settlement, the message comes back and
//! the inbox acknowledges it without running the handler.
//! Needs PostgreSQL (`RUSTSTREAM_POSTGRES_URL`) and RabbitMQ (`RUSTSTREAM_LAPIN_URL`,
//! default amqp://guest:guest@127.0.0.1:5672/%2f).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ruststream::layer::{Handling, Layer, Middleware, Subscribed};
use ruststream::{App, Attempt, Delivery, Mount, Outcome, ack};
use ruststream_conformance::child::Child;
use ruststream_inbox::{Inbox, InboxError, Tx};
use support::{Tables, until};

/// The child's queue and tables (`queue inbox effects when`), set by the parent.
const CHILD: &str = "RUSTSTREAM_INBOX_CRASH";

/// Holds a handled delivery after everything inside it (the inbox's commit) until the
/// process is killed, and says so.
struct HoldAfterCommit;

impl Layer for HoldAfterCommit {
    fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(HoldAfterCommit)
    }
}

impl Middleware for HoldAfterCommit {
    fn wraps(&self) -> bool {
        true
    }

    fn around(&self, _: &Delivery, handling: Handling) -> Handling {
        Box::pin(async move {
            let outcome = handling.await;
            println!("committed");
            tokio::time::sleep(Duration::from_secs(600)).await;
            outcome
        })
    }
}

/// Writes the message and its attempt in the inbox's transaction; in the child before
/// the commit, it then says so and waits to be killed.
async fn write(tx: &Tx, effects: &str, message: &str, attempt: u32) -> Result<(), InboxError> {
    ruststream_inbox::sqlx::query(&format!(
        "INSERT INTO {effects} (message, attempt) VALUES ($1, $2)"
    ))
    .bind(message)
    .bind(attempt as i32)
    .execute(&mut *tx.conn().await?)
    .await?;
    Ok(())
}

/// In the child only (the parent runs it): consumes the queue through the inbox and is
/// killed before or after the commit. Run alone, without the parent's variable, it has
/// nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_handling_through_the_inbox() {
    let Ok(given) = std::env::var(CHILD) else {
        return;
    };
    let [queue, inbox, effects, when] = given.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{CHILD}={given}");
    };
    let inbox = Inbox::with_table(support::pool().await, inbox)
        .await
        .expect("the inbox");
    let effects: Arc<str> = effects.into();
    let before = when == "before";
    let mut mount = Mount::new(queue).layer(inbox);
    if !before {
        mount = mount.layer(HoldAfterCommit);
    }
    let _running = App::new(support::rabbitmq().await)
        .mount(
            mount,
            move |tx: Tx, Attempt(attempt): Attempt, message: String| {
                let effects = effects.clone();
                async move {
                    write(&tx, &effects, &message, attempt).await?;
                    if before {
                        println!("written");
                        tokio::time::sleep(Duration::from_secs(600)).await;
                    }
                    Ok::<_, InboxError>(ack())
                }
            },
        )
        .start()
        .await
        .expect("the child starts");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Publishes one message with an id to a new queue, runs the child until it prints
/// `marker`, kills it, then handles the queue in this process through the same inbox;
/// returns the inbox, the handler's runs here and the tables.
async fn killed(when: &str, marker: &'static str) -> (Inbox, usize, Tables) {
    let tables = Tables::new(&format!("crash_{when}")).await;
    let (queue, publisher) = support::rabbitmq_queue("inbox_crash").await;
    publisher
        .message(queue.as_str(), "order 7")
        .message_id("order-7")
        .send()
        .await
        .expect("published");

    let given = format!("{queue} {} {} {when}", tables.inbox, tables.effects);
    Child::started(
        "child_handling_through_the_inbox",
        (CHILD, &given),
        marker,
        Duration::from_secs(30),
    )
    .await
    .kill();

    let inbox = tables.inbox().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let effects: Arc<str> = tables.effects.as_str().into();
    let counted = runs.clone();
    let running = App::new(support::rabbitmq().await)
        .mount(
            Mount::new(queue.as_str()).layer(inbox.clone()),
            move |tx: Tx, Attempt(attempt): Attempt, message: String| {
                let (effects, counted) = (effects.clone(), counted.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    write(&tx, &effects, &message, attempt).await?;
                    Ok::<Outcome, InboxError>(ack())
                }
            },
        )
        .start()
        .await
        .expect("starts");
    until("the message settled here", async || {
        inbox.duplicates() == 1 || runs.load(Ordering::SeqCst) == 1 && tables.recorded().await == 1
    })
    .await;
    // Nothing more comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.stop().await.expect("a clean stop");
    (inbox, runs.load(Ordering::SeqCst), tables)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_the_commit_the_handler_runs_again_and_writes_once() {
    let (inbox, runs, tables) = killed("before", "written").await;
    assert_eq!(runs, 1, "the delivery came back and was handled here");
    assert_eq!(inbox.duplicates(), 0);
    assert_eq!(
        tables.effects().await,
        [("order 7".to_owned(), 2)],
        "the killed process's write is not there, this one's is"
    );
    assert_eq!(tables.recorded().await, 1);
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_commit_the_message_is_acknowledged_without_a_run() {
    let (inbox, runs, tables) = killed("after", "committed").await;
    assert_eq!(runs, 0, "the handler did not run again");
    assert_eq!(inbox.duplicates(), 1, "the inbox acknowledged the delivery");
    assert_eq!(tables.effects().await, [("order 7".to_owned(), 1)]);
    assert_eq!(tables.recorded().await, 1);
    tables.drop_all().await;
}
