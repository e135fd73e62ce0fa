//! The dead-letter tools' view of a topic: browsing reads every partition from the
//! tools' group's offset, oldest first, and commits nothing; removing takes exactly the
//! records named, at the head of a partition or further on.
//! Needs a Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use ruststream::{App, Mount, retry};
use ruststream_core::{
    Address, Broker, DEAD_LETTER_FROM, DEAD_LETTER_REASON, InspectError, Waiting,
};
use ruststream_kafka::{KafkaBroker, TOOLS_GROUP};

async fn broker() -> KafkaBroker {
    support::bootstrap();
    KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}. {}", support::HOW))
}

/// Sends `payload` to `partition` of `topic`, with a header whose value is not UTF-8.
async fn send(producer: &FutureProducer, topic: &str, partition: i32, payload: &str) {
    let headers = OwnedHeaders::new().insert(Header {
        key: "x-binary",
        value: Some(&[0xff_u8, 0][..]),
    });
    producer
        .send(
            FutureRecord::<(), _>::to(topic)
                .partition(partition)
                .payload(payload)
                .headers(headers),
            Duration::from_secs(10),
        )
        .await
        .expect("sent");
    // Timestamps a millisecond or more apart: the order browsing merges by.
    tokio::time::sleep(Duration::from_millis(5)).await;
}

fn payloads(waiting: &[Waiting]) -> Vec<String> {
    waiting
        .iter()
        .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
        .collect()
}

