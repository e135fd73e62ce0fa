//! Claims and leases against a real PostgreSQL: a dead consumer's rows go to another
//! consumer once the lease runs out (attempt + 1), a long handler keeps its row, a
//! `RequeueAfter` outlives the consumer process, and `LISTEN` wakes a consumer at once.

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_core::{Broker, Delivery, DeliveryStream, Message, Settlement, SubscribeSpec};
use ruststream_postgres::PostgresBroker;

async fn subscribe(broker: &PostgresBroker, queue: &str) -> DeliveryStream {
    let mut spec = SubscribeSpec::new(queue);
    spec.in_flight = 4;
    broker.subscribe(spec).await.expect("subscribed").deliveries
}

async fn next(stream: &mut DeliveryStream, within: Duration) -> Option<Delivery> {
    match tokio::time::timeout(within, stream.next()).await {
        Ok(Some(Ok(delivery))) => Some(delivery),
        Ok(Some(Err(error))) => panic!("consume error: {error}"),
        Ok(None) | Err(_) => None,
    }
}

async fn publish(broker: &PostgresBroker, queue: &str, payload: &'static str) {
    broker
        .publisher()
        .publish(queue.into(), Message::new(payload))
        .await
        .expect("published");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_consumers_row_goes_to_another_once_its_lease_runs_out() {
    let schema = support::unique_schema("expiry");
    let first = support::broker(&schema, "&lease=1s").await;
    let mut stream = subscribe(&first, "jobs").await;
    publish(&first, "jobs", "work").await;
    let taken = next(&mut stream, Duration::from_secs(5))
        .await
        .expect("first claim");
    assert_eq!(taken.broker_attempt(), Some(1));
    // The consumer dies holding it: no settlement, no give-back, no lease extension.
    std::mem::forget(taken);
    first.close().await;
    let died = Instant::now();

    let second = support::broker(&schema, "&lease=1s").await;
    let mut stream = subscribe(&second, "jobs").await;
    let again = next(&mut stream, Duration::from_secs(5))
        .await
        .expect("claimed again");
    assert_eq!(again.payload().as_ref(), b"work");
    assert_eq!(
        again.broker_attempt(),
        Some(2),
        "the crash counts as an attempt"
    );
    assert!(
        died.elapsed() >= Duration::from_millis(500),
        "not before the lease ran out"
    );
    again.settle(Settlement::Accept).await.expect("accepted");
    second.close().await;
    support::drop_schema(&schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_handler_keeps_its_row_while_its_lease_is_extended() {
    let schema = support::unique_schema("extend");
    let first = support::broker(&schema, "&lease=1s").await;
    let second = support::broker(&schema, "&lease=1s").await;
    let mut held = subscribe(&first, "jobs").await;
    publish(&first, "jobs", "slow").await;
    let taken = next(&mut held, Duration::from_secs(5))
        .await
        .expect("claimed");
    let mut other = subscribe(&second, "jobs").await;
    // Three leases long: without extension the other consumer would have it.
    assert!(
        next(&mut other, Duration::from_secs(3)).await.is_none(),
        "taken while held"
    );
    taken.settle(Settlement::Accept).await.expect("accepted");
    assert!(
        next(&mut other, Duration::from_millis(1500))
            .await
            .is_none()
    );
    first.close().await;
    second.close().await;
    support::drop_schema(&schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_outlives_the_consumer_process() {
    let schema = support::unique_schema("delay");
    let first = support::broker(&schema, "").await;
    let mut stream = subscribe(&first, "jobs").await;
    publish(&first, "jobs", "later").await;
    let taken = next(&mut stream, Duration::from_secs(5))
        .await
        .expect("claimed");
    let settled = Instant::now();
    taken
        .settle(Settlement::RequeueAfter(Duration::from_secs(3)))
        .await
        .expect("requeued");
    first.close().await;

    // The row waits in the table with its visibility in the future.
    let second = support::broker(&schema, "").await;
    let waiting: bool = sqlx::query_scalar(&format!(
        "SELECT visible_at > now() + interval '1 second' FROM {schema}.ruststream_messages"
    ))
    .fetch_one(second.pool())
    .await
    .expect("the row");
    assert!(waiting, "visible_at in the future");
    let mut stream = subscribe(&second, "jobs").await;
    let again = next(&mut stream, Duration::from_secs(8))
        .await
        .expect("after the delay");
    assert!(
        settled.elapsed() >= Duration::from_millis(2900),
        "{:?}",
        settled.elapsed()
    );
    assert_eq!(again.broker_attempt(), Some(2));
    again.settle(Settlement::Accept).await.expect("accepted");
    second.close().await;
    support::drop_schema(&schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_wakes_a_consumer_without_polling() {
    let schema = support::unique_schema("listen");
    // A poll far longer than the test: only a notification can wake it in time.
    let broker = support::broker(&schema, "&poll=60s").await;
    let mut stream = subscribe(&broker, "jobs").await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sent = Instant::now();
        publish(&broker, "jobs", "now").await;
        let delivery = next(&mut stream, Duration::from_secs(2))
            .await
            .expect("woken");
        let latency = sent.elapsed();
        assert!(latency < Duration::from_millis(500), "latency {latency:?}");
        delivery.settle(Settlement::Accept).await.expect("accepted");
    }
    broker.close().await;
    support::drop_schema(&schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeued_row_comes_back_at_once_and_counts() {
    let schema = support::unique_schema("requeue");
    let broker = support::broker(&schema, "&poll=60s").await;
    let mut stream = subscribe(&broker, "jobs").await;
    publish(&broker, "jobs", "again").await;
    for attempt in 1..=3 {
        let delivery = next(&mut stream, Duration::from_secs(2))
            .await
            .expect("delivered");
        assert_eq!(delivery.broker_attempt(), Some(attempt));
        delivery
            .settle(Settlement::Requeue)
            .await
            .expect("requeued");
    }
    let last = next(&mut stream, Duration::from_secs(2))
        .await
        .expect("delivered");
    drop(last); // abandoned: given back now, the attempt already counted
    let back = next(&mut stream, Duration::from_secs(2))
        .await
        .expect("given back");
    assert_eq!(back.broker_attempt(), Some(5));
    back.settle(Settlement::Remove).await.expect("removed");
    assert!(
        next(&mut stream, Duration::from_millis(500))
            .await
            .is_none()
    );
    broker.close().await;
    support::drop_schema(&schema);
}

/// A subscription claims at most [`ruststream_postgres::AHEAD`] rows ahead of its
/// handlers, however many settlements may trail behind them
/// ([`ruststream_postgres::TRAILING`], shared by `n` workers, so that one commit deletes
/// many rows rather than one per worker): with two workers whose handlers wait, the
/// other rows stay for other consumers.
/// Before, `workers(2)` held 2 rows (and each commit deleted at most 2); counting the
/// trailing settlements as rows to claim, it would hold every row of the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_claim_a_bounded_number_of_rows_ahead_of_their_handlers() {
    use std::sync::Arc;

    use ruststream::{App, Mount, State, ack};
    use tokio::sync::Semaphore;

    let schema = support::unique_schema("workers");
    let broker = support::broker(&schema, "").await;
    for _ in 0..200 {
        publish(&broker, "jobs", "work").await;
    }
    let go = Arc::new(Semaphore::new(0));
    let running = App::new(broker.clone())
        .state(go.clone())
        .mount(
            Mount::new("jobs").workers(2),
            |State(go): State<Arc<Semaphore>>| async move {
                let _held = go.acquire().await;
                ack()
            },
        )
        .start()
        .await
        .expect("started");
    let pool = sqlx::PgPool::connect(&support::url())
        .await
        .unwrap_or_else(|e| panic!("{}", support::missing(&e)));
    let leased = format!("SELECT count(*) FROM {schema}.ruststream_messages WHERE leased");
    // One claim of AHEAD rows: 2 in the handlers and the rest waiting for them; the next
    // claim waits for room for half as many.
    let expected = ruststream_postgres::AHEAD as i64;
    let started = Instant::now();
    let mut held = 0;
    while started.elapsed() < Duration::from_secs(10) {
        held = sqlx::query_scalar::<_, i64>(&leased)
            .fetch_one(&pool)
            .await
            .expect("counted");
        if held == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(held, expected, "rows claimed for two workers");
    go.add_permits(1000);
    running.stop().await.expect("stopped");
    let still = sqlx::query_scalar::<_, i64>(&leased)
        .fetch_one(&pool)
        .await
        .expect("counted");
    assert_eq!(
        still, 0,
        "a clean stop handles or gives back every row it claimed"
    );
    broker.close().await;
    support::drop_schema(&schema);
}
