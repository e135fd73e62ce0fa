//! A handler that always returns `retry()`, under `max_attempts(3)` and a dead letter,
//! with **default** options, through the runtime: it runs exactly three times and the
//! dead letter gets the message, whatever kind of queue. Needs RabbitMQ 4
//! (`scripts/rabbitmq4.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ruststream::{App, Attempt, Mount, Outcome, retry};
use ruststream_amqp::{QueueType, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Message};
use support::*;

fn topology(q: &mut Queues) {
    q.classic("classic");
    q.classic("classic-dead");
    q.quorum("quorum");
    q.classic("quorum-dead");
    // x-delivery-limit 2 = max_attempts(3) − 1: the broker dead-letters the third failure.
    q.quorum_with_dlx("selfdl", Some(2));
    q.classic("declared-dead");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Runs an always-`retry()` app on `queue` (capped at 3, dead letter `dead`, `mount`
/// options as given), publishes one message, and returns how often the handler ran
/// once the dead letter has it.
async fn always_retry(queue: &str, dead: &str, mount: impl FnOnce(Mount) -> Mount) -> u32 {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let handler = move |Attempt(_): Attempt, _n: u32| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            let out: Outcome = retry();
            out
        }
    };
    let app = App::new(broker().await)
        .mount(
            mount(Mount::new(queue).max_attempts(3).dead_letter(dead)),
            handler,
        )
        .start()
        .await
        .expect("start");
    let publisher = broker().await;
    publisher
        .publisher()
        .publish(queue.into(), Message::new("1"))
        .await
        .expect("publish");
    let mut dead_sub = subscribe(
        &publisher,
        spec(dead, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut dead_sub, 30).await;
    assert_eq!(
        d.payload().as_ref(),
        b"1",
        "the dead letter holds the message"
    );
    d.settle(ruststream_core::Settlement::Accept)
        .await
        .expect("accept");
    // Whatever else would happen (another attempt, a second dead letter) has time to.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    nothing_for(&mut dead_sub, 200).await;
    app.stop().await.expect("stop");
    publisher.close().await;
    calls.load(Ordering::SeqCst)
}

#[tokio::test]
async fn classic_queue_stops_at_the_cap() {
    // RabbitMQ 4 classic queues do not count `modified`: retries must be copies.
    let calls = always_retry(&q("classic"), &q("classic-dead"), |m| m).await;
    assert_eq!(calls, 3, "the handler runs max_attempts times");
}

#[tokio::test]
async fn quorum_queue_stops_at_the_cap() {
    // The quorum queue counts: two `modified`, then the runtime dead-letters attempt 3.
    let calls = always_retry(&q("quorum"), &q("quorum-dead"), |m| m).await;
    assert_eq!(calls, 3, "the handler runs max_attempts times");
}

#[tokio::test]
async fn quorum_queue_that_dead_letters_itself_stops_at_the_cap() {
    // x-delivery-limit 2 and a dead-letter exchange bound to the dead queue: the
    // broker moves the message after its third failed delivery.
    let calls = always_retry(&q("selfdl"), &q("selfdl-dead"), |m| m).await;
    assert_eq!(calls, 3, "the handler runs max_attempts times");
}

#[tokio::test]
async fn declared_quorum_queue_stops_at_the_cap() {
    // Made at start with x-delivery-limit = max_attempts − 1 and the dead letter as
    // its dead-letter target; the broker dead-letters it itself.
    let queue = unique("declared");
    let dead = q("declared-dead");
    let calls = always_retry(&queue, &dead, |m| {
        m.option(SubscribeOptions::new().declare(QueueType::Quorum))
    })
    .await;
    assert_eq!(calls, 3, "the handler runs max_attempts times");
    let listed = rabbitmq4(&["ctl", "-q", "list_queues", "name", "arguments"], None);
    let line = listed
        .lines()
        .find(|l| l.starts_with(&queue))
        .unwrap_or_else(|| panic!("{queue} not declared: {listed}"));
    assert!(
        line.contains("x-delivery-limit") && line.contains(",2}"),
        "{line}"
    );
    assert!(line.contains(&dead), "{line}");
    rabbitmq4(&["ctl", "-q", "delete_queue", &queue], None);
}
