//! Proves the broker under test with plain rdkafka clients, before the adapter relies on
//! it: two consumers of one classic group share a three-partition topic; when one is
//! dropped the other takes its partitions and goes on from the offsets committed for
//! them, and committed offsets read back as written; and an idempotent producer's records
//! the broker acknowledged are all there after a network black hole longer than
//! librdkafka's request timeout. Needs a Kafka-protocol broker (`scripts/kafka.sh`;
//! `RUSTSTREAM_KAFKA_URL`, default `kafka://127.0.0.1:9092`), and the nisshi it builds for
//! a broker of the test's own.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use ruststream_conformance::proxy::Proxy;
use ruststream_core::Broker as _;
use ruststream_kafka::KafkaBroker;

type Seen = Arc<Mutex<Vec<(i32, i64)>>>;

fn consumer(group: &str, topic: &str) -> Arc<StreamConsumer> {
    let consumer: StreamConsumer = support::config()
        .set("group.id", group)
        .set("group.protocol", "classic")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    Arc::new(consumer)
}

/// Reads and commits every message, recording its partition and offset.
fn run(consumer: Arc<StreamConsumer>, seen: Seen) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok(Ok(message)) =
                tokio::time::timeout(Duration::from_millis(200), consumer.recv()).await
            else {
                continue;
            };
            consumer
                .commit_message(&message, CommitMode::Sync)
                .expect("commit");
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((message.partition(), message.offset()));
        }
    })
}

fn partitions(consumer: &StreamConsumer) -> BTreeSet<i32> {
    consumer
        .assignment()
        .expect("assignment")
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect()
}

async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn produce(producer: &FutureProducer, topic: &str, per_partition: i64) {
    for partition in 0..3 {
        for n in 0..per_partition {
            let payload = format!("{partition}-{n}");
            producer
                .send(
                    FutureRecord::<(), _>::to(topic)
                        .partition(partition)
                        .payload(&payload),
                    Duration::from_secs(10),
                )
                .await
                .unwrap_or_else(|(error, _)| panic!("produce: {error}"));
        }
    }
}

