//! `max_poll_interval`: a consumer that takes no record for longer than it leaves its group,
//! and its partition (with what it held unsettled) goes to the next consumer. Without the
//! setting librdkafka's default holds (5 minutes; `settings.rs`'s unit test shows nothing
//! is set): a test of that would wait 5 minutes for the group's rebalance. Needs a
//! Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, DeliveryStream, Message, Settlement, SubscribeSpec};
use ruststream_kafka::KafkaBroker;

async fn broker(query: &str) -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&format!("{}{query}", support::url()))
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// A topic of one partition holding `n` messages, and a first consumer of it (one
/// delivery at a time) that took the first and then takes no more: its reader stops
/// polling once the next one waits.
async fn stuck_consumer(
    broker: &KafkaBroker,
    n: usize,
) -> (String, DeliveryStream, ruststream_core::Delivery) {
    let topic = support::unique("poll");
    support::create_topic(&topic, 1).await;
    for i in 0..n {
        broker
            .publisher()
            .publish(topic.as_str().into(), Message::new(format!("{i}")))
            .await
            .expect("published");
    }
    let mut spec = SubscribeSpec::new(topic.as_str());
    spec.in_flight = 1;
    let mut deliveries = broker.subscribe(spec).await.expect("subscribed").deliveries;
    let first = tokio::time::timeout(Duration::from_secs(60), deliveries.next()).await;
    let Ok(Some(Ok(first))) = first else {
        panic!("the first consumer got nothing: {first:?}");
    };
    assert_eq!(&first.payload()[..], b"0");
    // Held, not settled, until the test lets go of it.
    (topic, deliveries, first)
}

/// What a second consumer of the same group gets within `within`, if anything.
async fn second_consumer(broker: &KafkaBroker, topic: &str, within: Duration) -> Option<Vec<u8>> {
    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic))
        .await
        .expect("subscribed")
        .deliveries;
    match tokio::time::timeout(within, deliveries.next()).await {
        Ok(Some(Ok(delivery))) => {
            let payload = delivery.payload().to_vec();
            delivery.settle(Settlement::Accept).await.expect("settled");
            Some(payload)
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_poll_interval_hands_a_stuck_consumers_partition_on() {
    let broker = broker("?session_timeout=6s&max_poll_interval=10s").await;
    let (topic, stuck, held) = stuck_consumer(&broker, 5).await;
    let got = second_consumer(&broker, &topic, Duration::from_secs(45)).await;
    assert_eq!(
        got.as_deref(),
        Some(&b"0"[..]),
        "the stuck consumer left its group after 10 s without a poll: the next one \
         starts at the first record, the one held and never committed"
    );
    // Its consumer, out of the group, closes within the adapter's bound (30 s) however
    // its last commit goes: the broker's close waits for it.
    drop((held, stuck));
    tokio::time::timeout(Duration::from_secs(40), broker.close())
        .await
        .expect("the broker closed, its consumer out of its group among them");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_poll_interval_below_the_session_is_refused_at_subscribe() {
    let broker = broker("?max_poll_interval=30s").await;
    let topic = support::unique("poll-bad");
    support::create_topic(&topic, 1).await;
    let error = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .map(|_| ())
        .expect_err("below librdkafka's 45 s session");
    assert!(error.to_string().contains("max_poll_interval"), "{error}");
    broker.close().await;
}
