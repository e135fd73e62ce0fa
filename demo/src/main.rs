//! The ruststream demo service.
//!
//! Mounts one handler that shows every outcome, with `max_attempts(3)` and a dead
//! letter, plus a handler on the dead letter; publishes a few orders and one payload
//! that does not decode; prints what happened to each; stops when all are settled.
//! Its command line is `ruststream::cli`'s: `run` (the default) and the dead-letter
//! tools.
//!
//! ```text
//! cargo run -p demo                      # on the in-memory broker
//! cargo run -p demo -- --broker redis://127.0.0.1:6379
//! cargo run -p demo -- --broker amqp://guest:guest@127.0.0.1:5673
//! cargo run -p demo -- --broker 'amqp091://guest:guest@127.0.0.1:5672/%2f?declare=classic'
//! cargo run -p demo -- --broker nats://127.0.0.1:4222
//! cargo run -p demo -- --broker postgres://postgres@127.0.0.1:5432/test
//! cargo run -p demo -- --broker 'kafka://127.0.0.1:9092?partitions=3'
//! cargo run -p demo -- --broker mqtt://127.0.0.1:1883
//! RUSTSTREAM_BROKER_URL=redis://127.0.0.1:6379 cargo run -p demo
//! cargo run -p demo -- --broker redis://127.0.0.1:6379 dead-letters list demo.orders.dead
//! cargo run -p demo -- asyncapi --format yaml   # its AsyncAPI 3.0 document
//! cargo run -p demo -- --help
//! RUSTSTREAM_HTTP_PORT=9090 cargo run -p demo   # also serves /metrics, /ready, /health
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo run -p demo   # traces, OTLP/HTTP
//! ```
//!
//! Given a port (`RUSTSTREAM_HTTP_PORT`), the demo serves its metrics and readiness on
//! 127.0.0.1 and runs on after the settlements until Ctrl-C.
//!
//! Two variables change its addresses and mounts, for trying the dead-letter tools
//! (and for the tests): `DEMO_PREFIX` goes before both addresses (`DEMO_PREFIX=t1.`:
//! `t1.demo.orders`), and `DEMO_KEEP_DEAD_LETTERS=1` leaves the dead-letter handler
//! out, so that the dead letter stays at its address.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ruststream::cli::Cli;
use ruststream::core::{Broker, Message, Original, Plan};
use ruststream::{
    App, Attempt, Mount, Outcome, Settled, ack, drop, publisher::PublishTarget, retry, retry_after,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

const ORDERS: &str = "demo.orders";
const DEAD: &str = "demo.orders.dead";

/// The demo's addresses and whether its dead-letter handler is mounted.
#[derive(Clone)]
struct Setup {
    orders: String,
    dead: String,
    keep_dead_letters: bool,
}

impl Setup {
    fn from_env() -> Self {
        let prefix = std::env::var("DEMO_PREFIX").unwrap_or_default();
        Self {
            orders: format!("{prefix}{ORDERS}"),
            dead: format!("{prefix}{DEAD}"),
            keep_dead_letters: std::env::var("DEMO_KEEP_DEAD_LETTERS").is_ok_and(|v| v == "1"),
        }
    }
}

/// An order of the demo.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Order {
    /// The order's number.
    id: u32,
    /// What the handler does with it: `ok`, `bad` (dropped), `flaky` and `slow` (retried
    /// once), `doomed` (retried until the dead letter).
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
    // Logs go to stderr: stdout is the commands' output (a list, a document).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let setup = Setup::from_env();
    let (tx, settled) = mpsc::unbounded_channel();
    let built = setup.clone();
    Cli::new(move |broker| app(broker, &built, tx))
        .about("The ruststream demo: every outcome, a dead letter, and the tools to handle it.")
        .version(env!("CARGO_PKG_VERSION"))
        .run_with(move |app| run(app, setup, settled))
        .main()
        .await
}

/// The demo's mounts and what it publishes (also what its AsyncAPI document shows).
fn service(app: App, setup: &Setup) -> App {
    let orders_mount = Mount::new(setup.orders.as_str())
        .payload::<Order>()
        .max_attempts(3)
        .dead_letter(setup.dead.as_str());
    let app = app.name("demo").mount(orders_mount, orders).publishes(
        PublishTarget::new(setup.orders.as_str())
            .payload::<Order>()
            .description("The demo publishes its own orders."),
    );
    if setup.keep_dead_letters {
        app
    } else {
        app.mount(
            Mount::new(setup.dead.as_str()).payload::<Order>(),
            dead_letters,
        )
    }
}

fn app(broker: Arc<dyn Broker>, setup: &Setup, tx: mpsc::UnboundedSender<String>) -> App {
    service(App::with_broker(broker), setup)
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
        .shutdown_timeout(Duration::from_secs(5))
}

