//! Throughput and CPU time per message (this process's and the Redis server's) of one
//! stream consumer, 512-byte JSON messages, Redis on loopback: raw fred loops against the
//! adapter and the full framework, ack-each and batched/pipelined acks; then a reliable
//! list and Pub/Sub (one run each).
//!
//! ```text
//! cargo run --release -p ruststream-redis --example bench -- [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: 50000 messages, 5 rounds; `RUSTSTREAM_REDIS_URL` picks the server (default
//! `redis://127.0.0.1:6379`). Keys live under a unique `bench:<pid>:` prefix and are
//! deleted at the end.
//!
//! Every variant reads with `COUNT` [`BATCH`] (the raw loops' `XREADGROUP COUNT`, the
//! subscription's `in_flight`, the framework mount's `workers`) and decodes every
//! message's JSON into the same type ([`Order`]) before acking it; every ack is sent only
//! after its message was handled (at least once). Each round runs every stream variant
//! once, on a stream of its own filled beforehand (the fill is not timed), in an order
//! that rotates from round to round. Every run prints its msg/s and the client's and the
//! server's CPU µs per message over its timed window; at the end a markdown table per
//! kind (stream, reliable list, Pub/Sub) gives the medians: msg/s, its share of the
//! fastest raw loop's, client and broker µs/msg. The server's CPU time is read from
//! `/proc/<pid>/stat` of the process listening on the URL's port (run as root, or as the
//! server's user, to see it).
//!
//! * `raw-each`: `XREADGROUP COUNT 128 BLOCK 1000`, then per entry decode and `XACK`,
//!   awaited before the next entry.
//! * `raw-batch`: the same read; every entry decoded, then one `XACK` with the read's ids,
//!   awaited before the next read.
//! * `adapter-each`: a `Stream` subscription; each delivery decoded, then
//!   `settle(Accept)` awaited before the next delivery.
//! * `adapter-pipelined`: the same; each delivery decoded, then settled without waiting
//!   for the answer (at most 128 settlements unanswered); the adapter coalesces the ids
//!   settled meanwhile into one `XACK`.
//! * `framework`: a `ruststream::App` on its own `RedisBroker`, one `Stream` mount with
//!   `workers(128)` and an `async fn(Order) -> Outcome` returning `ack()`; the framework
//!   settles each delivery after its handler (each worker awaits its settlement), the
//!   adapter pipelines and coalesces them. Timed from `on_start` to the last
//!   `after_settle`.
//! * `framework-sequential`: the same `App` with the default concurrency (one handler at
//!   a time, in order; bare settlements trail behind the loop) and no `after_settle` hook
//!   (a hook makes the loop wait for each settlement). Timed from `on_start` until all
//!   were handled and nothing is in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::Value;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use ruststream_conformance::cpu::{Run, Window, listener, markdown_table, median, port_of};
use ruststream_conformance::ruststream::{App, Mount, Outcome, Settled, ack, codec::Codec};
use ruststream_core::{Address, Broker, Message, Options, Settlement, SubscribeSpec};
use ruststream_redis::{PubSub, RedisBroker, ReliableList, Settings, Stream, Target};

/// The Redis server's process, for its CPU time (found once, from the URL's port).
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

/// A measured window, with the server's CPU time where its process was found.
fn window() -> Window {
    Window::start(BROKER.get().copied().flatten())
}

/// The read size of every variant: `XREADGROUP COUNT`, `in_flight`, `workers`.
const BATCH: usize = 128;

/// What every variant decodes each message into: the JSON object's fields (all strings,
/// so that a std map holds them without a derive).
type Order = HashMap<String, String>;

fn decode(payload: &[u8]) -> Order {
    Codec::Json.decode(payload).expect("json")
}

/// Touches the decoded value so that decoding cannot be optimised away.
fn consume(order: &Order) {
    std::hint::black_box(order.get("pad").map(String::len));
}

fn payload() -> Message {
    let head = r#"{"id":"12345678","kind":"order","pad":""#;
    let filler = "x".repeat(512 - head.len() - 2);
    let body = format!("{head}{filler}\"}}");
    assert_eq!(body.len(), 512);
    Message::new(body).with_header("content-type", "application/json")
}

async fn fill_stream(broker: &RedisBroker, address: &str, n: usize) {
    let publisher = broker.publisher();
    let message = payload();
    let mut pending = FuturesUnordered::new();
    for _ in 0..n {
        pending.push(publisher.publish(Address::new(address), message.clone()));
        if pending.len() >= 256
            && let Some(r) = pending.next().await
        {
            r.expect("publish");
        }
    }
    while let Some(r) = pending.next().await {
        r.expect("publish");
    }
}

