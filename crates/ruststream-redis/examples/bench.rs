//! Throughput of one consumer, 512-byte JSON messages, Redis on loopback: a raw fred loop
//! against the adapter, ack-each and pipelined acks; then Pub/Sub and a reliable list.
//!
//! `cargo run --release -p ruststream-redis --example bench [messages]`
//! (`RUSTSTREAM_REDIS_URL` picks the server; keys are under a unique `bench:` prefix and
//! deleted at the end).

use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::Value;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use ruststream_core::{Address, Broker, Message, Options, Settlement, SubscribeSpec};
use ruststream_redis::{PubSub, RedisBroker, ReliableList, Settings, Stream, Target};

const BATCH: u64 = 128;

fn payload() -> Message {
    let filler = "x".repeat(512 - 40);
    let body = format!("{{\"id\":12345678,\"kind\":\"order\",\"pad\":\"{filler}\"}}");
    let body = &body[..512.min(body.len())];
    Message::new(body.to_owned()).with_header("content-type", "application/json")
}

fn handle(payload: &[u8]) -> usize {
    // The "handler": look at the JSON.
    std::hint::black_box(payload.iter().filter(|b| **b == b'"').count())
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

fn report(name: &str, n: usize, elapsed: Duration) -> f64 {
    let rate = n as f64 / elapsed.as_secs_f64();
    println!(
        "{name:<44} {rate:>10.0} msg/s  ({n} in {:.2} s)",
        elapsed.as_secs_f64()
    );
    rate
}

/// Raw fred: XREADGROUP COUNT 128, then per entry handle + XACK (awaited), or one XACK of
/// the batch's ids after all are handled.
async fn raw_stream(client: &Client, key: &str, n: usize, batched: bool) -> Duration {
    let _: Value = client
        .xgroup_create(key, "raw", "0", true)
        .await
        .expect("group");
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        let reply: Value = client
            .xreadgroup("raw", "c", Some(BATCH), Some(1000), false, key, ">")
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
            let body = fields.get(1).and_then(Value::as_bytes).expect("payload");
            handle(body);
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
    started.elapsed()
}

/// The adapter: a subscription, each delivery handled then settled; `pipelined` keeps up
/// to 128 settlements in flight (each still sent after its handler is done).
async fn adapter(
    broker: &RedisBroker,
    options: Options,
    address: &str,
    n: usize,
    pipelined: bool,
) -> Duration {
    let spec = SubscribeSpec {
        address: Address::new(address),
        declaration: Default::default(),
        in_flight: BATCH as usize,
        options,
    };
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let started = Instant::now();
    let mut settling = FuturesUnordered::new();
    for _ in 0..n {
        let d = sub
            .deliveries
            .next()
            .await
            .expect("open")
            .expect("delivery");
        handle(d.payload());
        if pipelined {
            settling.push(d.settle(Settlement::Accept));
            if settling.len() >= BATCH as usize
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
    started.elapsed()
}

fn stream_options(group: &str) -> Options {
    let mut options = Options::default();
    options.insert(Stream::new().group(group).count(BATCH as usize));
    options
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let url =
        std::env::var("RUSTSTREAM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
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
        "{n} messages of {} bytes, one consumer, {url}",
        payload().payload.len()
    );

    // Every stream run reads its own group of one stream filled once per run.
    let mut rates = Vec::new();
    for (name, batched) in [
        ("raw fred, XACK each", false),
        ("raw fred, one XACK per batch", true),
    ] {
        let address = format!("s-{batched}");
        fill_stream(&broker, &address, n).await;
        let elapsed = raw_stream(&client, &format!("{prefix}{address}"), n, batched).await;
        rates.push(report(name, n, elapsed));
    }
    for (name, pipelined) in [
        ("adapter stream, settle each", false),
        ("adapter stream, settles pipelined", true),
    ] {
        let address = format!("a-{pipelined}");
        fill_stream(&broker, &address, n).await;
        let elapsed = adapter(&broker, stream_options("g"), &address, n, pipelined).await;
        rates.push(report(name, n, elapsed));
    }
    println!(
        "adapter/raw: ack-each {:.0} %, pipelined/batched {:.0} %, pipelined adapter / raw ack-each {:.2}x",
        100.0 * rates[2] / rates[0],
        100.0 * rates[3] / rates[1],
        rates[3] / rates[0]
    );

    // Reliable list: filled first, then BLMOVE/LMOVE + LREM per delivery.
    let publisher = broker.redis_publisher();
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
        let elapsed = adapter(&broker, options, &address, n, pipelined).await;
        report(name, n, elapsed);
    }

    // Pub/Sub: a publisher task sends while one subscription reads (at most once: count
    // what arrives within the run).
    let mut options = Options::default();
    options.insert(PubSub::new());
    let spec = SubscribeSpec {
        address: Address::new("ps"),
        declaration: Default::default(),
        in_flight: BATCH as usize,
        options,
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
    let started = Instant::now();
    let mut received = 0;
    while received < n {
        match tokio::time::timeout(Duration::from_secs(2), sub.deliveries.next()).await {
            Ok(Some(Ok(d))) => {
                handle(d.payload());
                received += 1;
            }
            Ok(Some(Err(e))) => eprintln!("pub/sub: {e}"),
            _ => break,
        }
    }
    let elapsed = started.elapsed();
    sender.await.expect("sender");
    report(
        &format!("adapter pub/sub ({received}/{n} received)"),
        received,
        elapsed,
    );

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
