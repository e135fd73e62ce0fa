//! Consume throughput and CPU time per message (this process's and the broker's) on a
//! Kafka-protocol broker, each record's 512-byte JSON decoded (serde) into the same
//! struct before it counts as done:
//!
//! * `raw-each`: an rdkafka `StreamConsumer` (classic group, auto commit off) that
//!   commits every record synchronously before the next: the plain loop;
//! * `raw-batched`: the same consumer storing each record's offset and committing
//!   asynchronously every 64 records (a synchronous commit at the end): the fastest loop
//!   that still commits only what it handled;
//! * `raw-sync-batched`: the same, but each commit of 64 synchronous (the next record
//!   waits for it), as the framework commits; it prints the median and the slowest
//!   commit of the run, to tell the broker's commit time from the adapter's;
//! * `framework`: a `ruststream::App` on `KafkaBroker`, one mount with an
//!   `async fn(Order) -> Outcome` returning `ack()`, default (sequential) handling;
//! * `framework-workers`: the same mount with `workers(64)`;
//! * `framework-key-order`: the default mount with `KeyOrder` (every record has a key of
//!   its own, so each is admitted, held by nobody and released).
//!
//! ```text
//! cargo run --release -p ruststream-kafka --example bench -- [URL] [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: `kafka://127.0.0.1:9092`, 20000 messages, 3 rounds; `BENCH_ONLY=a,b` runs
//! those variants only; `BENCH_FILL_LINGER_MS` sets the filling producer's `linger.ms`
//! (5 by default; more makes fewer, larger batches in the log); `BENCH_TENTHS` prints a
//! framework run's rate over each tenth of its records. Each variant gets a
//! fresh topic of 3 partitions filled beforehand (not timed) and a new group; the order
//! of the variants rotates from round to round. Timing: from the first record handled to
//! the last one committed (the framework: settled, which is after its commit). Every run
//! prints its msg/s and the client's and the broker's CPU µs per message over that
//! window; at the end a markdown table gives the medians. The broker's CPU time is read
//! from `/proc/<pid>/stat` of the process listening on the URL's port.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message as _};
use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_conformance::cpu::{
    Countdown, FirstRecord, Order, Run, Window, chosen, listener, markdown_table, order_json,
    port_of,
};
use ruststream_kafka::KafkaBroker;

/// The broker's process, for its CPU time (found once, from the URL's port).
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

/// The framework's window, started by the first record its handler sees.
static STARTED: FirstRecord = FirstRecord::new();

/// A measured window, with the broker's CPU time where its process was found.
fn window() -> Window {
    Window::start(BROKER.get().copied().flatten())
}

async fn handle(order: Order) -> Outcome {
    STARTED.seen(BROKER.get().copied().flatten());
    std::hint::black_box((order.id, order.pad.len()));
    ack()
}

fn config(servers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", servers);
    config
}

