//! What the adapter commits, watched through its own subscriptions: never past a
//! delivery still in hand, and a delivery given back comes again at once, alone.
//! Needs a Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, DeliveryStream, Message, Settlement, SubscribeSpec};
use ruststream_kafka::KafkaBroker;

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// A topic of one partition holding `payloads`, in order.
async fn topic_with(broker: &KafkaBroker, payloads: &[&'static str]) -> String {
    let topic = support::unique("commits");
    support::create_topic(&topic, 1).await;
    let publisher = broker.publisher();
    for payload in payloads {
        publisher
            .publish(topic.as_str().into(), Message::new(*payload))
            .await
            .expect("published");
    }
    topic
}

async fn subscribe(broker: &KafkaBroker, topic: &str) -> DeliveryStream {
    let mut spec = SubscribeSpec::new(topic);
    spec.in_flight = 8;
    broker.subscribe(spec).await.expect("subscribed").deliveries
}

/// How long a delivery may take to come.
const WAIT: Duration = Duration::from_secs(20);

async fn nothing(deliveries: &mut DeliveryStream, within: Duration) {
    if let Ok(Some(item)) = tokio::time::timeout(within, deliveries.next()).await {
        panic!("nothing should come, got {item:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_above_a_delivery_in_hand_is_not_committed_past_it() {
    let first = broker().await;
    let topic = topic_with(&first, &["zero", "one"]).await;
    let mut deliveries = subscribe(&first, &topic).await;
    let zero = support::next(&mut deliveries, WAIT).await;
    let one = support::next(&mut deliveries, WAIT).await;
    assert_eq!(
        (&zero.payload()[..], &one.payload()[..]),
        (&b"zero"[..], &b"one"[..])
    );
    one.settle(Settlement::Accept).await.expect("settled");
    // The service stops with `zero` in hand: its broker commits what it may and leaves.
    drop(deliveries);
    first.close().await;
    drop(zero);

    let second = broker().await;
    let mut again = subscribe(&second, &topic).await;
    let zero = support::next(&mut again, WAIT).await;
    assert_eq!(
        &zero.payload()[..],
        b"zero",
        "the one left in hand comes back"
    );
    let one = support::next(&mut again, WAIT).await;
    assert_eq!(
        &one.payload()[..],
        b"one",
        "and what was after it: never committed past"
    );
    zero.settle(Settlement::Accept).await.expect("settled");
    one.settle(Settlement::Remove).await.expect("settled");
    drop(again);
    second.close().await;

    let third = broker().await;
    let mut after = subscribe(&third, &topic).await;
    nothing(&mut after, Duration::from_secs(3)).await;
    drop(after);
    third.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_given_back_comes_again_at_once_and_alone() {
    let first = broker().await;
    let topic = topic_with(&first, &["zero", "one", "two"]).await;
    let mut deliveries = subscribe(&first, &topic).await;
    let zero = support::next(&mut deliveries, WAIT).await;
    let one = support::next(&mut deliveries, WAIT).await;
    let two = support::next(&mut deliveries, WAIT).await;
    two.settle(Settlement::Accept).await.expect("settled");
    // Dropped unsettled: abandoned. The partition is read again from `zero`; `one` is
    // still in hand and `two` settled, so only `zero` comes again.
    drop(zero);
    let again = support::next(&mut deliveries, WAIT).await;
    assert_eq!(&again.payload()[..], b"zero");
    nothing(&mut deliveries, Duration::from_secs(2)).await;
    again.settle(Settlement::Accept).await.expect("settled");
    one.settle(Settlement::Reject).await.expect("settled");
    drop(deliveries);
    first.close().await;

    let later = broker().await;
    let mut after = subscribe(&later, &topic).await;
    nothing(&mut after, Duration::from_secs(3)).await;
    drop(after);
    later.close().await;
}