/// The tools' group's committed offset on `partition` of `topic`.
fn committed(topic: &str, partition: i32) -> Offset {
    let mut config = support::config();
    config.set("group.id", TOOLS_GROUP);
    let consumer: BaseConsumer = config.create().expect("a client");
    let mut asked = TopicPartitionList::new();
    asked.add_partition(topic, partition);
    let got = consumer
        .committed_offsets(asked, Duration::from_secs(10))
        .expect("committed offsets");
    got.find_partition(topic, partition)
        .expect("asked")
        .offset()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browse_across_partitions_then_remove_from_the_heads() {
    let topic = support::unique("inspect");
    support::create_topic(&topic, 2).await;
    let producer: FutureProducer = support::config().create().expect("producer");
    for (partition, payload) in [(0, "a"), (1, "b"), (0, "c"), (1, "d"), (0, "e")] {
        send(&producer, &topic, partition, payload).await;
    }
    let broker = broker().await;
    let inspect = broker.inspect().expect("inspects");
    let address = Address::from(topic.as_str());

    let waiting = inspect.browse(&address, 10).await.expect("browsed");
    assert_eq!(payloads(&waiting), ["a", "b", "c", "d", "e"]);
    let ids: Vec<&str> = waiting.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["0:0", "1:0", "0:1", "1:1", "0:2"]);
    assert_eq!(
        waiting[0]
            .message
            .headers
            .get("x-binary")
            .map(|v| v.as_bytes().to_vec()),
        Some(vec![0xff, 0])
    );
    assert_eq!(
        payloads(&inspect.browse(&address, 2).await.expect("browsed")),
        ["a", "b"]
    );
    let again = inspect.browse(&address, 10).await.expect("browsed again");
    assert_eq!(again, waiting, "browsing changes nothing");
    assert_eq!(
        committed(&topic, 0),
        Offset::Invalid,
        "browsing commits nothing"
    );

    let asked = ["junk", "0:99", "7:0", "-1:0"].map(str::to_owned);
    assert_eq!(inspect.remove(&address, &asked).await.expect("none"), 0);
    let heads = ["0:0", "1:0", "0:1"].map(str::to_owned);
    assert_eq!(inspect.remove(&address, &heads).await.expect("removed"), 3);
    assert_eq!(inspect.remove(&address, &heads).await.expect("gone"), 0);
    assert_eq!(
        payloads(&inspect.browse(&address, 10).await.expect("browsed")),
        ["d", "e"]
    );
    assert_eq!(committed(&topic, 0), Offset::Offset(2));
    assert_eq!(committed(&topic, 1), Offset::Offset(1));

    // A new broker (another process) sees the same.
    let other = KafkaBroker::connect(&support::url())
        .await
        .expect("connects");
    let seen = other
        .inspect()
        .expect("inspects")
        .browse(&address, 10)
        .await;
    assert_eq!(payloads(&seen.expect("browsed")), ["d", "e"]);
    let rest = ["1:1".to_owned(), "0:2".to_owned()];
    assert_eq!(inspect.remove(&address, &rest).await.expect("removed"), 2);
    assert!(
        inspect
            .browse(&address, 10)
            .await
            .expect("browsed")
            .is_empty()
    );
    other.close().await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mounts_dead_letters_are_listed_with_their_reason() {
    let topic = support::unique("inspect-mount");
    support::create_topic(&topic, 1).await;
    let dead = format!("{topic}.dead");
    let broker = broker().await;
    let publisher = broker.publisher();
    let running = App::new(broker.clone())
        .mount(
            Mount::new(topic.as_str())
                .max_attempts(1)
                .dead_letter(dead.as_str()),
            |_: String| async { retry() },
        )
        .start()
        .await
        .expect("starts");
    for n in 0..3 {
        publisher
            .publish(
                topic.as_str().into(),
                ruststream_core::Message::new(format!("\"{n}\"")),
            )
            .await
            .expect("published");
    }
    let inspect = broker.inspect().expect("inspects");
    let address = Address::from(dead.as_str());
    let mut waiting = Vec::new();
    for _ in 0..100 {
        waiting = inspect.browse(&address, 10).await.unwrap_or_default();
        if waiting.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(payloads(&waiting), ["\"0\"", "\"1\"", "\"2\""]);
    for w in &waiting {
        assert_eq!(
            w.message.headers.get_str(DEAD_LETTER_FROM),
            Some(topic.as_str())
        );
        assert_eq!(w.message.headers.get_str(DEAD_LETTER_REASON), Some("retry"));
    }
    running.stop().await.expect("a clean stop");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_the_cluster_lacks_is_named() {
    let broker = broker().await;
    let missing = Address::from(support::unique("inspect-missing").as_str());
    let error = broker
        .inspect()
        .expect("inspects")
        .browse(&missing, 10)
        .await
        .expect_err("no such topic");
    assert!(
        matches!(&error, InspectError::Unsupported { reason, .. } if reason.contains("no such topic")),
        "{error}"
    );
    broker.close().await;
}

/// Whether the broker under test returns the metadata committed with an offset (Kafka
/// does; nisshi 0.8.1 stores it and returns none).
fn keeps_commit_metadata() -> bool {
    let topic = support::unique("inspect-metadata");
    support::create_topic_blocking(&topic, 1);
    let mut config = support::config();
    config.set("group.id", support::unique("metadata"));
    let consumer: BaseConsumer = config.create().expect("a client");
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(&topic, 0, Offset::Offset(0))
        .expect("an offset");
    list.find_partition(&topic, 0)
        .expect("added")
        .set_metadata("kept");
    consumer
        .commit(&list, rdkafka::consumer::CommitMode::Sync)
        .expect("committed");
    let mut asked = TopicPartitionList::new();
    asked.add_partition(&topic, 0);
    let got = consumer
        .committed_offsets(asked, Duration::from_secs(10))
        .expect("committed offsets");
    got.find_partition(&topic, 0).expect("asked").metadata() == "kept"
}

/// Kafka: a dead letter behind the first waiting one is noted in the commit's metadata
/// and no longer browsed. nisshi 0.8.1 (docs/kafka.md, "How nisshi differs"): it keeps
/// no metadata, so such a removal fails saying which stay, and nothing else is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_behind_the_head_is_noted_in_the_commit() {
    let topic = support::unique("inspect-behind");
    support::create_topic(&topic, 1).await;
    let producer: FutureProducer = support::config().create().expect("producer");
    for payload in ["a", "b", "c", "d"] {
        send(&producer, &topic, 0, payload).await;
    }
    let broker = broker().await;
    let inspect = broker.inspect().expect("inspects");
    let address = Address::from(topic.as_str());
    let behind = ["0:1".to_owned(), "0:3".to_owned()];
    let kafka = tokio::task::spawn_blocking(keeps_commit_metadata)
        .await
        .expect("asked");
    if kafka {
        assert_eq!(inspect.remove(&address, &behind).await.expect("noted"), 2);
        assert_eq!(inspect.remove(&address, &behind).await.expect("gone"), 0);
        let left = inspect.browse(&address, 10).await.expect("browsed");
        assert_eq!(payloads(&left), ["a", "c"]);
        // Removing the head passes what was noted behind it.
        let head = ["0:0".to_owned()];
        assert_eq!(inspect.remove(&address, &head).await.expect("removed"), 1);
        assert_eq!(committed(&topic, 0), Offset::Offset(2));
    } else {
        let error = inspect
            .remove(&address, &behind)
            .await
            .expect_err("not kept");
        let text = error.to_string();
        assert!(text.contains("0:1, 0:3 stay"), "{text}");
        let left = inspect.browse(&address, 10).await.expect("browsed");
        assert_eq!(payloads(&left), ["a", "b", "c", "d"], "nothing is removed");
        // The head still goes, and only it.
        let head = ["0:0".to_owned(), "0:1".to_owned()];
        assert_eq!(inspect.remove(&address, &head).await.expect("removed"), 2);
        assert_eq!(committed(&topic, 0), Offset::Offset(2));
        let left = inspect.browse(&address, 10).await.expect("browsed");
        assert_eq!(payloads(&left), ["c", "d"]);
    }
    broker.close().await;
}