/// A fresh topic of 3 partitions holding `n` records.
async fn fill(servers: &str, topic: &str, n: usize) {
    let admin: AdminClient<DefaultClientContext> = config(servers).create().expect("admin");
    let made = admin
        .create_topics(
            &[NewTopic::new(topic, 3, TopicReplication::Fixed(-1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create topic");
    for result in made {
        result.expect("topic made");
    }
    let linger = std::env::var("BENCH_FILL_LINGER_MS").unwrap_or_else(|_| "5".into());
    let producer: FutureProducer = config(servers)
        .set("linger.ms", linger)
        .create()
        .expect("producer");
    let mut sent = FuturesUnordered::new();
    for id in 0..n {
        let body = order_json(id);
        let key = id.to_string();
        let record = FutureRecord::to(topic).payload(&body).key(&key);
        let report = producer
            .send_result(record)
            .map_err(|(error, _)| error)
            .expect("queued");
        sent.push(report);
        if sent.len() >= 1024 {
            sent.next()
                .await
                .expect("report")
                .expect("delivered")
                .expect("stored");
        }
    }
    while let Some(report) = sent.next().await {
        report.expect("delivered").expect("stored");
    }
}

/// A raw consumer loop: every record committed (`every` = 1, synchronously), or offsets
/// stored and committed every `every` records, asynchronously unless `sync`. The
/// synchronous commits' median and slowest time are printed.
async fn raw(servers: &str, topic: &str, n: usize, every: usize, sync: bool) -> Run {
    let consumer: StreamConsumer = config(servers)
        .set("group.id", format!("{topic}.raw"))
        .set("group.protocol", "classic")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut started = None;
    let mut commits = Vec::new();
    for i in 1..=n {
        let record = consumer.recv().await.expect("record");
        started.get_or_insert_with(window);
        let order: Order =
            serde_json::from_slice(record.payload().unwrap_or_default()).expect("json");
        std::hint::black_box((order.id, order.pad.len()));
        if every == 1 {
            let asked = Instant::now();
            consumer
                .commit_message(&record, CommitMode::Sync)
                .expect("commit");
            commits.push(asked.elapsed());
        } else {
            consumer.store_offset_from_message(&record).expect("store");
            if i % every == 0 && sync {
                let asked = Instant::now();
                consumer
                    .commit_consumer_state(CommitMode::Sync)
                    .expect("commit");
                commits.push(asked.elapsed());
            } else if i % every == 0 {
                consumer
                    .commit_consumer_state(CommitMode::Async)
                    .expect("commit");
            }
        }
    }
    // The last records' commit, unless a synchronous one of every `every` just made it.
    if every > 1 && !(sync && n.is_multiple_of(every)) {
        consumer
            .commit_consumer_state(CommitMode::Sync)
            .expect("last commit");
    }
    let run = started.expect("started").end(n);
    commits.sort();
    if let (Some(median), Some(slowest)) = (commits.get(commits.len() / 2), commits.last()) {
        let waited: Duration = commits.iter().sum();
        println!(
            "  {} synchronous commits: median {median:.1?}, slowest {slowest:.1?}, {waited:.2?} in all",
            commits.len()
        );
    }
    run
}

/// The framework's run with the default sequential mount, or with `workers(n)`, or with
/// key order.
async fn framework(
    url: &str,
    topic: &str,
    n: usize,
    workers: Option<usize>,
    key_order: bool,
) -> Run {
    STARTED.reset();
    let broker = KafkaBroker::connect(url).await.expect("connect");
    let countdown = Countdown::new(n);
    let tenths = std::env::var_os("BENCH_TENTHS").map(|_| Arc::new(Tenths::new(n)));
    let counting = countdown.clone();
    let mut mount = Mount::new(topic);
    if let Some(workers) = workers {
        mount = mount.workers(workers);
    }
    if key_order {
        mount = mount.option(ruststream_kafka::KeyOrder);
    }
    let running = App::new(broker)
        .mount(mount, handle)
        .after_settle(move |record: &Settled| {
            counting.settled(record.is_ok(), |n| STARTED.end(n));
            if let Some(tenths) = &tenths {
                tenths.settled();
            }
        })
        .start()
        .await
        .expect("start");
    let run = countdown.finished().await;
    running.stop().await.expect("stop");
    run
}

/// With `BENCH_TENTHS` set, a framework run prints its rate over each tenth of its
/// records after the first: a stop in the middle of a run shows as one slow tenth.
struct Tenths {
    n: usize,
    settled: AtomicUsize,
    marks: Mutex<Vec<Instant>>,
}

impl Tenths {
    fn new(n: usize) -> Self {
        Self {
            n,
            settled: AtomicUsize::new(0),
            marks: Mutex::new(Vec::with_capacity(10)),
        }
    }

    fn settled(&self) {
        let step = (self.n / 10).max(1);
        let k = self.settled.fetch_add(1, Ordering::Relaxed) + 1;
        if !k.is_multiple_of(step) {
            return;
        }
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        marks.push(Instant::now());
        if k == step * 10 {
            let rates: Vec<String> = marks
                .windows(2)
                .map(|w| format!("{:.0}", step as f64 / (w[1] - w[0]).as_secs_f64()))
                .collect();
            println!(
                "  msg/s over each tenth after the first: {}",
                rates.join(" ")
            );
        }
    }
}

/// The `workers(n)` of the `framework-workers` variant.
const WORKERS: usize = 64;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "kafka://127.0.0.1:9092".into());
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let servers = url
        .split_once("://")
        .map_or(url.as_str(), |(_, rest)| rest)
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    let port = port_of(&url, 9092);
    let server = BROKER.get_or_init(|| listener(port));
    println!("broker process on port {port}: {server:?} (its CPU time is measured where found)");
    let variants = [
        "raw-each",
        "raw-batched",
        "raw-sync-batched",
        "framework",
        "framework-workers",
        "framework-key-order",
    ];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    let stamp = std::process::id();
    for round in 0..rounds {
        for k in 0..variants.len() {
            let v = (k + round) % variants.len();
            if !chosen(variants[v]) {
                continue;
            }
            let topic = format!("rsbench-{stamp}-{round}-{}", variants[v]);
            fill(&servers, &topic, n).await;
            let run = match variants[v] {
                "raw-each" => raw(&servers, &topic, n, 1, true).await,
                "raw-batched" => raw(&servers, &topic, n, 64, false).await,
                "raw-sync-batched" => raw(&servers, &topic, n, 64, true).await,
                "framework" => framework(&url, &topic, n, None, false).await,
                "framework-key-order" => framework(&url, &topic, n, None, true).await,
                _ => framework(&url, &topic, n, Some(WORKERS), false).await,
            };
            println!("round {round} {:<18} {run}", variants[v]);
            runs[v].push(run);
        }
    }
    let variants: Vec<(&str, Vec<Run>)> = variants.into_iter().zip(runs).collect();
    println!("Kafka (nisshi 0.8.1): medians of {rounds} rounds of {n}");
    print!("{}", markdown_table(&variants));
}
