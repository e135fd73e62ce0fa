//! The ruststream demo service.
//!
//! Mounts one handler that shows every outcome, with `max_attempts(3)` and a dead
//! letter, plus a handler on the dead letter; publishes a few orders and one payload
//! that does not decode; prints what happened to each; stops when all are settled.
//!
//! ```text
//! cargo run -p demo                      # on the in-memory broker
//! cargo run -p demo -- redis://127.0.0.1:6379
//! cargo run -p demo -- amqp://guest:guest@127.0.0.1:5673
//! RUSTSTREAM_BROKER_URL=redis://127.0.0.1:6379 cargo run -p demo
//! RUSTSTREAM_HTTP_PORT=9090 cargo run -p demo   # also serves /metrics, /ready, /health
//! ```
//!
//! Given a port (`RUSTSTREAM_HTTP_PORT`), the demo serves its metrics and readiness on
//! 127.0.0.1 and runs on after the settlements until Ctrl-C.

use std::process::ExitCode;
use std::time::Duration;

use ruststream::core::{Message, Original, Plan};
use ruststream::{App, Attempt, Mount, Outcome, Settled, ack, drop, retry, retry_after};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

const ORDERS: &str = "demo.orders";
const DEAD: &str = "demo.orders.dead";

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u32,
    kind: String,
}

async fn orders(Attempt(attempt): Attempt, order: Order) -> Outcome {
    println!(
        "  handler: order {} ({}), attempt {attempt}",
        order.id, order.kind
    );
    match order.kind.as_str() {
        "bad" => drop(),
        "flaky" if attempt < 2 => retry(),
        "slow" if attempt < 2 => retry_after(Duration::from_millis(300)),
        "doomed" => retry(),
        _ => ack(),
    }
}

async fn dead_letters(order: Order) {
    println!("  dead letter: order {} ({}) gave up", order.id, order.kind);
}

fn describe(plan: &Plan) -> String {
    let original = match plan.original {
        Original::Settle(s) => format!("{s:?}"),
        Original::Hold(d, s) => format!("{s:?} after {d:?}"),
        Original::Unsupported => "unsupported".into(),
        Original::Untouched => "untouched".into(),
    };
    match &plan.copy {
        None => original,
        Some(copy) => format!("copy to {} then {original}", copy.to),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // The broker by URL: the first argument, else RUSTSTREAM_BROKER_URL, else memory.
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("RUSTSTREAM_BROKER_URL").ok())
        .unwrap_or_else(|| "memory://".to_owned());
    let broker = match ruststream::connect(&url).await {
        Ok(broker) => broker,
        Err(error) => {
            eprintln!("demo: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("demo on the {} broker", broker.name());

    let (tx, mut settled) = mpsc::unbounded_channel();
    let app = App::with_broker(broker)
        .mount(Mount::new(ORDERS).max_attempts(3).dead_letter(DEAD), orders)
        .mount(DEAD, dead_letters)
        .after_settle(move |s: &Settled| {
            let _ = tx.send(format!(
                "  settled: {} attempt {}: {:?} ({:?}) -> {}",
                s.address(),
                s.attempt(),
                s.verdict(),
                s.cause(),
                describe(s.plan()),
            ));
        })
        .shutdown_timeout(Duration::from_secs(5));
    let port = std::env::var("RUSTSTREAM_HTTP_PORT").ok();
    let app = match port.as_deref().map(str::parse::<u16>) {
        None => app,
        Some(Ok(port)) => app
            .metrics(&ruststream::observe::Metrics::new())
            .http(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        Some(Err(error)) => {
            eprintln!("demo: RUSTSTREAM_HTTP_PORT: {error}");
            return ExitCode::FAILURE;
        }
    };
    let publisher = app.publisher();
    let running = match app.start().await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("demo: {error}");
            return ExitCode::FAILURE;
        }
    };

    let kinds = ["ok", "bad", "flaky", "slow", "doomed"];
    for (id, kind) in (1..).zip(kinds) {
        let order = Order {
            id,
            kind: kind.into(),
        };
        if let Err(error) = publisher.publish(ORDERS, &order).await {
            eprintln!("demo: publish failed: {error}");
        }
    }
    let garbage = Message::new("this is not json");
    if let Err(error) = publisher.publish_message(ORDERS, garbage).await {
        eprintln!("demo: publish failed: {error}");
    }

    // ok 1 + bad 1 + flaky 2 + slow 2 + doomed 3 + its dead letter 1 + garbage 1.
    let expected = 11;
    let mut seen = 0;
    while seen < expected {
        match tokio::time::timeout(Duration::from_secs(10), settled.recv()).await {
            Ok(Some(line)) => {
                println!("{line}");
                seen += 1;
            }
            _ => break,
        }
    }
    if let Some(addr) = running.http_addr() {
        println!("demo: serving http://{addr}/metrics, /ready, /health; Ctrl-C to stop");
        let _ = tokio::signal::ctrl_c().await;
    }
    let result = running.stop().await;
    println!("demo: {seen} of {expected} settlements seen");
    match result {
        Ok(()) if seen == expected => ExitCode::SUCCESS,
        Ok(()) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("demo: {error}");
            ExitCode::FAILURE
        }
    }
}
