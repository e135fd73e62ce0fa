//! The JetStream form against a real server: attempts are the consumer's delivery count,
//! a nak's delay is honoured, a long handler is kept from redelivery by progress signals,
//! an abandoned delivery comes back at once, publishing deduplicates by message id.
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`, default `nats://127.0.0.1:4222`).

mod support;

use std::time::{Duration, Instant};

use ruststream_core::{Broker, MESSAGE_ID, Message, RETRY_COUNT, Settlement};
use ruststream_nats::JetStream;
use support::{broker, next, publish, subscribe, try_next, unique};

const WAIT: Duration = Duration::from_secs(10);

/// Streams this binary made are named after its subjects.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

fn subject(name: &str) -> (String, Cleanup) {
    let subject = unique(name);
    (subject.clone(), Cleanup(subject))
}

#[tokio::test]
async fn attempt_is_the_delivery_count() {
    let (subject, _cleanup) = subject("attempts");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    publish(&broker, &subject, Message::new("again")).await;
    for attempt in 1..=3 {
        let delivery = next(&mut sub, WAIT).await;
        assert_eq!(delivery.broker_attempt(), Some(attempt));
        assert_eq!(delivery.redelivery_count(), attempt);
        let settlement = if attempt < 3 {
            Settlement::Requeue
        } else {
            Settlement::Accept
        };
        delivery.settle(settlement).await.expect("settled");
    }
    assert!(
        try_next(&mut sub, Duration::from_secs(1)).await.is_none(),
        "acked: nothing more"
    );
}

#[tokio::test]
async fn nak_delay_is_honoured() {
    let (subject, _cleanup) = subject("delay");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    publish(&broker, &subject, Message::new("later")).await;
    let delivery = next(&mut sub, WAIT).await;
    let asked = Instant::now();
    let delay = Duration::from_millis(1500);
    delivery
        .settle(Settlement::RequeueAfter(delay))
        .await
        .expect("settled");
    let again = next(&mut sub, WAIT).await;
    let waited = asked.elapsed();
    assert!(
        waited >= delay,
        "back after {waited:?}, before the {delay:?} asked"
    );
    assert!(
        waited < delay + Duration::from_secs(3),
        "back after {waited:?}"
    );
    assert_eq!(again.broker_attempt(), Some(2));
    again.settle(Settlement::Accept).await.expect("settled");
}

/// The consumer's `ack_wait` is short (1 s, set on the consumer for this test): a
/// delivery held 4 s without a settlement would come back thrice without the adapter's
/// progress signals.
#[tokio::test]
async fn progress_keeps_a_long_handler_from_redelivery() {
    let (subject, _cleanup) = subject("progress");
    let broker = broker().await;
    let option = JetStream::new().ack_wait(Duration::from_secs(1));
    let mut sub = subscribe(&broker, &subject, Some(option)).await;
    publish(&broker, &subject, Message::new("slow")).await;
    let delivery = next(&mut sub, WAIT).await;
    if let Some(again) = try_next(&mut sub, Duration::from_secs(4)).await {
        panic!(
            "redelivered while held: attempt {:?}",
            again.broker_attempt()
        );
    }
    delivery.settle(Settlement::Accept).await.expect("settled");
    assert!(try_next(&mut sub, Duration::from_secs(2)).await.is_none());
}

/// Messages the client received while a long handler runs (they wait behind it, not yet
/// handed out) are covered by progress signals too: with a 1 s `ack_wait`, after 4 s
/// behind the first they are still on their first attempt, and come once.
#[tokio::test]
async fn progress_covers_what_waits_behind_a_long_handler() {
    let (subject, _cleanup) = subject("waiting");
    let broker = broker().await;
    let option = JetStream::new().ack_wait(Duration::from_secs(1));
    let mut sub = subscribe(&broker, &subject, Some(option)).await;
    for n in 0..3 {
        publish(&broker, &subject, Message::new(n.to_string())).await;
    }
    let first = next(&mut sub, WAIT).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    first.settle(Settlement::Accept).await.expect("settled");
    for _ in 0..2 {
        let waiting = next(&mut sub, WAIT).await;
        assert_eq!(waiting.broker_attempt(), Some(1), "{:?}", waiting.payload());
        waiting.settle(Settlement::Accept).await.expect("settled");
    }
    assert!(
        try_next(&mut sub, Duration::from_secs(2)).await.is_none(),
        "nothing twice"
    );
}

