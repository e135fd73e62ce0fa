//! Delayed retries wait in delay topics, not in the process: a copy comes back after its
//! delay as the next attempt, a shorter delay never waits behind a longer one, and a
//! service stopped or killed during the delay loses nothing (the next one moves the
//! copy back).
//! Default options throughout. Needs a Kafka-protocol broker (`scripts/kafka.sh`;
//! `RUSTSTREAM_KAFKA_URL`).

mod support;

use support::next;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_conformance::child::Child;
use ruststream_core::{
    Broker, Delivery, DeliveryStream, Message, RETRY_COUNT, Settlement, SubscribeSpec,
};
use ruststream_kafka::KafkaBroker;

/// The child's topic, set by the parent.
const CHILD: &str = "RUSTSTREAM_KAFKA_DELAY_TOPIC";

/// librdkafka's default `session.timeout.ms` (45 s), and time to rejoin.
const SESSION: Duration = Duration::from_secs(45);

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// A topic of its own holding `payloads`.
async fn topic_with(broker: &KafkaBroker, payloads: &[&'static str]) -> String {
    let topic = support::unique("delay");
    support::create_topic(&topic, 1).await;
    for payload in payloads {
        broker
            .publisher()
            .publish(topic.as_str().into(), Message::new(*payload))
            .await
            .expect("published");
    }
    topic
}

async fn subscribe(broker: &KafkaBroker, topic: &str) -> DeliveryStream {
    let subscription = broker
        .subscribe(SubscribeSpec::new(topic))
        .await
        .expect("subscribed");
    assert!(
        subscription.capabilities.delays.is_some(),
        "a mount in the default group delays in topics"
    );
    subscription.deliveries
}

fn retry_count(delivery: &Delivery) -> Option<&str> {
    delivery.headers().get_str(RETRY_COUNT)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_retry_comes_back_from_its_delay_topic_as_the_next_attempt() {
    let broker = broker().await;
    let topic = topic_with(&broker, &["later"]).await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let first = next(&mut deliveries, Duration::from_secs(20)).await;
    let parked = Instant::now();
    first
        .settle(Settlement::RequeueAfter(Duration::from_millis(1500)))
        .await
        .expect("parked");
    let servers = support::bootstrap();
    let delay_topic = format!("ruststream.{topic}.delay.1500");
    let listed = tokio::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = support::config()
            .set("bootstrap.servers", servers)
            .create()
            .expect("client");
        rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_secs(10))
            .expect("metadata")
            .topics()
            .iter()
            .map(|t| t.name().to_owned())
            .collect::<Vec<_>>()
    })
    .await
    .expect("listed");
    assert!(
        listed.contains(&delay_topic),
        "no {delay_topic} in {listed:?}"
    );

    let again = next(&mut deliveries, Duration::from_secs(20)).await;
    let waited = parked.elapsed();
    eprintln!("back after {waited:?}");
    assert_eq!(&again.payload()[..], b"later");
    assert_eq!(retry_count(&again), Some("1"), "{:?}", again.headers());
    assert!(
        again.headers().get("x-ruststream-due").is_none(),
        "the due time stays in the delay topic"
    );
    assert!(
        waited >= Duration::from_millis(1400),
        "back after {waited:?}, sooner than asked"
    );
    assert!(
        waited < Duration::from_secs(8),
        "back after {waited:?}, long after the 1.5 s asked"
    );
    again.settle(Settlement::Accept).await.expect("accepted");
    drop(deliveries);
    broker.close().await;
}

