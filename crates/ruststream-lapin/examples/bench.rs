//! Consume throughput and CPU time per message (this process's and the broker's), six
//! ways, every message's 512-byte JSON decoded (serde) into the same struct and then
//! acked:
//!
//! * `raw`: a raw lapin consumer loop (prefetch 256): next delivery, decode, `ack` awaited;
//! * `raw-trailing`: the same loop with the acks not awaited in line but trailing (up to
//!   64 under way, as the framework's sequential loop lets them trail);
//! * `raw-multiple`: the raw loop acking with `basic.ack multiple=true` every 64
//!   deliveries, awaited (usually the fastest raw loop);
//! * `adapter`: this adapter's subscription stream, decoded and settled by hand;
//! * `framework`: a `ruststream::App` on `LapinBroker` with one mounted `async fn` that
//!   takes the decoded struct and returns `ack()`, with the default mount (sequential
//!   handling, its default prefetch; `BENCH_PREFETCH=n` sets one);
//! * `framework-workers`: the same mount with `workers(64)`.
//!
//! ```text
//! cargo run --release -p ruststream-lapin --example bench -- [URL] [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: `amqp://guest:guest@127.0.0.1:5672/%2f`, 20000 messages, 5 rounds, on a
//! quorum and a classic queue the bench declares (`rs-lapin-bench-quorum`,
//! `rs-lapin-bench-classic`, expiring an hour after their last use). Each round runs
//! every variant once (the order rotates from round to round), each on its own
//! connection and a queue filled beforehand (not timed). Every run prints its msg/s and
//! the client's and the broker's CPU µs per message over its timed window; at the end a
//! markdown table per queue gives the medians: msg/s, its share of the fastest raw
//! loop's, client and broker µs/msg.
//! `BENCH_ONLY=raw,framework` and `BENCH_QUEUES=quorum` choose what runs;
//! `BENCH_RAW_PREFETCH=n`, `BENCH_RAW_EVERY=n` and `BENCH_RAW_SPIN_NS=n` give
//! `raw-multiple` another prefetch, ack run or a busy wait per message;
//! `BENCH_NO_PAUSE=1` closes right after the last ack. The broker's CPU time is read
//! from `/proc/<pid>/stat` of the process listening on the URL's port (run as root, or
//! as the broker's user, to see it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};
use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_conformance::cpu::{Run, Window, chosen, listener, markdown_table, port_of};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{LapinBroker, SubscribeOptions};
use serde::Deserialize;

const PREFETCH: u16 = 256;

/// The broker's process, for its CPU time (found once, from the URL's port).
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

/// A measured window, with the broker's CPU time where its process was found.
fn window() -> Window {
    Window::start(BROKER.get().copied().flatten())
}

const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What every variant decodes each message into.
#[derive(Debug, Deserialize)]
struct Order {
    id: u64,
    pad: String,
}

impl Order {
    fn consume(&self) {
        std::hint::black_box((self.id, self.pad.len()));
    }
}

fn payload(i: usize) -> String {
    let head = format!("{{\"id\":{i},\"pad\":\"");
    let pad = 512 - head.len() - 2;
    format!("{head}{}\"}}", "x".repeat(pad))
}

async fn declare(url: &str, queue: &str, kind: &str) -> Result<(), Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    let mut args = FieldTable::default();
    let kind = AMQPValue::LongString(LongString::from(kind.as_bytes().to_vec()));
    args.insert("x-queue-type".into(), kind);
    args.insert("x-expires".into(), AMQPValue::LongInt(3_600_000));
    channel
        .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
        .await?;
    connection.close(200, "declared".into()).await?;
    Ok(())
}

async fn fill(url: &str, queue: &str, n: usize) -> Result<(), Error> {
    let broker = LapinBroker::connect(url).await?;
    let publisher = broker.publisher();
    for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
        let sends = chunk.iter().map(|i| {
            let message = Message::new(payload(*i)).with_header("content-type", "application/json");
            publisher.publish(queue.into(), message)
        });
        for r in futures_util::future::join_all(sends).await {
            r?;
        }
    }
    broker.close().await;
    Ok(())
}

