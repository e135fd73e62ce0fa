//! Consume throughput and CPU time per message (this process's and the broker's), five
//! ways, same credit (256), all at-least-once with an `accepted` outcome for every message
//! after its 512-byte JSON has been decoded (serde) into the same struct:
//!
//! * `raw`: a raw fe2o3-amqp receive loop: `recv`, decode, `accept` (one disposition per
//!   message): the baseline of the issue;
//! * `raw-batched`: the same loop accepting what has already arrived in ranged
//!   dispositions (`accept_all`, up to half the credit at a time): a reference for what
//!   fe2o3 can do when the settlements are batched, as the adapter batches them;
//! * `adapter`: this adapter's subscription stream, decoded and settled by hand;
//! * `framework`: a `ruststream::App` on `AmqpBroker` with one mounted `async fn` that
//!   takes the decoded struct and returns `ack()` (sequential handling, the default);
//! * `framework-workers`: the same mount with `workers(64)`.
//!
//! ```text
//! cargo run --release -p ruststream-amqp --example bench -- [URL] [MESSAGES] [ROUNDS] [QUEUES]
//! ```
//!
//! Defaults: `amqp://guest:guest@127.0.0.1:5673`, 20000 messages, 5 rounds; queues
//! `rs.quorum,rs.classic` (from `scripts/rabbitmq4-definitions.json`). Each round runs
//! every variant once, one after the other (the order rotates from round to round), each
//! on its own connection and on a queue filled beforehand with `MESSAGES` messages (the
//! fill is not timed). The queue is drained before the first round and checked empty
//! after the last. Every run prints its msg/s and the client's and the broker's CPU µs
//! per message over its timed window (`framework`: from `on_start` to the last
//! settlement); at the end a markdown table per queue gives the medians: msg/s, its share
//! of the fastest raw loop's, client and broker µs/msg. The broker's CPU time is read
//! from `/proc/<pid>/stat` of the process listening on the URL's port (run as root, or as
//! the broker's user, to see it).
//!
//! Environment: `BENCH_ONLY=framework,raw` runs only those; `BENCH_PERF_CTL=FIFO`
//! turns `perf record -D -1 --control fifo:FIFO` on only while a drain is timed.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::Body;
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::{Connection, Receiver, Session};
use futures_util::{FutureExt, StreamExt};
use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_amqp::{AmqpBroker, SubscribeOptions};
use ruststream_conformance::cpu::{Run, Window, chosen, listener, markdown_table, port_of};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use serde::Deserialize;

const CREDIT: u32 = 256;

/// The `workers(n)` of the `framework-workers` variant.
const WORKERS: usize = 64;

/// The broker's process, for its CPU time (found once, from the URL's port).
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What every variant decodes each message into.
#[derive(Debug, Deserialize)]
struct Order {
    id: u64,
    pad: String,
}

impl Order {
    /// Touches the decoded value so that decoding cannot be optimised away.
    fn consume(&self) {
        std::hint::black_box((self.id, self.pad.len()));
    }
}

/// The start of a timed drain (with the broker's CPU time where its process was found);
/// turns `perf record` on when `BENCH_PERF_CTL` names its control FIFO
/// (`perf record -D -1 --control fifo:PATH`).
fn start() -> Window {
    perf_control("enable");
    Window::start(BROKER.get().copied().flatten())
}

/// The end of a timed drain of `n` messages; turns `perf record` off again.
fn end(window: &Window, n: usize) -> Run {
    let run = window.end(n);
    perf_control("disable");
    run
}

fn perf_control(command: &str) {
    if let Some(path) = std::env::var_os("BENCH_PERF_CTL") {
        let _ = std::fs::write(path, format!("{command}\n"));
    }
}

fn payload(i: usize) -> String {
    let head = format!("{{\"id\":{i},\"pad\":\"");
    let pad = 512 - head.len() - 2;
    format!("{head}{}\"}}", "x".repeat(pad))
}

async fn fill(broker: &AmqpBroker, queue: &str, n: usize) -> Result<(), Error> {
    let publisher = broker.amqp_publisher();
    let to: ruststream_core::Address = queue.into();
    for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
        let sends = chunk.iter().map(|i| {
            publisher.send(
                &to,
                Message::new(payload(*i)).with_header("content-type", "application/json"),
            )
        });
        for r in futures_util::future::join_all(sends).await {
            r?;
        }
    }
    Ok(())
}

