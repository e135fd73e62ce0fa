//! The record key is the header `kafka-key`: a message published with it lands on its
//! key's partition with that key (not as a record header), a handler sees a record's key
//! there, and the runtime's copies (a retry, a delayed retry) keep it, so a key's
//! records stay on one partition through retries.
//! Default options. Needs a Kafka-protocol broker (`scripts/kafka.sh`;
//! `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use rdkafka::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use ruststream::{App, Attempt, Mount, ack, retry, retry_after};
use ruststream_core::Headers;
use ruststream_kafka::{KEY, KafkaBroker};
use tokio::sync::mpsc;

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// A record as read: (partition, key, record header names, payload).
type Read = (i32, Option<Vec<u8>>, Vec<String>, Vec<u8>);

/// The first `count` records of `topic`.
fn records(topic: &str, count: usize) -> Vec<Read> {
    let mut config = support::config();
    config
        .set("group.id", support::unique("keys-reader"))
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().expect("a client");
    consumer.subscribe(&[topic]).expect("subscribed");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.len() < count && std::time::Instant::now() < deadline {
        let Some(Ok(record)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let names = record
            .headers()
            .map(|h| h.iter().map(|h| h.key.to_owned()).collect())
            .unwrap_or_default();
        out.push((
            record.partition(),
            record.key().map(<[u8]>::to_vec),
            names,
            record.payload().unwrap_or_default().to_vec(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_published_read_and_kept_by_retries() {
    let topic = support::unique("keys");
    support::create_topic(&topic, 3).await;
    let (seen, mut heard) = mpsc::unbounded_channel();
    let handler = move |Attempt(attempt): Attempt, headers: Headers, body: String| {
        let seen = seen.clone();
        async move {
            let key = headers.get_str(KEY).map(str::to_owned);
            let _ = seen.send((body.clone(), attempt, key));
            match (body.as_str(), attempt) {
                ("keyed", 1) => retry(),
                ("keyed", 2) => retry_after(Duration::from_millis(300)),
                _ => ack(),
            }
        }
    };
    let running = App::new(broker().await)
        .mount(Mount::new(topic.as_str()).max_attempts(5), handler)
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .message(topic.as_str(), "keyed")
        .header(KEY, "customer-42")
        .header("tenant", "acme")
        .send()
        .await
        .expect("published");
    // A record another client sent with a key.
    let producer: FutureProducer = support::config().create().expect("producer");
    producer
        .send(
            FutureRecord::to(&topic).key("raw-key").payload("\"raw\""),
            Duration::from_secs(10),
        )
        .await
        .expect("sent");

    let mut got = Vec::new();
    while got.len() < 4 {
        let next = tokio::time::timeout(Duration::from_secs(30), heard.recv()).await;
        got.push(next.expect("handled in time").expect("open"));
    }
    got.sort();
    let keyed = Some("customer-42".to_owned());
    assert_eq!(
        got,
        [
            ("keyed".to_owned(), 1, keyed.clone()),
            ("keyed".to_owned(), 2, keyed.clone()),
            ("keyed".to_owned(), 3, keyed),
            ("raw".to_owned(), 1, Some("raw-key".to_owned())),
        ]
    );
    running.stop().await.expect("a clean stop");

    // The original, its retry and the delayed retry moved back: one partition, the key
    // as the record key and not as a header.
    let topic_records = tokio::task::spawn_blocking(move || records(&topic, 4))
        .await
        .expect("read");
    let keyed: Vec<_> = topic_records
        .iter()
        .filter(|(_, key, ..)| key.as_deref() == Some(&b"customer-42"[..]))
        .collect();
    assert_eq!(keyed.len(), 3, "{topic_records:?}");
    assert!(keyed.iter().all(|(p, ..)| *p == keyed[0].0), "{keyed:?}");
    for (_, _, names, _) in &keyed {
        assert!(names.iter().any(|n| n == "tenant"), "{names:?}");
        assert!(!names.iter().any(|n| n == KEY), "{names:?}");
    }
}
