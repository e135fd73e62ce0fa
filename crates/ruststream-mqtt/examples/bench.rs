//! Consume throughput and CPU time per message (this process's and Mosquitto's) of the
//! MQTT adapter against a raw rumqttc loop with manual acknowledgements, each message's
//! 512-byte JSON decoded (serde) into the same struct before it counts as done:
//!
//! * `raw`: a rumqttc v5 client on a persistent session (clean start off), subscribed
//!   QoS 1 to `$share/raw/<topic>` with manual acks and a receive maximum of 65 (what a
//!   default sequential mount asks), acknowledging each message once it is decoded;
//! * `framework`: a `ruststream::App` on `MqttBroker`, one default mount (a shared
//!   subscription on a persistent session) with an `async fn(Order) -> Outcome`
//!   returning `ack()`;
//! * `framework-workers`: the same mount with `workers(64)`.
//!
//! ```text
//! cargo run --release -p ruststream-mqtt --example bench -- [MESSAGES] [ROUNDS]
//! ```
//!
//! Defaults: 20000 messages, 3 rounds. The bench runs a Mosquitto of its own
//! (`/usr/sbin/mosquitto`, on a free port) with `max_queued_messages 0`: the machine's
//! Mosquitto keeps at most 1,000 messages per offline session (its default), fewer than
//! a round fills. Each variant's session is made first (subscribed, then disconnected),
//! the topic filled with N messages (QoS 1, not timed), and the session resumed: timing
//! runs from the first message handled to the last one acknowledged (the framework:
//! settled, which is after its PUBACK is written). Every run prints its msg/s and the
//! client's and Mosquitto's CPU µs per message over that window; at the end a markdown
//! table gives the medians. `BENCH_ONLY=a,b` runs those variants only.

use std::sync::OnceLock;
use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, Incoming, MqttOptions};
use ruststream::{App, Mount, Outcome, Settled, ack};
use ruststream_conformance::cpu::{
    Countdown, FirstRecord, Order, Run, Window, chosen, markdown_table, order_json,
};
use ruststream_conformance::mosquitto::Mosquitto;
use ruststream_mqtt::{Group, MqttBroker};

/// Mosquitto's process, for its CPU time.
static BROKER: OnceLock<Option<u32>> = OnceLock::new();

/// The framework's window, started by the first message its handler sees.
static STARTED: FirstRecord = FirstRecord::new();

/// The receive maximum of the raw loop: a default sequential mount's in-flight count.
const RECEIVE_MAXIMUM: u16 = 65;

/// The `workers(n)` of the `framework-workers` variant.
const WORKERS: usize = 64;

fn window() -> Window {
    Window::start(BROKER.get().copied().flatten())
}

async fn handle(order: Order) -> Outcome {
    STARTED.seen(BROKER.get().copied().flatten());
    std::hint::black_box((order.id, order.pad.len()));
    ack()
}

