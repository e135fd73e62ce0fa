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
//!
//! With `FETCH_GAP_FOLLOWER=adapter` the follower is the adapter's default mount (a
//! `ruststream::App` on `KafkaBroker`, acking each record) in place of a plain consumer,
//! and the example also counts the skipped records that lie where the adapter said its
//! fetch passed over offsets (its `ruststream_kafka::gap` events): a skipped record
//! outside every such stretch was read by the adapter and lost, and is counted apart.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use ruststream::{App, Mount, Outcome, Raw, State, ack};
use ruststream_kafka::KafkaBroker;
use tokio::sync::Notify;
use tracing_subscriber::layer::{Context, SubscriberExt as _};

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
    reading: Option<&Notify>,
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
                    if let Some(reading) = reading {
                        reading.notify_one();
                    }
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

/// The stretches `from..to` the adapter said its fetch passed over.
#[derive(Clone, Default)]
struct PassedOver(Arc<Mutex<Vec<(i64, i64)>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PassedOver {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Bounds(Option<i64>, Option<i64>);
        impl tracing::field::Visit for Bounds {
            fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
                match field.name() {
                    "from" => self.0 = Some(value),
                    "to" => self.1 = Some(value),
                    _ => {}
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        if event.metadata().target() != "ruststream_kafka::gap" {
            return;
        }
        let mut bounds = Bounds(None, None);
        event.record(&mut bounds);
        if let Bounds(Some(from), Some(to)) = bounds {
            let mut stretches = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            stretches.push((from, to));
        }
    }
}

/// The payloads the adapter's follower handled, and its signal that it is reading.
#[derive(Clone, Default)]
struct Handled {
    seen: Arc<Mutex<HashSet<String>>>,
    reading: Arc<Notify>,
}

async fn handled(State(handled): State<Handled>, Raw(payload): Raw) -> Outcome {
    let payload = String::from_utf8_lossy(&payload).into_owned();
    let mut seen = handled.seen.lock().unwrap_or_else(PoisonError::into_inner);
    seen.insert(payload);
    handled.reading.notify_one();
    ack()
}

/// The adapter's default mount on `topic` until it handled `end` records, or `end` is
/// known and nothing more came for `quiet` (counted from its first record: joining the
/// group takes a while): the payloads it handled.
async fn follow(
    bootstrap: &str,
    topic: &str,
    mut end: tokio::sync::watch::Receiver<Option<i64>>,
    quiet: Duration,
    reading: Arc<Notify>,
) -> HashSet<String> {
    let broker = KafkaBroker::connect(&format!("kafka://{bootstrap}"))
        .await
        .expect("connect");
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let running = App::new(broker)
        .state(Handled {
            seen: seen.clone(),
            reading,
        })
        .mount(Mount::new(topic), handled)
        .start()
        .await
        .expect("start");
    let count = || seen.lock().unwrap_or_else(PoisonError::into_inner).len();
    let (mut last, mut since) = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = count();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        let known = *end.borrow_and_update();
        let read_all = known.is_some_and(|end| i64::try_from(now).is_ok_and(|now| now >= end));
        if read_all || (known.is_some() && now > 0 && since.elapsed() >= quiet) {
            break;
        }
    }
    running.stop().await.expect("stop");
    std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner))
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

async fn round(
    bootstrap: &str,
    producers: usize,
    records: usize,
    round: usize,
    passed: Option<&PassedOver>,
) -> bool {
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
    // The follower reads a first record before the producers start, so that it follows
    // the tail while they write (a group takes a while to join).
    let reading = Arc::new(Notify::new());
    let following = tokio::spawn({
        let (end, bootstrap, topic) = (end.clone(), bootstrap.to_owned(), topic.clone());
        let (adapter, reading) = (passed.is_some(), reading.clone());
        async move {
            if adapter {
                follow(&bootstrap, &topic, end, Duration::from_secs(3), reading).await
            } else {
                let tail = reader(&bootstrap, &topic, "follower");
                let read = read(&tail, &end, Duration::from_secs(20), Some(&reading)).await;
                read.into_keys().collect()
            }
        }
    });
    let first: FutureProducer = config(bootstrap).create().expect("a producer");
    first
        .send(
            FutureRecord::<(), _>::to(&topic)
                .partition(0)
                .payload("first"),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(error, _)| error)
        .expect("the first record");
    tokio::time::timeout(Duration::from_secs(60), reading.notified())
        .await
        .expect("the follower reads within a minute");
    if let Some(passed) = passed {
        passed
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
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
    let stored = read(&again, &end, Duration::from_secs(20), None).await;
    let skipped: Vec<_> = stored
        .iter()
        .filter(|(payload, _)| !followed.contains(*payload))
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
    let mut lost = 0;
    if let Some(passed) = passed {
        let stretches = passed
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let inside = |offset: i64| {
            stretches
                .iter()
                .any(|&(from, to)| (from..to).contains(&offset))
        };
        lost = skipped
            .iter()
            .filter(|(_, offset)| !inside(**offset))
            .count();
        println!(
            "  the adapter said its fetch passed over {} stretches {:?}; skipped outside them \
             (read by the adapter and lost): {lost}",
            stretches.len(),
            &stretches[..stretches.len().min(5)],
        );
    }
    // Gone once counted: a broker keeping every round's topic gets slower round by round.
    if let Err(error) = admin.delete_topics(&[&topic], &AdminOptions::new()).await {
        eprintln!("cannot delete {topic}: {error}");
    }
    skipped.is_empty() && missing == 0 && failed == 0 && lost == 0
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
    let passed = (std::env::var("FETCH_GAP_FOLLOWER").as_deref() == Ok("adapter")).then(|| {
        let passed = PassedOver::default();
        let subscriber = tracing_subscriber::registry().with(passed.clone());
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        passed
    });
    let mut clean = true;
    for n in 0..rounds {
        clean &= round(bootstrap, producers, records, n, passed.as_ref()).await;
    }
    if !clean {
        std::process::exit(1);
    }
}
