//! Record sizes are the topic's (`max.message.bytes`), not the client's: a record another
//! producer wrote within the topic's limit is copied by retries and dead-lettered like any
//! other, a dead-letter topic the adapter makes takes whatever its source topic takes and
//! keeps it, and a publish over a topic's limit fails naming that limit and returns the
//! message. Default options. Needs a Kafka-protocol broker (`scripts/kafka.sh`;
//! `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use rdkafka::admin::{AdminOptions, ResourceSpecifier};
use rdkafka::producer::{FutureProducer, FutureRecord};
use ruststream::{App, Attempt, Mount, Raw, retry};
use ruststream_core::{Address, Message, PublishErrorKind};
use ruststream_kafka::KafkaBroker;
use tokio::sync::mpsc;

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// Kafka's default `max.message.bytes` of a topic (a record batch): more than
/// librdkafka's default `message.max.bytes` (1,000,000) lets a producer send.
const TOPIC_DEFAULT: usize = 1_048_588;

/// A payload a Java producer with its defaults sends (`max.request.size` 1,048,576) and a
/// topic with its defaults takes, over librdkafka's default 1,000,000.
const LARGE: usize = 1_030_000;

/// The value of `name` in `topic`'s configuration, as the cluster describes it.
async fn topic_config(topic: &str, name: &str) -> Option<String> {
    let admin: rdkafka::admin::AdminClient<_> = support::config().create().expect("admin");
    let described = admin
        .describe_configs(
            &[ResourceSpecifier::Topic(topic)],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("described");
    described
        .into_iter()
        .flatten()
        .flat_map(|resource| resource.entries)
        .find(|entry| entry.name == name)
        .and_then(|entry| entry.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_the_topic_takes_is_retried_and_dead_lettered() {
    let topic = support::unique("sizes");
    let dead = format!("{topic}.dead");
    support::create_topic(&topic, 1).await;
    // Another producer, whose limit is the topic's.
    let producer: FutureProducer = support::config()
        .set("message.max.bytes", "2000000")
        .create()
        .expect("a producer");
    let payload = vec![b'x'; LARGE];
    producer
        .send(
            FutureRecord::<[u8], [u8]>::to(&topic).payload(&payload[..]),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(error, _)| error)
        .expect("the topic takes the record");

    let (seen, mut attempts) = mpsc::unbounded_channel();
    let (dead_seen, mut dead_letters) = mpsc::unbounded_channel();
    let app = App::with_broker(std::sync::Arc::new(broker().await))
        .mount(
            Mount::new(topic.as_str())
                .max_attempts(2)
                .dead_letter(dead.as_str()),
            move |Attempt(attempt): Attempt, Raw(body): Raw| {
                let seen = seen.clone();
                async move {
                    let _ = seen.send((attempt, body.len()));
                    retry()
                }
            },
        )
        .mount(Mount::new(dead.as_str()), move |Raw(body): Raw| {
            let dead_seen = dead_seen.clone();
            async move {
                let _ = dead_seen.send(body.len());
                ruststream::ack()
            }
        });
    let running = app.start().await.expect("started");
    for expected in 1..=2 {
        let got = tokio::time::timeout(Duration::from_secs(30), attempts.recv())
            .await
            .expect("an attempt within 30 s: a copy that cannot be published loops instead")
            .expect("open");
        assert_eq!(got, (expected, LARGE), "attempt {expected}");
    }
    let dead_len = tokio::time::timeout(Duration::from_secs(30), dead_letters.recv())
        .await
        .expect("the dead letter within 30 s")
        .expect("open");
    assert_eq!(dead_len, LARGE);
    assert!(
        tokio::time::timeout(Duration::from_secs(2), attempts.recv())
            .await
            .is_err(),
        "nothing more is handled"
    );
    running.stop().await.expect("stopped");

    // The dead-letter topic the mount made keeps its dead letters (no retention of the
    // cluster's default, 7 days) and takes what its source topic takes.
    assert_eq!(
        topic_config(&dead, "retention.ms").await.as_deref(),
        Some("-1"),
        "the dead-letter topic's retention"
    );
    let source: usize = topic_config(&topic, "max.message.bytes")
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or(TOPIC_DEFAULT);
    let taken: usize = topic_config(&dead, "max.message.bytes")
        .await
        .and_then(|v| v.parse().ok())
        .expect("the dead-letter topic's max.message.bytes");
    assert!(
        taken > source,
        "the dead-letter topic takes {taken} bytes, its source {source}: a dead letter \
         with the runtime's headers would not fit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_over_the_topics_limit_names_it_and_returns_the_message() {
    let topic = support::unique("sizes-over");
    support::create_topic(&topic, 1).await;
    let broker = broker().await;
    let publisher = ruststream_core::Broker::publisher(&broker);
    let message = Message::new(vec![b'y'; TOPIC_DEFAULT + 10_000]);
    let failed = publisher
        .publish(Address::new(topic.as_str()), message.clone())
        .await
        .expect_err("over the topic's limit");
    match failed.kind {
        PublishErrorKind::TooLarge { size, limit } => {
            assert_eq!(size, TOPIC_DEFAULT + 10_000);
            assert_eq!(limit, TOPIC_DEFAULT, "the topic's own limit");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(
        failed.message.payload, message.payload,
        "the message comes back"
    );
    // Within the topic's limit, over librdkafka's default: taken.
    publisher
        .publish(
            Address::new(topic.as_str()),
            Message::new(vec![b'z'; LARGE]),
        )
        .await
        .expect("within the topic's limit");
}
