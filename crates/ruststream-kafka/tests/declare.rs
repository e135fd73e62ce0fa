//! The topics a mount sends to are made when it starts: a dead letter or a retry topic
//! that the cluster lacks is there before the first delivery needs it, so a cluster that
//! does not make topics on first publish (`auto.create.topics.enable=false`) loses no
//! dead letter; a name Kafka does not take stops the start, saying which.
//! Needs a Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream::{App, Mount, RunError, retry};
use ruststream_core::{Broker, Settlement, SubscribeSpec};
use ruststream_kafka::KafkaBroker;

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// How many partitions the cluster has of `topic` (0: no such topic), asked without
/// making it.
async fn partitions_of(topic: &str) -> usize {
    let mut config = support::config();
    config.set("allow.auto.create.topics", "false");
    let consumer: rdkafka::consumer::BaseConsumer = config.create().expect("a client");
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let metadata = rdkafka::consumer::Consumer::fetch_metadata(
            &consumer,
            Some(&topic),
            Duration::from_secs(10),
        )
        .expect("metadata");
        metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len())
    })
    .await
    .expect("no panic")
}

/// Whether the cluster has `topic`.
async fn exists(topic: &str) -> bool {
    partitions_of(topic).await > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mounts_dead_letter_and_retry_topics_are_made_at_start() {
    let topic = support::unique("declare");
    support::create_topic(&topic, 1).await;
    let (dead, retries) = (format!("{topic}.dead"), format!("{topic}.retries"));
    assert!(!exists(&dead).await && !exists(&retries).await);
    let mount = Mount::new(topic.as_str())
        .max_attempts(1)
        .dead_letter(dead.as_str())
        .retry_to(retries.as_str());
    let running = App::new(broker().await)
        .mount(mount, |_: String| async { retry() })
        .start()
        .await
        .expect("starts");
    assert!(
        exists(&dead).await,
        "the dead letter topic is made at start"
    );
    assert!(exists(&retries).await, "the retry topic is made at start");

    // A spent delivery reaches it.
    running
        .publisher()
        .publish(topic.as_str(), "spent")
        .await
        .expect("published");
    let watcher = broker().await;
    let mut letters = watcher
        .subscribe(SubscribeSpec::new(dead.as_str()))
        .await
        .expect("the dead letters subscribed")
        .deliveries;
    let letter = tokio::time::timeout(Duration::from_secs(30), letters.next())
        .await
        .expect("a dead letter within 30 s")
        .expect("open")
        .expect("a delivery");
    assert_eq!(letter.payload().as_ref(), b"\"spent\"");
    letter.settle(Settlement::Accept).await.expect("acked");
    running.stop().await.expect("a clean stop");
    watcher.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_name_kafka_refuses_stops_the_start() {
    let topic = support::unique("declare-bad");
    support::create_topic(&topic, 1).await;
    let mount = Mount::new(topic.as_str())
        .max_attempts(2)
        .dead_letter("dead letters!");
    let started = App::new(broker().await)
        .mount(mount, |_: String| async { retry() })
        .start()
        .await;
    let Err(error) = started else {
        panic!("a dead letter Kafka cannot hold was taken");
    };
    assert!(matches!(error, RunError::Subscribe { .. }), "{error:?}");
    let said = error.to_string();
    assert!(
        said.contains("dead letters!") && said.contains("create it"),
        "{said}"
    );
}

/// A mount's own topic missing: by default the start stops and says how to go on
/// (create it, or `partitions=N`); with `partitions=3` (the URL's or the mount's) the
/// mount makes it with three partitions and reads what is published to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_stops_the_start_unless_partitions_makes_it() {
    let topic = support::unique("made-by-mount");
    let plain = broker().await;
    match plain.subscribe(SubscribeSpec::new(topic.as_str())).await {
        Err(ruststream_core::SubscribeError::BadAddress(why)) => {
            assert!(why.contains(&format!("no topic {topic}")), "{why}");
            assert!(why.contains("partitions=N"), "{why}");
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("subscribed to a topic nobody made"),
    }
    assert!(!exists(&topic).await, "nothing made by default");
    plain.close().await;

    support::bootstrap();
    let url = format!("{}?partitions=3", support::url());
    let making = KafkaBroker::connect(&url).await.expect("connected");
    let mut subscription = making
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("the topic is made");
    assert_eq!(partitions_of(&topic).await, 3);
    making
        .publisher()
        .publish(
            topic.as_str().into(),
            ruststream_core::Message::new("first"),
        )
        .await
        .expect("published");
    let delivery = tokio::time::timeout(Duration::from_secs(30), subscription.deliveries.next())
        .await
        .expect("a delivery within 30 s")
        .expect("open")
        .expect("a delivery");
    assert_eq!(&delivery.payload()[..], b"first");
    delivery.settle(Settlement::Accept).await.expect("settled");
    drop(subscription);
    // Made already: a second mount finds it as it is.
    let again = making
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("found");
    drop(again);
    making.close().await;
}