/// The raw fred loop: `XREADGROUP COUNT 128`, decode each entry, `XACK` each (awaited) or
/// one `XACK` of the read's ids after all are decoded.
async fn raw_stream(client: &Client, key: &str, n: usize, batched: bool) -> Run {
    let _: Value = client
        .xgroup_create(key, "raw", "0", true)
        .await
        .expect("group");
    let window = window();
    let mut done = 0;
    while done < n {
        let reply: Value = client
            .xreadgroup("raw", "c", Some(BATCH as u64), Some(1000), false, key, ">")
            .await
            .expect("read");
        let streams = reply.into_array();
        let Some(stream) = streams.into_iter().next() else {
            continue;
        };
        let entries = stream.into_array().pop().expect("entries").into_array();
        let mut ids = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut parts = entry.into_array().into_iter();
            let id = parts.next().and_then(|v| v.as_string()).expect("id");
            let fields = parts.next().expect("fields").into_array();
            // Fields: `_payload` first, then `h:content-type`.
            let body = fields.get(1).and_then(Value::as_bytes).expect("payload");
            consume(&decode(body));
            if batched {
                ids.push(id);
            } else {
                let _: Value = client.xack(key, "raw", id).await.expect("xack");
            }
            done += 1;
        }
        if batched && !ids.is_empty() {
            let _: Value = client.xack(key, "raw", ids).await.expect("xack");
        }
    }
    window.end(n)
}

/// The adapter: a subscription, each delivery decoded then settled; `pipelined` leaves up
/// to 128 settlements unanswered (each still made after its delivery was decoded).
async fn adapter(
    broker: &RedisBroker,
    options: Options,
    address: &str,
    n: usize,
    pipelined: bool,
) -> Run {
    let spec = SubscribeSpec {
        address: Address::new(address),
        declaration: Default::default(),
        in_flight: BATCH,
        options,
        drain: Default::default(),
    };
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let window = window();
    let mut settling = FuturesUnordered::new();
    for _ in 0..n {
        let d = sub
            .deliveries
            .next()
            .await
            .expect("open")
            .expect("delivery");
        consume(&decode(d.payload()));
        if pipelined {
            settling.push(d.settle(Settlement::Accept));
            // Drive every settlement made so far, and collect those already answered.
            while let Some(Some(r)) = settling.next().now_or_never() {
                r.expect("settled");
            }
            if settling.len() >= BATCH
                && let Some(r) = settling.next().await
            {
                r.expect("settled");
            }
        } else {
            d.settle(Settlement::Accept).await.expect("settled");
        }
    }
    while let Some(r) = settling.next().await {
        r.expect("settled");
    }
    window.end(n)
}

