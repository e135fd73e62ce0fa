//! Whether a Kafka-protocol broker hands a consumer that follows a partition's tail every
//! record that several producers write to that partition at once, with plain rdkafka
//! clients (no adapter): the check behind the nisshi row "a fetch can skip a record
//! still being written" in `docs/kafka.md`.
//!
//! Each round makes a topic of one partition; `PRODUCERS` idempotent producers (`acks=all`,
//! each on its own connection, `linger.ms=0`) write `RECORDS` records each
//! while one consumer reads the partition from its start, as close to the tail as it
//! can. Then a second consumer reads the partition again from its start. A record the
//! broker acknowledged and the second reader finds, but the first never got, was skipped
//! by a fetch: the first reader moved past it and never asked for it again. On Kafka the
//! count is 0: a fetch never returns a record above one that is not readable yet.
//!
//! ```text
//! cargo run --release -p ruststream-kafka --example fetch_gap -- [BOOTSTRAP] [PRODUCERS] [RECORDS] [ROUNDS]
//! ```
//!
//! Defaults: `127.0.0.1:9092` (`scripts/kafka.sh start`), 4 producers, 20,000 records
//! each, 5 rounds; `FETCH_GAP_BATCH=n` caps a producer's batches at `n` records (more
//! requests racing; librdkafka's default 10,000). Prints each round's counts and the
//! first records skipped; exits 1 where a record was skipped, an acknowledged record is
//! missing or a publish failed.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

/// Records a producer has under way at once.
const WINDOW: usize = 1_000;

fn config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    config
}

/// A consumer of `topic`'s one partition from its start, following its tail closely, in
/// a group of its own named after `who`.
fn reader(bootstrap: &str, topic: &str, who: &str) -> StreamConsumer {
    let consumer: StreamConsumer = config(bootstrap)
        .set("group.id", format!("{topic}-{who}"))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "5")
        .set("fetch.queue.backoff.ms", "0")
        .create()
        .expect("a consumer");
    let mut partition = TopicPartitionList::new();
    partition
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("an offset");
    consumer.assign(&partition).expect("assigned");
    consumer
}

/// Reads `consumer` until `end` (the partition's high watermark, once known) is reached
/// or nothing comes for `quiet`: each record's payload and offset.
async fn read(
    consumer: &StreamConsumer,
    end: &tokio::sync::watch::Receiver<Option<i64>>,
    quiet: Duration,
) -> BTreeMap<String, i64> {
    let mut end = end.clone();
    let mut got = BTreeMap::new();
    let mut next = 0;
    loop {
        let known = *end.borrow_and_update();
        if known.is_some_and(|end| next >= end) {
            return got;
        }
        tokio::select! {
            received = tokio::time::timeout(quiet, consumer.recv()) => match received {
                Ok(Ok(message)) => {
                    let payload = String::from_utf8_lossy(message.payload().unwrap_or_default());
                    got.insert(payload.into_owned(), message.offset());
                    next = message.offset() + 1;
                }
                Ok(Err(error)) => eprintln!("read: {error}"),
                Err(_) if known.is_some() => return got,
                Err(_) => {}
            },
            // The end became known: looked at again above.
            changed = end.changed(), if known.is_none() => {
                if changed.is_err() {
                    return got;
                }
            }
        }
    }
}