/// Polls a disconnecting client's events until its connection is closed (a second at
/// most: a client polled after that would connect again).
async fn settle_down(events: &mut rumqttc::v5::EventLoop) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match events.poll().await {
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Options of a raw client `id` on a persistent session with manual acks.
fn raw_options(port: u16, id: &str) -> MqttOptions {
    let mut options = MqttOptions::new(id, "127.0.0.1", port);
    options
        .set_clean_start(false)
        .set_session_expiry_interval(Some(3600))
        .set_manual_acks(true)
        .set_receive_maximum(Some(RECEIVE_MAXIMUM))
        .set_keep_alive(Duration::from_secs(30));
    options
}

/// Subscribes the raw session `id` to `filter` (QoS 1) and disconnects, leaving it.
async fn raw_session(port: u16, id: &str, filter: &str) {
    let (client, mut events) = AsyncClient::new(raw_options(port, id), 64);
    client
        .subscribe(filter, QoS::AtLeastOnce)
        .await
        .expect("subscribe");
    loop {
        if let Event::Incoming(Incoming::SubAck(_)) = events.poll().await.expect("event") {
            break;
        }
    }
    client.disconnect().await.expect("disconnect");
    settle_down(&mut events).await;
}

/// Publishes `n` messages to `topic` (QoS 1), each acknowledged by the broker.
async fn fill(port: u16, topic: &str, n: usize) {
    let mut options = MqttOptions::new(format!("rs-bench-fill-{port}"), "127.0.0.1", port);
    options.set_clean_start(true);
    let (client, mut events) = AsyncClient::new(options, 1024);
    let publisher = {
        let client = client.clone();
        let topic = topic.to_owned();
        tokio::spawn(async move {
            for id in 0..n {
                client
                    .publish(topic.as_str(), QoS::AtLeastOnce, false, order_json(id))
                    .await
                    .expect("publish");
            }
        })
    };
    let mut acked = 0;
    while acked < n {
        if let Event::Incoming(Incoming::PubAck(_)) = events.poll().await.expect("event") {
            acked += 1;
        }
    }
    publisher.await.expect("published");
    client.disconnect().await.expect("disconnect");
    settle_down(&mut events).await;
}

/// The raw loop: resumes session `id` and acknowledges `n` messages, each once decoded.
/// The client's event loop is polled by a task of its own (as the adapter does): polled
/// in the same loop as the acks, rumqttc picks the queued acks up late.
async fn raw(port: u16, id: &str, n: usize) -> Run {
    let (client, mut events) = AsyncClient::new(raw_options(port, id), 1024);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let poller = tokio::spawn(async move {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Incoming::Publish(publish))) => {
                    if tx.send(publish).is_err() {
                        break;
                    }
                }
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) => break,
                Ok(_) => {}
                Err(error) => panic!("raw connection: {error}"),
            }
        }
        events
    });
    let mut started = None;
    for _ in 0..n {
        let publish = rx.recv().await.expect("a message");
        started.get_or_insert_with(window);
        let order: Order = serde_json::from_slice(&publish.payload).expect("json");
        std::hint::black_box((order.id, order.pad.len()));
        client.ack(&publish).await.expect("ack");
    }
    let run = started.expect("started").end(n);
    client.disconnect().await.expect("disconnect");
    let _ = tokio::time::timeout(Duration::from_secs(2), poller).await;
    run
}

/// The framework's mount on `topic` (group `bench-<variant>`).
fn mount(topic: &str, group: &str, workers: Option<usize>) -> Mount {
    let mount = Mount::new(topic).option(Group::new(group));
    match workers {
        Some(workers) => mount.workers(workers),
        None => mount,
    }
}

/// The framework's run: its session made first, then the topic filled, then resumed.
async fn framework(port: u16, topic: &str, n: usize, workers: Option<usize>) -> Run {
    let url = format!("mqtt://127.0.0.1:{port}?client_id=rs-bench-{port}");
    let group = format!("bench{}", workers.unwrap_or(1));
    // The session, subscribed once and left.
    let broker = MqttBroker::connect(&url).await.expect("connect");
    let running = App::new(broker)
        .mount(mount(topic, &group, workers), handle)
        .start()
        .await
        .expect("start");
    running.stop().await.expect("stop");
    fill(port, topic, n).await;

    STARTED.reset();
    let broker = MqttBroker::connect(&url).await.expect("connect");
    let countdown = Countdown::new(n);
    let counting = countdown.clone();
    let running = App::new(broker)
        .mount(mount(topic, &group, workers), handle)
        .after_settle(move |record: &Settled| {
            counting.settled(record.is_ok(), |n| STARTED.end(n));
        })
        .start()
        .await
        .expect("start");
    let run = countdown.finished().await;
    running.stop().await.expect("stop");
    run
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mosquitto = Mosquitto::start("max_queued_messages 1000000\nmax_inflight_messages 0\n");
    let port = mosquitto.port();
    let server = BROKER.get_or_init(|| Some(mosquitto.pid()));
    println!("mosquitto on port {port}: pid {server:?}");
    let variants = ["raw", "framework", "framework-workers"];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for k in 0..variants.len() {
            let v = (k + round) % variants.len();
            if !chosen(variants[v]) {
                continue;
            }
            let topic = format!("rsbench/{round}/{}", variants[v]);
            let run = match variants[v] {
                "raw" => {
                    let id = format!("rs-bench-raw-{port}-{round}");
                    raw_session(port, &id, &format!("$share/raw/{topic}")).await;
                    fill(port, &topic, n).await;
                    raw(port, &id, n).await
                }
                "framework" => framework(port, &topic, n, None).await,
                _ => framework(port, &topic, n, Some(WORKERS)).await,
            };
            println!("round {round} {:<18} {run}", variants[v]);
            runs[v].push(run);
        }
    }
    let variants: Vec<(&str, Vec<Run>)> = variants.into_iter().zip(runs).collect();
    println!("MQTT (Mosquitto 2): medians of {rounds} rounds of {n}");
    print!("{}", markdown_table(&variants));
}