/// The same consumer read by a plain client that sends no progress signals: the server
/// delivers the held message again after `ack_wait`, so the check above can fail.
#[tokio::test]
async fn without_progress_the_server_redelivers() {
    use futures_util::StreamExt;
    let (subject, _cleanup) = subject("noprogress");
    let broker = broker().await;
    let option = JetStream::new().ack_wait(Duration::from_secs(1));
    drop(subscribe(&broker, &subject, Some(option)).await);
    // The subscription's pump has stopped once the broker is closed.
    broker.close().await;
    let broker = support::broker().await;
    publish(&broker, &subject, Message::new("held")).await;
    let js = async_nats::jetstream::new(support::client().await);
    let stream = js
        .get_stream(subject.replace('.', "_"))
        .await
        .expect("stream");
    let consumer: async_nats::jetstream::consumer::PullConsumer = stream
        .get_consumer(&format!("ruststream-{}", subject.replace('.', "_")))
        .await
        .expect("consumer");
    let mut attempts = Vec::new();
    let mut messages = consumer.messages().await.expect("pull");
    let started = Instant::now();
    while attempts.len() < 2 && started.elapsed() < WAIT {
        if let Ok(Some(Ok(message))) =
            tokio::time::timeout(Duration::from_secs(3), messages.next()).await
        {
            attempts.push(message.info().expect("info").delivered);
        }
    }
    assert_eq!(attempts, [1, 2], "held without progress: delivered again");
}

#[tokio::test]
async fn abandoned_comes_back_at_once() {
    let (subject, _cleanup) = subject("abandon");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    publish(&broker, &subject, Message::new("given back")).await;
    drop(next(&mut sub, WAIT).await);
    let again = next(&mut sub, Duration::from_secs(2)).await;
    assert_eq!(again.broker_attempt(), Some(2));
    again.settle(Settlement::Accept).await.expect("settled");
}

#[tokio::test]
async fn reject_terminates() {
    let (subject, _cleanup) = subject("term");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    publish(&broker, &subject, Message::new("refused")).await;
    let delivery = next(&mut sub, WAIT).await;
    delivery.settle(Settlement::Reject).await.expect("settled");
    assert!(try_next(&mut sub, Duration::from_secs(2)).await.is_none());
}

/// A message id is the stream's deduplication id; a retry copy of it is another message.
#[tokio::test]
async fn publish_deduplicates_by_message_id() {
    let (subject, _cleanup) = subject("dedup");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    let original = Message::new("once").with_header(MESSAGE_ID, "m-1");
    publish(&broker, &subject, original.clone()).await;
    publish(&broker, &subject, original.clone()).await;
    publish(&broker, &subject, original.with_header(RETRY_COUNT, "1")).await;
    let first = next(&mut sub, WAIT).await;
    assert_eq!(first.headers().get_str(RETRY_COUNT), None);
    first.settle(Settlement::Accept).await.expect("settled");
    let copy = next(&mut sub, WAIT).await;
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    copy.settle(Settlement::Accept).await.expect("settled");
    assert!(
        try_next(&mut sub, Duration::from_secs(1)).await.is_none(),
        "the duplicate was stored"
    );
}

/// A consumer deleted under a running subscription: the subscription says so and
/// detaches (not ready), and does not spin.
#[tokio::test]
async fn a_deleted_consumer_is_reported_without_spinning() {
    use futures_util::StreamExt;
    let (subject, _cleanup) = subject("deleted");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    let js = async_nats::jetstream::new(support::client().await);
    let stream = js
        .get_stream(subject.replace('.', "_"))
        .await
        .expect("stream");
    stream
        .delete_consumer(&format!("ruststream-{}", subject.replace('.', "_")))
        .await
        .expect("delete");
    let (mut items, mut said) = (0, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(12);
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, sub.deliveries.next()).await {
        items += 1;
        match item {
            Err(report) => said |= report.0.contains("was deleted"),
            Ok(delivery) => panic!("a delivery from a deleted consumer: {delivery:?}"),
        }
    }
    assert!(said, "the deletion reported");
    assert!(!sub.attached.is_attached(), "detached");
    assert!(items <= 10, "{items} reports in 12 s");
}
