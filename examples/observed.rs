//! The service of docs/observability.md: tracing, metrics and health in one service.
//! `cargo run -p examples --example observed` (spans to OTEL_EXPORTER_OTLP_ENDPOINT).

use ruststream::observe::{Metrics, init_logs, init_tracing};
use ruststream::{App, Mount};

async fn place(order: u64) {
    println!("order {order}");
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logs()?; // RUST_LOG (default info); RUSTSTREAM_LOG_FORMAT=json for JSON lines
    let tracing = init_tracing()?; // OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT
    let metrics = Metrics::new();
    let broker = ruststream::connect("memory://").await?;
    let orders = Mount::new("orders")
        .max_attempts(5)
        .dead_letter("orders.dead");
    App::with_broker(broker)
        .tracing(&tracing) // spans, and the trace context in every message's headers
        .metrics(&metrics) // counted per subscription and per publish destination
        .http("0.0.0.0:9090".parse()?) // /metrics, /health, /ready
        .mount(orders, place)
        .run()
        .await?;
    tracing.provider().shutdown()?; // the last spans exported before the process ends
    Ok(())
}
