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

/// The child's topic when its mount sets `session_timeout=6s`.
const CHILD_6S: &str = "RUSTSTREAM_KAFKA_CRASH_TOPIC_6S";

/// In the child only: takes one delivery, says so, and waits to be killed.
#[tokio::test]
async fn child_holding_a_delivery() {
    let Ok(topic) = std::env::var(CHILD) else {
        return;
    };
    hold_one(broker().await, &topic).await;
}

/// In the child only: as [`child_holding_a_delivery`], with `session_timeout=6s`.
#[tokio::test]
async fn child_holding_a_delivery_session_6s() {
    let Ok(topic) = std::env::var(CHILD_6S) else {
        return;
    };
    hold_one(broker_6s().await, &topic).await;
}

/// A broker whose mounts set `session_timeout=6s` (through the URL).
async fn broker_6s() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&format!("{}?session_timeout=6s", support::url()))
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

async fn hold_one(broker: KafkaBroker, topic: &str) {
    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic))
        .await
        .expect("subscribed")
        .deliveries;
    let held = deliveries.next().await;
    assert!(matches!(held, Some(Ok(_))), "{held:?}");
    println!("holding");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Publishes one message to a new topic, lets the child test `child` (its topic in the
/// variable `env`) take it and kills the child; then a consumer of `broker` must get the
/// message within `within`. How long after the kill it came.
async fn killed_holding_one(
    broker: KafkaBroker,
    child: &str,
    env: &str,
    within: Duration,
) -> Duration {
    let topic = support::unique("crash");
    support::create_topic(&topic, 1).await;
    broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("held"))
        .await
        .expect("published");
    Child::started(child, (env, &topic), "holding", Duration::from_secs(30))
        .await
        .kill();
    let killed = Instant::now();
    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let again = tokio::time::timeout(within, deliveries.next()).await;
    let Ok(Some(Ok(delivery))) = again else {
        panic!("the killed consumer's delivery did not come back within {within:?}: {again:?}");
    };
    let after = killed.elapsed();
    assert_eq!(&delivery.payload()[..], b"held");
    eprintln!("came back {after:?} after the kill");
    delivery.settle(Settlement::Accept).await.expect("settled");
    drop(deliveries);
    broker.close().await;
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_consumers_delivery_comes_back_after_its_session() {
    let within = SESSION + Duration::from_secs(20);
    killed_holding_one(broker().await, "child_holding_a_delivery", CHILD, within).await;
}

/// `session_timeout=6s`: the killed consumer's partition, and the delivery it held, go
/// to the next consumer once its 6 s session expires, not after librdkafka's 45 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_timeout_6s_hands_a_killed_consumers_partition_on_sooner() {
    let child = "child_holding_a_delivery_session_6s";
    let within = Duration::from_secs(30);
    let after = killed_holding_one(broker_6s().await, child, CHILD_6S, within).await;
    assert!(
        after < Duration::from_secs(20),
        "back {after:?} after the kill: the 6 s session was not used"
    );
}