/// Writes `records` records `"{producer}-{n}"`, [`WINDOW`] under way at once: those
/// the broker acknowledged, and how many were not (the first error printed).
async fn write(
    bootstrap: String,
    topic: String,
    producer: usize,
    records: usize,
) -> (Vec<String>, usize) {
    let client: FutureProducer = config(&bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set(
            "batch.num.messages",
            std::env::var("FETCH_GAP_BATCH").unwrap_or_else(|_| "10000".into()),
        )
        .create()
        .expect("a producer");
    let mut acknowledged = Vec::with_capacity(records);
    let mut failed = 0;
    let mut tally = |sent: Result<String, rdkafka::error::KafkaError>| match sent {
        Ok(payload) => acknowledged.push(payload),
        Err(error) => {
            if failed == 0 {
                eprintln!("producer {producer}: {error}");
            }
            failed += 1;
        }
    };
    let mut under_way = FuturesUnordered::new();
    for n in 0..records {
        let payload = format!("{producer}-{n}");
        let client = &client;
        let topic = &topic;
        under_way.push(async move {
            let sent = client
                .send(
                    FutureRecord::<(), _>::to(topic)
                        .partition(0)
                        .payload(&payload),
                    Duration::from_secs(30),
                )
                .await;
            sent.map(|_| payload).map_err(|(error, _)| error)
        });
        if under_way.len() >= WINDOW
            && let Some(sent) = under_way.next().await
        {
            tally(sent);
        }
    }
    while let Some(sent) = under_way.next().await {
        tally(sent);
    }
    (acknowledged, failed)
}

async fn round(bootstrap: &str, producers: usize, records: usize, round: usize) -> bool {
    let topic = format!("fetch-gap-{}-{round}", std::process::id());
    let admin: AdminClient<DefaultClientContext> = config(bootstrap).create().expect("admin");
    for created in admin
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("topic")
    {
        created.unwrap_or_else(|(name, error)| panic!("cannot create {name}: {error}"));
    }
    let (known, end) = tokio::sync::watch::channel(None);
    let tail = reader(bootstrap, &topic, "follower");
    let following = tokio::spawn({
        let end = end.clone();
        async move { read(&tail, &end, Duration::from_secs(20)).await }
    });
    let started = Instant::now();
    let writers: Vec<_> = (0..producers)
        .map(|p| tokio::spawn(write(bootstrap.to_owned(), topic.clone(), p, records)))
        .collect();
    let mut acknowledged = HashSet::new();
    let mut failed = 0;
    for writer in writers {
        let (written, not) = writer.await.expect("a writer");
        acknowledged.extend(written);
        failed += not;
    }
    let took = started.elapsed();
    let high = high_watermark(bootstrap, &topic);
    known.send_replace(Some(high));
    let followed = following.await.expect("the follower");
    let again = reader(bootstrap, &topic, "again");
    let stored = read(&again, &end, Duration::from_secs(20)).await;
    let skipped: Vec<_> = stored
        .iter()
        .filter(|(payload, _)| !followed.contains_key(*payload))
        .collect();
    let missing = acknowledged
        .iter()
        .filter(|payload| !stored.contains_key(*payload))
        .count();
    println!(
        "round {round}: {} acknowledged ({failed} not) in {:.1} s, {} stored (high watermark \
         {high}), {} read by the follower, {} skipped by it, {missing} acknowledged and \
         not stored",
        acknowledged.len(),
        took.as_secs_f64(),
        stored.len(),
        followed.len(),
        skipped.len(),
    );
    for (payload, offset) in skipped.iter().take(10) {
        println!("  skipped: {payload} at offset {offset}");
    }
    // Gone once counted: a broker keeping every round's topic gets slower round by round.
    if let Err(error) = admin.delete_topics(&[&topic], &AdminOptions::new()).await {
        eprintln!("cannot delete {topic}: {error}");
    }
    skipped.is_empty() && missing == 0 && failed == 0
}

/// `topic`'s partition 0's high watermark.
fn high_watermark(bootstrap: &str, topic: &str) -> i64 {
    let consumer: StreamConsumer = config(bootstrap)
        .set("group.id", format!("{topic}-watermark"))
        .create()
        .expect("a client");
    consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bootstrap = args.first().map_or("127.0.0.1:9092", String::as_str);
    let number = |i: usize, default: usize| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a whole number"))
    };
    let (producers, records, rounds) = (number(1, 4), number(2, 20_000), number(3, 5));
    let mut clean = true;
    for n in 0..rounds {
        clean &= round(bootstrap, producers, records, n).await;
    }
    if !clean {
        std::process::exit(1);
    }
}