/// Takes and accepts whatever is in `queue` (until it has been idle for 500 ms), so
/// that a round starts from an empty queue; returns how many there were.
async fn drain(broker: &AmqpBroker, queue: &str) -> Result<usize, Error> {
    let mut spec = SubscribeSpec::new(queue);
    spec.options.insert(SubscribeOptions::new().credit(CREDIT));
    let mut sub = broker.subscribe(spec).await?;
    let mut taken = 0;
    while let Ok(Some(item)) =
        tokio::time::timeout(Duration::from_millis(500), sub.deliveries.next()).await
    {
        item?.settle(Settlement::Accept).await?;
        taken += 1;
    }
    Ok(taken)
}

/// A raw fe2o3 loop: its own auto credit; `recv`, decode the JSON, then `accept` each
/// delivery (one disposition per message), or, `batched`, take what else has already
/// arrived (up to half the credit), decode each, and accept them all in ranged
/// dispositions (`accept_all`).
async fn raw(url: &str, queue: &str, n: usize, batched: bool) -> Result<Run, Error> {
    let parsed = (url.split('@').nth(1).unwrap_or("127.0.0.1:5673")).to_owned();
    let tcp = tokio::net::TcpStream::connect(parsed.as_str()).await?;
    tcp.set_nodelay(true)?; // as the adapter does: fe2o3 alone does not
    let mut connection = Connection::builder()
        .container_id("bench-raw")
        .sasl_profile(fe2o3_amqp::sasl_profile::SaslProfile::Plain {
            username: "guest".into(),
            password: "guest".into(),
        })
        .open_with_stream(tcp)
        .await?;
    let mut session = Session::begin(&mut connection).await?;
    let mut receiver = Receiver::builder()
        .name("bench-raw")
        .source(format!("/queues/{queue}"))
        .sender_settle_mode(SenderSettleMode::Unsettled)
        .receiver_settle_mode(ReceiverSettleMode::First)
        .credit_mode(CreditMode::Auto(CREDIT))
        .attach(&mut session)
        .await?;
    let batch = (CREDIT / 2) as usize;
    let mut held: Vec<DeliveryInfo> = Vec::with_capacity(batch);
    let mut taken = 0;
    let window = start();
    while taken < n {
        let mut next = Some(receiver.recv::<Body<Value>>().await?);
        while let Some(delivery) = next.take() {
            let Body::Data(data) = delivery.body() else {
                return Err("not a data body".into());
            };
            let order: Order = serde_json::from_slice(&data.first().ok_or("no data section")?.0)?;
            order.consume();
            taken += 1;
            if !batched {
                receiver.accept(&delivery).await?;
                continue;
            }
            held.push(DeliveryInfo::from(delivery));
            if held.len() < batch && taken < n {
                // `recv` is cancel-safe: a transfer not yet arrived stays for the next call.
                next = receiver.recv::<Body<Value>>().now_or_never().transpose()?;
            }
        }
        if !held.is_empty() {
            receiver.accept_all(held.drain(..)).await?;
        }
    }
    let run = end(&window, n);
    receiver.close().await?;
    session.end().await?;
    connection.close().await?;
    Ok(run)
}

/// The adapter: a subscription with the same credit, on a connection of its own;
/// decode, then settle with `Accept`.
async fn adapter(url: &str, queue: &str, n: usize) -> Result<Run, Error> {
    let broker = AmqpBroker::connect(url).await?;
    let mut spec = SubscribeSpec::new(queue);
    spec.options.insert(SubscribeOptions::new().credit(CREDIT));
    let mut sub = broker.subscribe(spec).await?;
    let window = start();
    for _ in 0..n {
        let delivery = sub.deliveries.next().await.ok_or("stream ended")??;
        let order: Order = serde_json::from_slice(delivery.payload())?;
        order.consume();
        delivery.settle(Settlement::Accept).await?;
    }
    let run = end(&window, n);
    drop(sub);
    broker.close().await;
    Ok(run)
}

/// The framework's handler: takes the decoded payload, acknowledges.
async fn handle(order: Order) -> Outcome {
    order.consume();
    ack()
}

/// What the framework variant's hooks record.
#[derive(Default)]
struct Progress {
    started: OnceLock<Window>,
    finished: OnceLock<Run>,
    settled: AtomicUsize,
    failed: AtomicUsize,
    done: tokio::sync::Notify,
}