fn committed(consumer: &StreamConsumer, topic: &str) -> BTreeMap<i32, Offset> {
    let mut wanted = TopicPartitionList::new();
    for partition in 0..3 {
        wanted.add_partition(topic, partition);
    }
    let offsets = consumer
        .committed_offsets(wanted, Duration::from_secs(10))
        .expect("committed offsets");
    offsets
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_hands_a_dropped_consumers_partitions_to_the_other() {
    let (topic, group) = (support::unique("probe"), support::unique("group"));
    support::create_topic(&topic, 3).await;
    let producer: FutureProducer = support::config()
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("producer");
    produce(&producer, &topic, 3).await;

    let (a, b) = (consumer(&group, &topic), consumer(&group, &topic));
    let (seen_a, seen_b) = (Seen::default(), Seen::default());
    let task_a = run(a.clone(), seen_a.clone());
    let task_b = run(b.clone(), seen_b.clone());
    until(
        "both consumers to share the partitions",
        Duration::from_secs(30),
        || {
            let (pa, pb) = (partitions(&a), partitions(&b));
            !pa.is_empty() && !pb.is_empty() && pa.is_disjoint(&pb) && pa.len() + pb.len() == 3
        },
    )
    .await;
    let count = |seen: &Seen| seen.lock().unwrap_or_else(PoisonError::into_inner).len();
    until("the nine messages", Duration::from_secs(30), || {
        count(&seen_a) + count(&seen_b) == 9
    })
    .await;
    let first: BTreeMap<i32, Offset> = (0..3).map(|p| (p, Offset::Offset(3))).collect();
    assert_eq!(
        committed(&a, &topic),
        first,
        "the offsets committed, fetched back"
    );

    // B goes: closing it leaves the group, and A is given every partition.
    let taken_from_b = partitions(&b);
    task_b.abort();
    let _ = task_b.await;
    drop(b);
    until("A to take B's partitions", Duration::from_secs(30), || {
        partitions(&a).len() == 3
    })
    .await;

    // A reads B's partitions from the offsets B committed: only the new messages.
    seen_a
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    produce(&producer, &topic, 1).await;
    until("the three new messages", Duration::from_secs(30), || {
        count(&seen_a) == 3
    })
    .await;
    let got: BTreeSet<(i32, i64)> = seen_a
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .collect();
    assert_eq!(
        got,
        (0..3).map(|p| (p, 3)).collect(),
        "B had {taken_from_b:?}"
    );
    let second: BTreeMap<i32, Offset> = (0..3).map(|p| (p, Offset::Offset(4))).collect();
    assert_eq!(committed(&a, &topic), second);
    task_a.abort();
}

/// The adapter's publisher with its defaults (idempotent, `acks=all`, a publish failed
/// after 30 s without the broker's answer), through a proxy that forwards nothing for
/// 35 s while records are being published: librdkafka's requests time out, records
/// fail, and the producer goes on after the hole with its sequence numbers reset. Every
/// publish that succeeded is stored, none twice. A broker that answered a record sent
/// again as a duplicate without having stored it would lose it here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_a_black_hole_past_the_request_timeout() {
    const N: u32 = 6_000;
    // The proxy binds a port of its own first; the broker advertises it.
    let port = support::free_port();
    let proxy = Proxy::start(&format!("127.0.0.1:{port}")).await;
    let broker = support::OwnBroker::advertising(port, proxy.port());
    let topic = support::unique("probe-hole");
    support::create_topic_on(broker.config(), &topic, 3).await;
    let kafka = KafkaBroker::connect(&broker.url())
        .await
        .expect("connected through the proxy");
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..N {
        if i == N / 4 {
            proxy.stall();
        }
        if i == N / 4 + 200 {
            tokio::time::sleep(Duration::from_secs(35)).await;
            proxy.resume();
        }
        let (kafka, topic) = (kafka.clone(), topic.clone());
        sends.spawn(async move {
            let sent = Instant::now();
            let published = kafka
                .publisher()
                .publish(
                    topic.as_str().into(),
                    ruststream_core::Message::new(i.to_string()),
                )
                .await;
            (i, published.err().map(|e| e.to_string()), sent.elapsed())
        });
        if i % 500 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let (mut acknowledged, mut failed, mut longest) = (BTreeSet::new(), 0, Duration::ZERO);
    let mut why = BTreeMap::<String, u32>::new();
    while let Some(sent) = sends.join_next().await {
        let (i, error, took) = sent.expect("joined");
        match error {
            None => {
                acknowledged.insert(i);
            }
            Some(error) => {
                failed += 1;
                *why.entry(error).or_insert(0) += 1;
            }
        }
        longest = longest.max(took);
    }
    assert!(
        longest >= Duration::from_secs(25),
        "the hole held publishes: longest {longest:?}"
    );
    assert!(
        acknowledged.len() > N as usize / 2,
        "publishing went on after the hole: {} acknowledged, {failed} failed",
        acknowledged.len()
    );
    kafka.close().await;

    let reader: StreamConsumer = broker
        .config()
        .set("group.id", support::unique("probe-hole"))
        .set("group.protocol", "classic")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    reader.subscribe(&[&topic]).expect("subscribe");
    let mut stored = BTreeMap::<u32, u32>::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Everything acknowledged, then 3 s of nothing (a record stored twice comes within them).
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(3), reader.recv()).await {
            Ok(Ok(record)) => {
                let i = std::str::from_utf8(record.payload().unwrap_or_default())
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .expect("a number");
                *stored.entry(i).or_default() += 1;
            }
            Err(_) if acknowledged.iter().all(|i| stored.contains_key(i)) => break,
            _ => {}
        }
    }
    let missing: Vec<u32> = acknowledged
        .iter()
        .filter(|i| !stored.contains_key(i))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged and not stored: {missing:?}"
    );
    let twice: Vec<u32> = stored
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(i, _)| *i)
        .collect();
    assert!(twice.is_empty(), "stored twice: {twice:?}");
    eprintln!(
        "{} acknowledged, {failed} failed ({why:?}), {} stored (failed ones stored too: {}), longest {longest:?}",
        acknowledged.len(),
        stored.len(),
        stored.len() - acknowledged.len()
    );
}