async fn run(
    app: App,
    setup: Setup,
    mut settled: mpsc::UnboundedReceiver<String>,
) -> Result<(), String> {
    println!("demo on the {} broker", app.broker().name());
    let app = match std::env::var("RUSTSTREAM_HTTP_PORT")
        .ok()
        .as_deref()
        .map(str::parse::<u16>)
    {
        None => app,
        Some(Ok(port)) => app
            .metrics(&ruststream::observe::Metrics::new())
            .http(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        Some(Err(error)) => return Err(format!("RUSTSTREAM_HTTP_PORT: {error}")),
    };
    // Given a collector, traces every delivery and publish (OTLP/HTTP).
    let tracing = match std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Some(_) => Some(ruststream::observe::init_tracing().map_err(|e| e.to_string())?),
        None => None,
    };
    let app = match &tracing {
        Some(tracing) => app.tracing(tracing),
        None => app,
    };
    let publisher = app.publisher();
    let running = app.start().await.map_err(|e| e.to_string())?;

    let kinds = ["ok", "bad", "flaky", "slow", "doomed"];
    for (id, kind) in (1..).zip(kinds) {
        let order = Order {
            id,
            kind: kind.into(),
        };
        if let Err(error) = publisher.publish(setup.orders.as_str(), &order).await {
            eprintln!("demo: publish failed: {error}");
        }
    }
    let garbage = Message::new("this is not json");
    if let Err(error) = publisher
        .publish_message(setup.orders.as_str(), garbage)
        .await
    {
        eprintln!("demo: publish failed: {error}");
    }

    // ok 1 + bad 1 + flaky 2 + slow 2 + doomed 3 + its dead letter 1 + garbage 1. A broker
    // that dead-letters by itself (a quorum queue) also moves what is dropped (order 2,
    // the garbage) to the dead letters, whose handler settles those too: once the demo's
    // own are in, what comes within half a second more is shown as well.
    let expected = if setup.keep_dead_letters { 10 } else { 11 };
    let mut seen = 0;
    loop {
        let wait = if seen < expected {
            Duration::from_secs(10)
        } else {
            Duration::from_millis(500)
        };
        match tokio::time::timeout(wait, settled.recv()).await {
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
    if let Some(tracing) = tracing
        && let Err(error) = tracing.provider().shutdown()
    {
        eprintln!("demo: the last spans were not exported: {error}");
    }
    if seen > expected {
        println!(
            "demo: {seen} settlements seen: the {expected} every broker shows, and {} of what the broker dead-lettered itself",
            seen - expected
        );
    } else {
        println!("demo: {seen} of {expected} settlements seen");
    }
    result.map_err(|e| e.to_string())?;
    if seen >= expected {
        Ok(())
    } else {
        Err(format!("only {seen} of {expected} settlements seen"))
    }
}

#[cfg(test)]
mod tests {
    use ruststream::asyncapi::{AsyncApiInfo, Format};
    use ruststream::memory::MemoryBroker;

    use super::*;

    /// The demo's AsyncAPI document, written (JSON and YAML) to
    /// `$RUSTSTREAM_ASYNCAPI_OUT` (default: `asyncapi/` in Cargo's temporary directory)
    /// for `scripts/test` to validate against the AsyncAPI 3.0.0 schema and parser.
    #[test]
    fn asyncapi_document() {
        let setup = Setup {
            orders: ORDERS.into(),
            dead: DEAD.into(),
            keep_dead_letters: false,
        };
        let app = service(App::new(MemoryBroker::new()), &setup);
        let info = AsyncApiInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            server: Some(ruststream::broker::server("memory://").expect("memory")),
            ..AsyncApiInfo::default()
        };
        let document = app.asyncapi(&info).expect("document");
        assert_eq!(document["info"]["title"], "demo");
        let addresses: Vec<&str> = document["channels"]
            .as_object()
            .expect("channels")
            .values()
            .filter_map(|c| c["address"].as_str())
            .collect();
        assert_eq!(addresses, [ORDERS, DEAD]);
        let receive = &document["operations"]["receive.demo.orders"];
        assert_eq!(
            receive["x-ruststream-declaration"],
            serde_json::json!({"maxAttempts": 3, "deadLetter": DEAD, "retryTo": ORDERS})
        );
        assert_eq!(
            document["components"]["schemas"]["Order"]["required"],
            serde_json::json!(["id", "kind"])
        );

        let dir = std::env::var_os("RUSTSTREAM_ASYNCAPI_OUT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("ruststream-asyncapi"));
        std::fs::create_dir_all(&dir).expect("output directory");
        for (format, extension) in [(Format::Json, "json"), (Format::Yaml, "yaml")] {
            let text = app.asyncapi_string(&info, format).expect("document");
            std::fs::write(dir.join(format!("demo.{extension}")), text).expect("write");
        }
    }
}
