//! The delivery path on the memory broker: consume, decode, handle, ack.
//!
//! Not a timed benchmark: it drains a pre-filled queue inside `drain`, so that
//! callgrind can count the instructions of that region alone and the counting
//! allocator the allocations. Run it through `scripts/bench-core`, which takes the
//! difference of a 1,000- and a 2,000-message run (start-up cancels out).
//!
//! ```text
//! cargo bench -p ruststream --bench delivery -- json 1000
//! ```
//!
//! Modes: `json`, `json-small`, `json-text` (an id and a 480-character string), `raw`
//! (payloads encoded by the publisher, cut off its shared per-thread chunks) and
//! `raw-heap` (the raw mount, each payload its own heap `Vec<u8>` as a network client
//! hands them over).

use std::alloc::System;
use std::time::Duration;

use bytes::Bytes;
use ruststream::memory::MemoryBroker;
use ruststream::{App, Message, Mount, Raw, Running, codec::Codec};
use serde::{Deserialize, Serialize};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// A small message with no heap fields, as a price tick.
#[derive(Serialize, Deserialize)]
struct Tick {
    id: u64,
    price: u32,
    qty: u32,
    live: bool,
}

async fn on_tick(tick: Tick) {
    std::hint::black_box((tick.id, tick.price, tick.qty, tick.live));
}

/// A smaller message: two numbers.
#[derive(Serialize, Deserialize)]
struct Order {
    id: u64,
    qty: u32,
}

async fn on_order(order: Order) {
    std::hint::black_box((order.id, order.qty));
}

/// A message with a longer text: an id and 480 plain characters (the string scan).
#[derive(Serialize, Deserialize)]
struct Note {
    id: u64,
    text: String,
}

async fn on_note(note: Note) {
    std::hint::black_box((note.id, note.text.len()));
}

async fn on_raw(Raw(bytes): Raw) {
    std::hint::black_box(bytes.len());
}

/// Tracing with the SDK's batch processor (its own thread) and an exporter that
/// drops the spans: what the delivery path pays is making, filling and ending them.
#[cfg(feature = "otel")]
fn traced() -> ruststream::observe::Tracing {
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

    #[derive(Debug)]
    struct Discard;

    impl SpanExporter for Discard {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            std::hint::black_box(batch);
            Ok(())
        }
    }

    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    ruststream::observe::Tracing::new(provider)
}

/// Starts the service: the region `scripts/bench-core start` counts.
#[inline(never)]
fn start_service(runtime: &tokio::runtime::Runtime, app: App) -> Running {
    runtime.block_on(app.start()).expect("starts")
}

/// Handles every queued message; the region callgrind and the allocation counter see.
#[inline(never)]
fn drain(runtime: &tokio::runtime::Runtime, broker: &MemoryBroker, running: &Running) {
    runtime.block_on(async {
        loop {
            tokio::task::yield_now().await;
            if running.in_flight() == 0 && broker.is_idle() {
                break;
            }
        }
    });
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mode = args.next().unwrap_or_else(|| "json".into());
    let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let broker = MemoryBroker::new();
    // `<mode>+metrics`: the same with the metrics layer (feature `prometheus`);
    // `<mode>+tracing`: with OpenTelemetry tracing (feature `otel`).
    let (mode, tracing) = match mode.strip_suffix("+tracing") {
        Some(mode) => (mode.to_owned(), true),
        None => (mode, false),
    };
    let (mode, metrics) = match mode.strip_suffix("+metrics") {
        Some(mode) => (mode.to_owned(), true),
        None => (mode, false),
    };
    let app = match mode.as_str() {
        "json" => App::new(broker.clone()).mount("bench", on_tick),
        "json-small" => App::new(broker.clone()).mount("bench", on_order),
        "json-text" => App::new(broker.clone()).mount("bench", on_note),
        "raw" | "raw-heap" => {
            App::new(broker.clone()).mount(Mount::new("bench").codec(Codec::Raw), on_raw)
        }
        other => panic!("mode must be json, json-small, json-text, raw or raw-heap, not {other}"),
    };
    // `BENCH_NO_MOUNT_ENV=1`: the per-mount table given (empty) instead of read from the
    // environment, as a service that turns that table off does.
    let app = if std::env::var_os("BENCH_NO_MOUNT_ENV").is_some() {
        app.mount_settings(Vec::<(String, String)>::new())
    } else {
        app
    };
    #[cfg(feature = "prometheus")]
    let app = if metrics {
        app.metrics(&ruststream::observe::Metrics::new())
    } else {
        app
    };
    #[cfg(not(feature = "prometheus"))]
    assert!(!metrics, "+metrics needs --features prometheus");
    #[cfg(feature = "otel")]
    let app = if tracing { app.tracing(&traced()) } else { app };
    #[cfg(not(feature = "otel"))]
    assert!(!tracing, "+tracing needs --features otel");
    let publisher = app.publisher();
    // The headers the publisher's messages carry: its codec's `content-type`, shared.
    let headers = Message::new(Bytes::new())
        .with_header(
            ruststream::core::CONTENT_TYPE,
            Codec::default().content_type(),
        )
        .headers;
    let fill = |count: usize| {
        runtime.block_on(async {
            for id in 0..count {
                let sent = if mode == "raw-heap" {
                    let tick = Tick {
                        id: id as u64,
                        price: 1000 + (id % 7) as u32,
                        qty: 3,
                        live: true,
                    };
                    // Exact-size, as a client that reads a frame of known length: one
                    // allocation, freed when the delivery is done.
                    let mut payload = serde_json::to_vec(&tick).expect("encodes");
                    payload.shrink_to_fit();
                    let message = Message {
                        payload: Bytes::from(payload),
                        headers: headers.clone(),
                    };
                    let sent = publisher.publish_message("bench", message).await;
                    sent.expect("memory publish");
                    Ok(())
                } else if mode == "json-text" {
                    let note = Note {
                        id: id as u64,
                        text: "x".repeat(480),
                    };
                    publisher.publish("bench", &note).await
                } else if mode == "json-small" {
                    let order = Order {
                        id: id as u64,
                        qty: 3,
                    };
                    publisher.publish("bench", &order).await
                } else {
                    let tick = Tick {
                        id: id as u64,
                        price: 1000 + (id % 7) as u32,
                        qty: 3,
                        live: true,
                    };
                    publisher.publish("bench", &tick).await
                };
                sent.expect("memory publish");
            }
        })
    };
    // Warm up: start, handle a few, so that start-up and first-use growth are done.
    let region = Region::new(GLOBAL);
    let running = start_service(&runtime, app);
    let started = region.change();
    fill(16);
    drain(&runtime, &broker, &running);
    fill(count);

    let region = Region::new(GLOBAL);
    drain(&runtime, &broker, &running);
    let stats = region.change();

    println!(
        "mode={mode}{}{} messages={count} allocations={} reallocations={} bytes={} start_allocations={}",
        if metrics { "+metrics" } else { "" },
        if tracing { "+tracing" } else { "" },
        stats.allocations,
        stats.reallocations,
        stats.bytes_allocated,
        started.allocations
    );
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), running.stop()).await })
        .expect("stops in time")
        .expect("stops cleanly");
}