/// How much later than its delay a copy may come back here: the mover's fetch after
/// the copy is due, its publish back, and the mount's next fetch. nisshi answers a fetch
/// by looking at its storage again after half the time left of the fetch's wait
/// (librdkafka's `fetch.wait.max.ms`, 500 ms), so the mount's fetch alone may take up to
/// 500 ms there; Kafka answers a waiting fetch when a record arrives.
const LATE: Duration = Duration::from_millis(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delayed_retry_of_a_partition_comes_back_soon_after_its_delay() {
    // The mover pauses the delay topic's partition until its head is due, then reads
    // it again: a partition resumed without waking librdkafka's fetcher waited up to
    // a second more (1 round in 10 or so).
    let broker = broker().await;
    let topic = topic_with(&broker, &["again"]).await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let mut delivery = next(&mut deliveries, Duration::from_secs(20)).await;
    let delay = Duration::from_millis(1500);
    let mut late = Vec::new();
    for round in 0..16 {
        let parked = Instant::now();
        delivery
            .settle(Settlement::RequeueAfter(delay))
            .await
            .expect("parked");
        delivery = next(&mut deliveries, Duration::from_secs(20)).await;
        // The first copy also waits for the mover to join its group and be given the
        // new delay topic.
        if round > 0 {
            late.push(parked.elapsed().saturating_sub(delay));
        }
    }
    eprintln!("later than the delay: {late:?}");
    let latest = late.iter().max().copied().unwrap_or_default();
    assert!(
        latest < LATE,
        "a copy came back {latest:?} after its delay; all: {late:?}"
    );
    delivery.settle(Settlement::Accept).await.expect("accepted");
    drop(deliveries);
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_delay_does_not_wait_behind_a_longer_one() {
    let broker = broker().await;
    let topic = topic_with(&broker, &["long", "short"]).await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let long = next(&mut deliveries, Duration::from_secs(20)).await;
    let short = next(&mut deliveries, Duration::from_secs(20)).await;
    assert_eq!(&long.payload()[..], b"long");
    let parked = Instant::now();
    long.settle(Settlement::RequeueAfter(Duration::from_secs(6)))
        .await
        .expect("parked long");
    short
        .settle(Settlement::RequeueAfter(Duration::from_secs(1)))
        .await
        .expect("parked short");
    let first = next(&mut deliveries, Duration::from_secs(20)).await;
    let first_at = parked.elapsed();
    assert_eq!(&first.payload()[..], b"short", "after {first_at:?}");
    assert!(
        first_at < Duration::from_secs(5),
        "the 1 s copy waited {first_at:?}, behind the 6 s one"
    );
    let second = next(&mut deliveries, Duration::from_secs(20)).await;
    assert_eq!(&second.payload()[..], b"long");
    assert!(parked.elapsed() >= Duration::from_millis(5900));
    first.settle(Settlement::Accept).await.expect("accepted");
    second.settle(Settlement::Accept).await.expect("accepted");
    drop(deliveries);
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_stopped_during_the_delay_loses_nothing() {
    let topic = {
        let broker = broker().await;
        let topic = topic_with(&broker, &["parked"]).await;
        let mut deliveries = subscribe(&broker, &topic).await;
        let first = next(&mut deliveries, Duration::from_secs(20)).await;
        first
            .settle(Settlement::RequeueAfter(Duration::from_secs(3)))
            .await
            .expect("parked");
        drop(deliveries);
        // Stopped long before the copy is due: nothing of it is in this process.
        broker.close().await;
        topic
    };
    let broker = broker().await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let again = next(&mut deliveries, Duration::from_secs(30)).await;
    assert_eq!(&again.payload()[..], b"parked");
    assert_eq!(retry_count(&again), Some("1"));
    again.settle(Settlement::Accept).await.expect("accepted");
    if let Ok(Some(more)) = tokio::time::timeout(Duration::from_secs(3), deliveries.next()).await {
        panic!("one copy only, then {more:?}");
    }
    drop(deliveries);
    broker.close().await;
}

/// In the child only: parks its one delivery for 2 s, says so, and waits to be killed.
#[tokio::test]
async fn child_parking_a_delayed_retry() {
    let Ok(topic) = std::env::var(CHILD) else {
        return;
    };
    let broker = broker().await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let first = next(&mut deliveries, Duration::from_secs(30)).await;
    first
        .settle(Settlement::RequeueAfter(Duration::from_secs(2)))
        .await
        .expect("parked");
    println!("parked");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_killed_during_the_delay_loses_nothing() {
    let topic = topic_with(&broker().await, &["parked"]).await;
    Child::started(
        "child_parking_a_delayed_retry",
        (CHILD, &topic),
        "parked",
        Duration::from_secs(60),
    )
    .await
    .kill();
    let killed = Instant::now();
    // The killed one's group members hold the topic's and the delay topic's partitions
    // until their sessions expire; then this service gets both.
    let broker = broker().await;
    let mut deliveries = subscribe(&broker, &topic).await;
    let again = next(&mut deliveries, SESSION + Duration::from_secs(30)).await;
    eprintln!("back {:?} after the kill", killed.elapsed());
    assert_eq!(&again.payload()[..], b"parked");
    assert_eq!(retry_count(&again), Some("1"), "the copy, not the original");
    again.settle(Settlement::Accept).await.expect("accepted");
    if let Ok(Some(more)) = tokio::time::timeout(Duration::from_secs(3), deliveries.next()).await {
        panic!("one copy only, then {more:?}");
    }
    drop(deliveries);
    broker.close().await;
}