async fn drain(url: &str, queue: &str) -> Result<usize, Error> {
    let broker = LapinBroker::connect(url).await?;
    let mut spec = SubscribeSpec::new(queue);
    spec.options
        .insert(SubscribeOptions::new().prefetch(PREFETCH));
    let mut sub = broker.subscribe(spec).await?;
    let mut taken = 0;
    while let Ok(Some(item)) =
        tokio::time::timeout(Duration::from_millis(500), sub.deliveries.next()).await
    {
        item?.settle(Settlement::Accept).await?;
        taken += 1;
    }
    drop(sub);
    broker.close().await;
    Ok(taken)
}

async fn raw(url: &str, queue: &str, n: usize) -> Result<Run, Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .basic_qos(PREFETCH, BasicQosOptions::default())
        .await?;
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "bench-raw".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let window = window();
    for _ in 0..n {
        let delivery = consumer.next().await.ok_or("consumer ended")??;
        let order: Order = serde_json::from_slice(&delivery.data)?;
        order.consume();
        delivery.ack(BasicAckOptions::default()).await?;
    }
    let rate = window.end(n);
    settle_pause().await;
    connection.close(200, "done".into()).await?;
    Ok(rate)
}

async fn raw_trailing(url: &str, queue: &str, n: usize) -> Result<Run, Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .basic_qos(PREFETCH, BasicQosOptions::default())
        .await?;
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "bench-raw".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut acks = futures_util::stream::FuturesUnordered::new();
    let window = window();
    for _ in 0..n {
        let delivery = consumer.next().await.ok_or("consumer ended")??;
        let order: Order = serde_json::from_slice(&delivery.data)?;
        order.consume();
        let acker = delivery.acker;
        acks.push(async move { acker.ack(BasicAckOptions::default()).await });
        while acks.len() >= 64 {
            acks.next().await.ok_or("no ack")??;
        }
        while let Some(Some(done)) = futures_util::FutureExt::now_or_never(acks.next()) {
            done?;
        }
    }
    while let Some(done) = acks.next().await {
        done?;
    }
    let rate = window.end(n);
    settle_pause().await;
    connection.close(200, "done".into()).await?;
    Ok(rate)
}

/// A number from the environment variable `name`, if it is set and one.
fn knob<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.parse().ok()
}

/// The raw loop acknowledging with `basic.ack multiple=true` every 64 deliveries (and
/// the last), the fastest raw loop. `BENCH_RAW_PREFETCH`, `BENCH_RAW_EVERY` and
/// `BENCH_RAW_SPIN_NS` (a busy wait per message) set its prefetch, how many deliveries
/// one ack covers, and how slow it is.
async fn raw_multiple(url: &str, queue: &str, n: usize) -> Result<Run, Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    let prefetch = knob("BENCH_RAW_PREFETCH").unwrap_or(PREFETCH);
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await?;
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "bench-raw".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let every: usize = knob("BENCH_RAW_EVERY").unwrap_or(64).max(1);
    let spin = Duration::from_nanos(knob("BENCH_RAW_SPIN_NS").unwrap_or(0));
    let window = window();
    for i in 1..=n {
        let delivery = consumer.next().await.ok_or("consumer ended")??;
        let order: Order = serde_json::from_slice(&delivery.data)?;
        order.consume();
        let spun = std::time::Instant::now();
        while spun.elapsed() < spin {
            std::hint::spin_loop();
        }
        if i % every == 0 || i == n {
            let options = BasicAckOptions { multiple: true };
            channel.basic_ack(delivery.delivery_tag, options).await?;
        }
    }
    let rate = window.end(n);
    settle_pause().await;
    connection.close(200, "done".into()).await?;
    Ok(rate)
}

async fn adapter(url: &str, queue: &str, n: usize) -> Result<Run, Error> {
    let broker = LapinBroker::connect(url).await?;
    let mut spec = SubscribeSpec::new(queue);
    spec.options
        .insert(SubscribeOptions::new().prefetch(PREFETCH));
    let mut sub = broker.subscribe(spec).await?;
    let window = window();
    for _ in 0..n {
        let delivery = sub.deliveries.next().await.ok_or("stream ended")??;
        let order: Order = serde_json::from_slice(delivery.payload())?;
        order.consume();
        delivery.settle(Settlement::Accept).await?;
    }
    let rate = window.end(n);
    settle_pause().await;
    drop(sub);
    broker.close().await;
    Ok(rate)
}