async fn handle(order: Order) -> Outcome {
    consume(&order);
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

/// The framework: an `App` on its own broker (stopping the app closes it), one `Stream`
/// mount with `workers(128)`.
async fn framework(url: &str, prefix: &str, address: &str, n: usize) -> Run {
    let broker = RedisBroker::connect_with(url, Settings::default().key_prefix(prefix))
        .await
        .expect("connect");
    let progress = Arc::new(Progress::default());
    let (on_start, on_settle) = (progress.clone(), progress.clone());
    let mount = Mount::new(address)
        .option(Stream::new().group("g"))
        .workers(BATCH);
    let app = App::new(broker)
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
    let running = app.start().await.expect("start");
    tokio::time::timeout(Duration::from_secs(300), progress.done.notified())
        .await
        .expect("framework: all settled");
    running.stop().await.expect("stop");
    assert_eq!(
        progress.failed.load(Ordering::Relaxed),
        0,
        "failed settlements"
    );
    *progress.finished.get().expect("framework: timing")
}

/// The framework with a sequential mount (the default) and no `after_settle` hook.
async fn framework_sequential(url: &str, prefix: &str, address: &str, n: usize) -> Run {
    let broker = RedisBroker::connect_with(url, Settings::default().key_prefix(prefix))
        .await
        .expect("connect");
    let started = Arc::new(OnceLock::new());
    let on_start = started.clone();
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = handled.clone();
    let mount = Mount::new(address).option(Stream::new().group("g").count(BATCH));
    let app = App::new(broker)
        .mount(mount, move |order: Order| {
            counter.fetch_add(1, Ordering::Relaxed);
            handle(order)
        })
        .on_start(move || {
            let _ = on_start.set(window());
        });
    let running = app.start().await.expect("start");
    let deadline = Instant::now() + Duration::from_secs(300);
    while handled.load(Ordering::Relaxed) < n || running.in_flight() > 0 {
        assert!(
            Instant::now() < deadline,
            "framework-sequential: all settled"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let run = started.get().expect("framework-sequential: timing").end(n);
    running.stop().await.expect("stop");
    run
}

fn stream_options(group: &str) -> Options {
    let mut options = Options::default();
    options.insert(Stream::new().group(group).count(BATCH));
    options
}

fn report(name: &str, run: Run) -> Run {
    println!("  {name:<40} {run}");
    run
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

const VARIANTS: [&str; 6] = [
    "raw-each",
    "raw-batch",
    "adapter-each",
    "adapter-pipelined",
    "framework",
    "framework-sequential",
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let url =
        std::env::var("RUSTSTREAM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let port = port_of(&url, 6379);
    let server = BROKER.get_or_init(|| listener(port));
    println!("server process on port {port}: {server:?} (its CPU time is measured where found)");
    let prefix = format!("bench:{}:", std::process::id());
    let broker = RedisBroker::connect_with(&url, Settings::default().key_prefix(prefix.clone()))
        .await
        .expect("connect");
    let client = Builder::from_config(Config::from_url(&url).expect("url"))
        .with_connection_config(|c| c.tcp.nodelay = Some(true))
        .build()
        .expect("client");
    client.init().await.expect("connect raw client");
    println!(
        "{n} messages of {} bytes, one consumer, COUNT {BATCH}, {rounds} rounds, {url}; load average {}",
        payload().payload.len(),
        load_average()
    );

    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..rounds {
        for k in 0..VARIANTS.len() {
            let v = (round + k) % VARIANTS.len();
            let address = format!("s{round}-{v}");
            fill_stream(&broker, &address, n).await;
            let key = format!("{prefix}{address}");
            let run = match VARIANTS[v] {
                "raw-each" => raw_stream(&client, &key, n, false).await,
                "raw-batch" => raw_stream(&client, &key, n, true).await,
                "adapter-each" => adapter(&broker, stream_options("g"), &address, n, false).await,
                "adapter-pipelined" => {
                    adapter(&broker, stream_options("g"), &address, n, true).await
                }
                "framework" => framework(&url, &prefix, &address, n).await,
                _ => framework_sequential(&url, &prefix, &address, n).await,
            };
            runs[v].push(report(VARIANTS[v], run));
            let _: Value = client.del(key).await.expect("del");
        }
        println!("round {} done; load average {}", round + 1, load_average());
    }
    let m: Vec<f64> = runs
        .iter()
        .map(|r| median(r.iter().map(|run| run.rate)))
        .collect();
    println!("\nstream: medians of {rounds} rounds of {n}");
    let stream: Vec<(&str, Vec<Run>)> = VARIANTS.iter().copied().zip(runs).collect();
    print!("{}", markdown_table(&stream));
    println!(
        "adapter-each / raw-each {:.0} %, adapter-pipelined / raw-batch {:.0} %, framework / raw-batch {:.0} %, framework-sequential / raw-batch {:.0} %, adapter-pipelined / raw-each {:.1}x",
        100.0 * m[2] / m[0],
        100.0 * m[3] / m[1],
        100.0 * m[4] / m[1],
        100.0 * m[5] / m[1],
        m[3] / m[0]
    );

    // Reliable list: filled first, then BLMOVE/LMOVE + LREM per delivery.
    let publisher = broker.redis_publisher();
    let mut list = Vec::new();
    for (name, pipelined) in [
        ("adapter reliable list, settle each", false),
        ("adapter reliable list, pipelined", true),
    ] {
        let address = format!("l-{pipelined}");
        let mut pending = FuturesUnordered::new();
        for _ in 0..n {
            pending.push(publisher.publish_as(Address::new(&address), Target::List, payload()));
            if pending.len() >= 256
                && let Some(r) = pending.next().await
            {
                r.expect("lpush");
            }
        }
        while let Some(r) = pending.next().await {
            r.expect("lpush");
        }
        let mut options = Options::default();
        options.insert(ReliableList::new().consumer("bench"));
        let run = adapter(&broker, options, &address, n, pipelined).await;
        list.push((name, vec![report(name, run)]));
    }
    println!("\nreliable list: one run of {n}");
    print!("{}", markdown_table(&list));

    // Pub/Sub: a publisher task sends while one subscription reads (at most once: count
    // what arrives within the run). Both sides' CPU time includes the publishing.
    let mut options = Options::default();
    options.insert(PubSub::new());
    let spec = SubscribeSpec {
        address: Address::new("ps"),
        declaration: Default::default(),
        in_flight: BATCH,
        options,
        drain: Default::default(),
    };
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let sender = {
        let publisher = broker.redis_publisher();
        tokio::spawn(async move {
            let mut pending = FuturesUnordered::new();
            for _ in 0..n {
                pending.push(publisher.publish_as(Address::new("ps"), Target::Channel, payload()));
                if pending.len() >= 64
                    && let Some(r) = pending.next().await
                {
                    r.expect("publish");
                }
            }
            while let Some(r) = pending.next().await {
                r.expect("publish");
            }
        })
    };
    let window = window();
    let mut received = 0;
    while received < n {
        match tokio::time::timeout(Duration::from_secs(2), sub.deliveries.next()).await {
            Ok(Some(Ok(d))) => {
                consume(&decode(d.payload()));
                received += 1;
            }
            Ok(Some(Err(e))) => eprintln!("pub/sub: {e}"),
            _ => break,
        }
    }
    let run = window.end(received);
    sender.await.expect("sender");
    let name = format!("adapter pub/sub ({received}/{n} received)");
    let run = report(&name, run);
    println!("\nPub/Sub: one run of {n} sent");
    print!("{}", markdown_table(&[(name.as_str(), vec![run])]));

    // Clean up this run's keys.
    let keys: Value = client
        .custom(
            fred::types::CustomCommand::new_static("KEYS", fred::types::ClusterHash::Random, false),
            vec![format!("*{prefix}*")],
        )
        .await
        .expect("keys");
    for key in keys.into_array() {
        if let Some(key) = key.as_string() {
            let _: Value = client.del(key).await.expect("del");
        }
    }
    broker.close().await;
}
