//! A consumer killed with a delivery in hand (no commit, no leaving its group): with the
//! default options the group hands its partition to the next consumer once the killed
//! one's session expires, and the delivery comes again. Needs a Kafka-protocol broker
//! (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_conformance::child::Child;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_kafka::KafkaBroker;

/// The child's topic, set by the parent.
const CHILD: &str = "RUSTSTREAM_KAFKA_CRASH_TOPIC";

/// librdkafka's default `session.timeout.ms` (45 s), and time to rejoin.
const SESSION: Duration = Duration::from_secs(45);

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// In the child only: takes one delivery, says so, and waits to be killed.
#[tokio::test]
async fn child_holding_a_delivery() {
    let Ok(topic) = std::env::var(CHILD) else {
        return;
    };
    let broker = broker().await;
    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let held = deliveries.next().await;
    assert!(matches!(held, Some(Ok(_))), "{held:?}");
    println!("holding");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_consumers_delivery_comes_back_after_its_session() {
    let topic = support::unique("crash");
    support::create_topic(&topic, 1).await;
    let broker = broker().await;
    broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("held"))
        .await
        .expect("published");

    Child::started(
        "child_holding_a_delivery",
        (CHILD, &topic),
        "holding",
        Duration::from_secs(30),
    )
    .await
    .kill();
    let killed = Instant::now();

    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let again = tokio::time::timeout(SESSION + Duration::from_secs(20), deliveries.next()).await;
    let Ok(Some(Ok(delivery))) = again else {
        panic!("the killed consumer's delivery did not come back: {again:?}");
    };
    assert_eq!(&delivery.payload()[..], b"held");
    eprintln!("came back {:?} after the kill", killed.elapsed());
    delivery.settle(Settlement::Accept).await.expect("settled");
    drop(deliveries);
    broker.close().await;
}