/// Not timed: a quorum queue may not have applied the last acks when the connection
/// closes right after them, and hands those messages out again (0-9-1 does not confirm
/// acks); the pause lets the bench check that nothing is left without counting those.
async fn settle_pause() {
    if std::env::var_os("BENCH_NO_PAUSE").is_none() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn handle(order: Order) -> Outcome {
    order.consume();
    ack()
}

#[derive(Default)]
struct Progress {
    started: OnceLock<Window>,
    finished: OnceLock<Run>,
    settled: AtomicUsize,
    failed: AtomicUsize,
    done: tokio::sync::Notify,
}

/// The framework's rate with the default sequential mount, or with `workers(n)`; the
/// mount's default prefetch unless `BENCH_PREFETCH` sets one.
async fn framework(url: &str, queue: &str, n: usize, workers: Option<usize>) -> Result<Run, Error> {
    let broker = LapinBroker::connect(url).await?;
    let progress = Arc::new(Progress::default());
    let mut mount = Mount::new(queue);
    if let Some(prefetch) = knob("BENCH_PREFETCH") {
        mount = mount.option(SubscribeOptions::new().prefetch(prefetch));
    }
    if let Some(workers) = workers {
        mount = mount.workers(workers);
    }
    let (on_start, on_settle) = (progress.clone(), progress.clone());
    let app = App::with_broker(Arc::new(broker))
        .mount(mount, handle)
        .on_start(move || {
            let _ = on_start.started.set(window());
        })
        .after_settle(move |settled: &Settled| {
            if !settled.is_ok() {
                on_settle.failed.fetch_add(1, Ordering::Relaxed);
            }
            if on_settle.settled.fetch_add(1, Ordering::AcqRel) + 1 == n {
                if let Some(window) = on_settle.started.get() {
                    let _ = on_settle.finished.set(window.end(n));
                }
                on_settle.done.notify_one();
            }
        });
    let running = app.start().await?;
    let finished = tokio::time::timeout(DRAIN_TIMEOUT, progress.done.notified()).await;
    settle_pause().await;
    running.stop().await?;
    finished.map_err(|_| format!("framework: {:?} settled", progress.settled))?;
    let failed = progress.failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("framework: {failed} settlements failed").into());
    }
    progress
        .finished
        .get()
        .copied()
        .ok_or_else(|| "framework: no timing".into())
}

const VARIANTS: [&str; 6] = [
    "raw",
    "raw-trailing",
    "raw-multiple",
    "adapter",
    "framework",
    "framework-workers",
];

/// The `workers(n)` of the `framework-workers` variant.
const WORKERS: usize = 64;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let n: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |s| s.parse())?;
    let port = port_of(&url, 5672);
    let broker = BROKER.get_or_init(|| listener(port));
    println!("broker process on port {port}: {broker:?} (its CPU time is measured where found)");
    let kinds = std::env::var("BENCH_QUEUES").unwrap_or_else(|_| "quorum,classic".into());
    for kind in kinds.split(',') {
        let queue = format!("rs-lapin-bench-{kind}");
        declare(&url, &queue, kind).await?;
        let drained = drain(&url, &queue).await?;
        if drained > 0 {
            println!("{queue}: drained {drained} left from before");
        }
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); VARIANTS.len()];
        for round in 0..rounds {
            for k in 0..VARIANTS.len() {
                let v = (round + k) % VARIANTS.len();
                if !chosen(VARIANTS[v]) {
                    continue;
                }
                fill(&url, &queue, n).await?;
                let run = match VARIANTS[v] {
                    "raw" => raw(&url, &queue, n).await?,
                    "raw-trailing" => raw_trailing(&url, &queue, n).await?,
                    "raw-multiple" => raw_multiple(&url, &queue, n).await?,
                    "adapter" => adapter(&url, &queue, n).await?,
                    "framework" => framework(&url, &queue, n, None).await?,
                    _ => framework(&url, &queue, n, Some(WORKERS)).await?,
                };
                println!("{kind} round {round} {:<18} {run}", VARIANTS[v]);
                runs[v].push(run);
            }
        }
        let left = drain(&url, &queue).await?;
        println!("{queue}: {left} left after the rounds");
        if left > 0 && std::env::var_os("BENCH_NO_PAUSE").is_some() {
            println!("{queue}: delivered again after closing right after their acks");
        } else if left > 0 {
            return Err(format!("{queue}: {left} messages left after the rounds").into());
        }
        let variants: Vec<(&str, Vec<Run>)> = VARIANTS.iter().copied().zip(runs).collect();
        println!("{kind}: medians of {rounds} rounds of {n}");
        print!("{}", markdown_table(&variants));
    }
    Ok(())
}
