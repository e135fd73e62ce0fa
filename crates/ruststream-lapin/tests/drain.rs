//! A graceful stop spends no attempt: a subscription that is asked to drain cancels its
//! consumer, yields what RabbitMQ had already handed over and ends; those deliveries
//! settle as usual, and what stayed in the queue was never counted. A subscription
//! dropped without a drain gives back only after its consumer is cancelled. And a
//! service stopped three times (`Running::stop`) with messages prefetched handles every
//! message at attempt 1.

mod support;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use ruststream::{App, Attempt, Mount, ack};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{DEFAULT_COUNTED_PREFETCH, SubscribeOptions};
use support::{QueueSpec, Rabbit, broker, declare, next, unique, waiting};

const MESSAGES: usize = 20;
/// The prefetch the adapter-level drain tests pin (the default on their quorum queue,
/// [`DEFAULT_COUNTED_PREFETCH`], is more than the queue holds).
const PREFETCH: usize = 8;
/// More than three default prefetches of the quorum queue
/// ([`DEFAULT_COUNTED_PREFETCH`]), for a default mount.
const APP_MESSAGES: usize = 3 * DEFAULT_COUNTED_PREFETCH as usize + 100;

/// A quorum queue made with default arguments holding `MESSAGES` messages.
async fn filled(rabbit: Rabbit, name: &str) -> String {
    let queue = unique(name);
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let broker = broker(rabbit).await;
    let publisher = broker.publisher();
    for i in 0..MESSAGES {
        publisher
            .publish(queue.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("sent");
    }
    broker.close().await;
    queue
}

fn spec(queue: &str) -> SubscribeSpec {
    let mut spec = SubscribeSpec::new(queue);
    spec.in_flight = PREFETCH;
    spec.options
        .insert(SubscribeOptions::new().prefetch(PREFETCH as u16));
    spec
}

/// Every message left in `queue` comes at attempt 1, with no `x-delivery-count`.
async fn all_first_attempts(rabbit: Rabbit, queue: &str, left: usize) {
    let broker = broker(rabbit).await;
    let mut sub = broker.subscribe(spec(queue)).await.expect("subscribe");
    for _ in 0..left {
        let d = next(&mut sub).await;
        assert_eq!(
            (d.broker_attempt(), d.headers().get_str("x-delivery-count")),
            (Some(1), None),
            "{rabbit:?}: a message came back counted"
        );
        d.settle(Settlement::Accept).await.expect("acked");
    }
    broker.close().await;
    assert_eq!(waiting(rabbit, queue).await, 0, "{rabbit:?}");
}

async fn a_drain_ends_the_stream_after_the_prefetched(rabbit: Rabbit) {
    let queue = filled(rabbit, "drain").await;
    let broker = broker(rabbit).await;
    let spec = spec(&queue);
    let drain = spec.drain.clone();
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    assert!(drain.is_accepted(), "{rabbit:?}: the subscription drains");
    let mut held = vec![next(&mut sub).await];
    // The rest of the prefetch arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drain.request();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = sub.deliveries.next().await {
            held.push(item.expect("a delivery, not an error"));
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "{rabbit:?}: the stream did not end after the drain"
    );
    assert_eq!(
        held.len(),
        PREFETCH,
        "{rabbit:?}: every prefetched delivery yielded"
    );
    for d in held {
        assert_eq!(d.broker_attempt(), Some(1));
        d.settle(Settlement::Accept)
            .await
            .expect("settles after the drain");
    }
    broker.close().await;
    assert_eq!(waiting(rabbit, &queue).await as usize, MESSAGES - PREFETCH);
    all_first_attempts(rabbit, &queue, MESSAGES - PREFETCH).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_the_stream_after_the_prefetched_prefetch_8_3() {
    a_drain_ends_the_stream_after_the_prefetched(Rabbit::V3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_the_stream_after_the_prefetched_prefetch_8_4() {
    a_drain_ends_the_stream_after_the_prefetched(Rabbit::V4).await;
}

/// Dropping a subscription (no drain) with deliveries in its stream: they go back once
/// the consumer is cancelled, so none is handed straight back to it and counted twice.
async fn a_dropped_subscription_gives_back_after_cancelling(rabbit: Rabbit) -> Vec<u32> {
    let queue = filled(rabbit, "dropped").await;
    let broker = broker(rabbit).await;
    let mut sub = broker.subscribe(spec(&queue)).await.expect("subscribe");
    let first = next(&mut sub).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(sub);
    drop(first);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut sub = broker.subscribe(spec(&queue)).await.expect("subscribe");
    let mut attempts = Vec::new();
    for _ in 0..MESSAGES {
        let d = next(&mut sub).await;
        attempts.push(d.broker_attempt().unwrap_or(0));
        d.settle(Settlement::Accept).await.expect("acked");
    }
    broker.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
    attempts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_subscription_gives_back_after_cancelling_prefetch_8_3() {
    counted_once(a_dropped_subscription_gives_back_after_cancelling(Rabbit::V3).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_subscription_gives_back_after_cancelling_prefetch_8_4() {
    counted_once(a_dropped_subscription_gives_back_after_cancelling(Rabbit::V4).await);
}

/// Only what the consumer held came back counted, and once: both brokers count a
/// delivery the closing channel returns.
fn counted_once(attempts: Vec<u32>) {
    let counted = attempts.iter().filter(|&&a| a > 1).count();
    assert!(
        counted <= PREFETCH && attempts.iter().all(|&a| (1..=2).contains(&a)),
        "{attempts:?}"
    );
}

/// Runs a service with a default mount on `queue` until it handled `handled` messages
/// (each takes 5 ms, so the prefetch is full), then stops it; returns the attempts seen.
async fn run_and_stop(rabbit: Rabbit, queue: &str, handled: usize) -> Vec<u32> {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let sink = seen.clone();
    let app = App::new(broker(rabbit).await).mount(
        Mount::new(queue),
        move |Attempt(attempt): Attempt, _: String| {
            let sink = sink.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(attempt);
                ack()
            }
        },
    );
    let running = app.start().await.expect("starts");
    let count = || seen.lock().unwrap_or_else(PoisonError::into_inner).len();
    assert!(
        support::until(Duration::from_secs(20), || count() >= handled).await,
        "{rabbit:?}: {} of {handled} handled",
        count()
    );
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("stops within 30 s")
        .expect("a clean stop");
    seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

async fn three_graceful_stops_spend_no_attempt(rabbit: Rabbit) {
    let queue = unique("stops");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let publisher = broker(rabbit).await;
    for i in 0..APP_MESSAGES {
        publisher
            .publisher()
            .publish(queue.as_str().into(), Message::new(format!("\"m{i}\"")))
            .await
            .expect("sent");
    }
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let run = run_and_stop(rabbit, &queue, 2).await;
        attempts.extend(run);
    }
    let left = waiting(rabbit, &queue).await as usize;
    assert_eq!(
        left + attempts.len(),
        APP_MESSAGES,
        "{rabbit:?}: each handled once"
    );
    attempts.extend(run_and_stop(rabbit, &queue, left).await);
    publisher.close().await;
    // RabbitMQ (3.10 and 4) can send a quorum queue's delivery after cancel-ok (seen
    // without the drain's gate: one or two a stop on 3.10, under load); lapin drops a
    // delivery for a consumer it no longer has, and the channel's close would return it
    // counted. The drain closes the prefetch window first, so none may be in flight.
    assert!(
        attempts.iter().all(|&a| a == 1),
        "{rabbit:?}: a clean stop spent attempts: {attempts:?}"
    );
    assert_eq!(attempts.len(), APP_MESSAGES, "{rabbit:?}: {attempts:?}");
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_graceful_stops_spend_no_attempt_3() {
    three_graceful_stops_spend_no_attempt(Rabbit::V3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_graceful_stops_spend_no_attempt_4() {
    three_graceful_stops_spend_no_attempt(Rabbit::V4).await;
}
