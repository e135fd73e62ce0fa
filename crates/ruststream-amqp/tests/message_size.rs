//! The broker's largest message (RabbitMQ's `max_message_size`, 16 MiB by default on
//! RabbitMQ 4, announced in every attach): a publish over it fails with `TooLarge` naming
//! the broker's limit and returns the message, and a delayed retry copy over it keeps its
//! original with the broker instead of being lost. Needs RabbitMQ 4
//! (`scripts/rabbitmq4.sh`).

mod support;

use std::time::Duration;

use ruststream::{App, Mount, Settled, retry_after};
use ruststream_amqp::SubscribeOptions;
use ruststream_core::{Address, Broker, Declaration, Message, PublishErrorKind, Settlement};
use support::*;
use tokio::sync::mpsc;

fn topology(q: &mut Queues) {
    q.classic("over");
    q.classic("delayed");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// The broker's own setting, as `rabbitmqctl` reads it from the node.
fn configured_limit() -> usize {
    let said = rabbitmq4(
        &[
            "ctl",
            "-q",
            "eval",
            "application:get_env(rabbit, max_message_size).",
        ],
        None,
    );
    said.trim()
        .strip_prefix("{ok,")
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no max_message_size in the node's settings: {said}"))
}

/// Publishes a message over the broker's limit: the limit it names is the node's setting.
async fn refused_over_the_limit(broker: &ruststream_amqp::AmqpBroker, to: &str) -> usize {
    let limit = configured_limit();
    let large = Message::new(vec![b'x'; limit + 1]);
    let failed = broker
        .publisher()
        .publish(Address::new(to), large.clone())
        .await
        .expect_err("over the broker's max_message_size");
    match failed.kind {
        PublishErrorKind::TooLarge { size, limit: said } => {
            assert_eq!(said, limit, "the broker's limit");
            assert!(size > limit, "{size}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(
        failed.message.payload, large.payload,
        "the message comes back"
    );
    limit
}

#[tokio::test]
async fn a_publish_over_the_brokers_max_message_size_names_it() {
    let broker = broker().await;
    let queue = q("over");
    refused_over_the_limit(&broker, &queue).await;
    // The link goes on: the next publish is taken.
    broker
        .publisher()
        .publish(Address::new(&queue), Message::new("small"))
        .await
        .expect("published");
    broker.close().await;
}

/// `retry_after` on a queue is a copy published from the process once the delay is
/// over, after the original is accepted. A message that fits under the broker's limit but
/// whose copy does not (the retry count is one more application property) would be lost:
/// the copy never goes out and the stop gives it up. The limit is known from the
/// subscribe, before any publish of the service's, so the original is kept instead,
/// released to the broker later, and it is still in the queue after the service stops.
/// Without that check the handler ran once and the queue was empty after the stop.
#[tokio::test]
async fn a_delayed_copy_over_the_max_message_size_keeps_its_original() {
    let queue = q("delayed");
    let publisher = broker().await;
    let limit = refused_over_the_limit(&publisher, &queue).await;
    // The original (a durable header and one data section, a few bytes of framing) fits;
    // its copy's retry count is about 35 bytes more.
    let payload = format!("\"{}\"", "x".repeat(limit - 30));
    publisher
        .publisher()
        .publish(Address::new(&queue), Message::new(payload.clone()))
        .await
        .expect("the original fits");
    let (settled, mut settlements) = mpsc::unbounded_channel();
    let (handled, mut runs) = mpsc::unbounded_channel();
    let running = App::new(broker().await)
        .shutdown_timeout(Duration::from_secs(2))
        .mount(Mount::new(queue.as_str()), move |_: String| {
            let _ = handled.send(());
            async { retry_after(Duration::from_secs(60)) }
        })
        .after_settle(move |s: &Settled| {
            let _ = settled.send(s.error().map(ToString::to_string));
        })
        .start()
        .await
        .expect("starts");
    let first = tokio::time::timeout(Duration::from_secs(20), settlements.recv())
        .await
        .expect("settled within 20 s")
        .expect("running");
    let error = first.expect("the copy is refused before the original is accepted");
    assert!(error.contains("too large"), "{error}");
    assert!(error.contains(&format!("limit {limit}")), "{error}");
    for run in 0..2 {
        tokio::time::timeout(Duration::from_secs(20), runs.recv())
            .await
            .unwrap_or_else(|_| panic!("run {run} of the handler within 20 s"))
            .expect("running");
    }
    running.stop().await.expect("a clean stop");

    let mut sub = subscribe(
        &publisher,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let kept = next(&mut sub, 10).await;
    assert_eq!(kept.payload(), payload.as_bytes());
    kept.settle(Settlement::Accept).await.expect("accepted");
    publisher.close().await;
}