/// The framework: an `App` on its own `AmqpBroker` connection (stopping the app closes
/// it), one mount with the same credit, sequential handling or `workers(n)`. Timed from
/// `on_start` (subscribed, handling starts) to the `n`th settlement seen by
/// `after_settle`.
async fn framework(url: &str, queue: &str, n: usize, workers: Option<usize>) -> Result<Run, Error> {
    let broker = AmqpBroker::connect(url).await?;
    let progress = Arc::new(Progress::default());
    let mut mount = Mount::new(queue).option(SubscribeOptions::new().credit(CREDIT));
    if let Some(workers) = workers {
        mount = mount.workers(workers);
    }
    let (on_start, on_settle) = (progress.clone(), progress.clone());
    let app = App::with_broker(Arc::new(broker))
        .mount(mount, handle)
        .on_start(move || {
            let _ = on_start.started.set(start());
        })
        .after_settle(move |settled: &Settled| {
            if !settled.is_ok() {
                on_settle.failed.fetch_add(1, Ordering::Relaxed);
            }
            if on_settle.settled.fetch_add(1, Ordering::AcqRel) + 1 == n {
                if let Some(window) = on_settle.started.get() {
                    let _ = on_settle.finished.set(end(window, n));
                }
                on_settle.done.notify_one();
            }
        });
    let running = app.start().await?;
    let finished = tokio::time::timeout(DRAIN_TIMEOUT, progress.done.notified()).await;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Raw,
    RawBatched,
    Adapter,
    Framework,
    FrameworkWorkers,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::RawBatched => "raw-batched",
            Self::Adapter => "adapter",
            Self::Framework => "framework",
            Self::FrameworkWorkers => "framework-workers",
        }
    }
}

const VARIANTS: [Variant; 5] = [
    Variant::Raw,
    Variant::RawBatched,
    Variant::Adapter,
    Variant::Framework,
    Variant::FrameworkWorkers,
];

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5673".into());
    let n: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |s| s.parse())?;
    let queues: Vec<String> = args.next().map_or_else(
        || vec!["rs.quorum".into(), "rs.classic".into()],
        |s| s.split(',').map(str::to_owned).collect(),
    );
    let port = port_of(&url, 5672);
    let process = BROKER.get_or_init(|| listener(port));
    println!("broker process on port {port}: {process:?} (its CPU time is measured where found)");
    // Fills the queues and checks they end empty; each variant connects on its own.
    let broker = AmqpBroker::connect(&url).await?;
    println!(
        "{n} messages of 512-byte JSON, credit {CREDIT}, {rounds} rounds; load average {}",
        load_average()
    );
    // For profiling one variant alone: BENCH_ONLY=framework (comma-separated names).
    let runs = |variant: Variant| chosen(variant.name());
    for queue in &queues {
        let leftover = drain(&broker, queue).await?;
        if leftover > 0 {
            println!("{queue}: drained {leftover} messages left from before");
        }
        // results[variant][round]
        let mut results: Vec<Vec<Run>> = vec![Vec::new(); VARIANTS.len()];
        for round in 0..rounds {
            for k in 0..VARIANTS.len() {
                let variant = VARIANTS[(round + k) % VARIANTS.len()];
                if !runs(variant) {
                    continue;
                }
                fill(&broker, queue, n).await?;
                // Each variant runs in a task of its own on the runtime's workers, as the
                // framework's handling loop does (not on the thread blocked in `main`).
                let (url, q) = (url.clone(), queue.clone());
                let run = tokio::spawn(async move {
                    match variant {
                        Variant::Raw => raw(&url, &q, n, false).await,
                        Variant::RawBatched => raw(&url, &q, n, true).await,
                        Variant::Adapter => adapter(&url, &q, n).await,
                        Variant::Framework => framework(&url, &q, n, None).await,
                        Variant::FrameworkWorkers => framework(&url, &q, n, Some(WORKERS)).await,
                    }
                })
                .await??;
                let index = VARIANTS.iter().position(|v| *v == variant).unwrap_or(0);
                println!("  {queue} round {round} {:<17} {run}", variant.name());
                results[index].push(run);
            }
            println!(
                "  {queue} round {} done; load average {}",
                round + 1,
                load_average()
            );
        }
        let leftover = drain(&broker, queue).await?;
        println!("{queue}: left in queue after the run: {leftover}");
        let table: Vec<(&str, Vec<Run>)> = VARIANTS.iter().map(|v| v.name()).zip(results).collect();
        println!("{queue}: medians of {rounds} rounds of {n}");
        print!("{}", markdown_table(&table));
    }
    broker.close().await;
    Ok(())
}
