//! Consume throughput and CPU time per message (this process's and the NATS server's)
//! on JetStream, each message's 512-byte JSON decoded (serde) into the same struct before
//! its acknowledgement:
//!
//! * `raw`: an async-nats pull consumer (`messages()`, batch 65): decode, `double_ack`
//!   (confirmed by the server) awaited, next: the plain loop;
//! * `raw-pipelined`: the same, with up to 64 confirmed acknowledgements under way while
//!   the next messages are decoded (as the runtime lets settlements trail behind its loop);
//! * `raw-plain`: the same pull consumer with a plain `ack` (published, no answer)
//!   awaited per message: what the adapter does by default;
//! * `framework`: a `ruststream::App` on `NatsBroker`, one mount with an
//!   `async fn(Order) -> Outcome` returning `ack()`, default (sequential) handling and
//!   default (plain) acknowledgements;
//! * `framework-workers`: the same mount with `workers(64)`;
//! * `framework-confirmed`, `framework-workers-confirmed`: the two above with
//!   `JetStream::confirm_acks(true)`.
//!
//! ```text
//! cargo run --release -p ruststream-nats --example bench -- [URL] [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: `nats://127.0.0.1:4222`, 20000 messages, 3 rounds; `BENCH_ONLY=a,b` runs
//! those variants only. Each variant gets a
//! fresh stream filled beforehand (not timed), deleted after; the order of the
//! variants rotates from round to round. Timing: from the first message pulled
//! (`framework`: from `on_start`) to the last acknowledgement settled. Every run prints
//! its msg/s and the client's and the server's CPU µs per message over that window; at
//! the end a markdown table gives the medians: msg/s, its share of the fastest raw
//! loop's, client and broker µs/msg. The server's CPU time is read from
//! `/proc/<pid>/stat` of the process listening on the URL's port (run as root, or as the
//! server's user, to see it).

use std::sync::Arc;
use std::sync::OnceLock;

use async_nats::jetstream::{self, consumer::pull, stream};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_conformance::cpu::{
    Countdown, Order, Run, Window, chosen, listener, markdown_table, order_json, port_of,
};
use ruststream_nats::{JetStream, NatsBroker};

/// The NATS server's process, for its CPU time (found once, from the URL's port).
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

/// A measured window, with the server's CPU time where its process was found.
fn window() -> Window {
    Window::start(BROKER.get().copied().flatten())
}

async fn handle(order: Order) -> Outcome {
    std::hint::black_box((order.id, order.pad.len()));
    ack()
}

/// A fresh stream `name` holding `subject`, filled with `n` messages.
async fn fill(js: &jetstream::Context, name: &str, subject: &str, n: usize) {
    let _ = js.delete_stream(name).await;
    js.create_stream(stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        ..Default::default()
    })
    .await
    .expect("stream");
    let mut acks = FuturesUnordered::new();
    for id in 0..n {
        let ack = js
            .publish(subject.to_owned(), order_json(id).into())
            .await
            .expect("publish");
        acks.push(std::future::IntoFuture::into_future(ack));
        if acks.len() >= 256 {
            acks.next().await.expect("ack").expect("stored");
        }
    }
    while let Some(ack) = acks.next().await {
        ack.expect("stored");
    }
}

async fn raw(
    js: &jetstream::Context,
    name: &str,
    subject: &str,
    n: usize,
    under_way: usize,
    confirmed: bool,
) -> Run {
    let stream = js.get_stream(name).await.expect("stream");
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("raw".into()),
            filter_subject: subject.to_owned(),
            max_ack_pending: 4 * 65,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(65)
        .messages()
        .await
        .expect("pull");
    let mut started = None;
    let mut acks = FuturesUnordered::new();
    for _ in 0..n {
        let message = messages.next().await.expect("message").expect("pulled");
        started.get_or_insert_with(window);
        let order: Order = serde_json::from_slice(&message.payload).expect("json");
        std::hint::black_box((order.id, order.pad.len()));
        acks.push(async move {
            if confirmed {
                message.double_ack().await
            } else {
                message.ack().await
            }
        });
        while acks.len() >= under_way {
            acks.next().await.expect("ack").expect("acked");
        }
    }
    while let Some(ack) = acks.next().await {
        ack.expect("acked");
    }
    started.expect("started").end(n)
}

/// The framework's time with the default sequential mount, or with `workers(n)`; with
/// confirmed acknowledgements if `confirmed`.
async fn framework(
    url: &str,
    subject: &str,
    n: usize,
    workers: Option<usize>,
    confirmed: bool,
) -> Run {
    let broker = NatsBroker::connect(url).await.expect("connect");
    let started = Arc::new(OnceLock::new());
    let (s, s_end) = (started.clone(), started.clone());
    let countdown = Countdown::new(n);
    let counting = countdown.clone();
    let mut mount = Mount::new(subject);
    if let Some(workers) = workers {
        mount = mount.workers(workers);
    }
    if confirmed {
        mount = mount.option(JetStream::new().confirm_acks(true));
    }
    let running = App::new(broker)
        .mount(mount, handle)
        .on_start(move || {
            let _ = s.set(window());
        })
        .after_settle(move |record: &Settled| {
            counting.settled(record.is_ok(), |n| {
                s_end.get().map(|window: &Window| window.end(n))
            });
        })
        .start()
        .await
        .expect("start");
    let run = countdown.finished().await;
    running.stop().await.expect("stop");
    run
}

/// The `workers(n)` of the `framework-workers` variant.
const WORKERS: usize = 64;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let port = port_of(&url, 4222);
    let server = BROKER.get_or_init(|| listener(port));
    println!("server process on port {port}: {server:?} (its CPU time is measured where found)");
    let js = jetstream::new(async_nats::connect(&url).await.expect("connect"));
    let variants = [
        "raw",
        "raw-pipelined",
        "raw-plain",
        "framework",
        "framework-workers",
        "framework-confirmed",
        "framework-workers-confirmed",
    ];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for k in 0..variants.len() {
            let v = (k + round) % variants.len();
            if !chosen(variants[v]) {
                continue;
            }
            let name = format!("rsbench_{}", variants[v].replace('-', "_"));
            let subject = format!("rsbench.{}", variants[v]);
            fill(&js, &name, &subject, n).await;
            let run = match variants[v] {
                "raw" => raw(&js, &name, &subject, n, 1, true).await,
                "raw-pipelined" => raw(&js, &name, &subject, n, 64, true).await,
                "raw-plain" => raw(&js, &name, &subject, n, 1, false).await,
                "framework" => framework(&url, &subject, n, None, false).await,
                "framework-workers" => framework(&url, &subject, n, Some(WORKERS), false).await,
                "framework-confirmed" => framework(&url, &subject, n, None, true).await,
                _ => framework(&url, &subject, n, Some(WORKERS), true).await,
            };
            println!("round {round} {:<27} {run}", variants[v]);
            runs[v].push(run);
            let _ = js.delete_stream(&name).await;
        }
    }
    let variants: Vec<(&str, Vec<Run>)> = variants.into_iter().zip(runs).collect();
    println!("JetStream: medians of {rounds} rounds of {n}");
    print!("{}", markdown_table(&variants));
}
