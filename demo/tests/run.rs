//! The demo service itself, run as the README shows it, on every broker its one build
//! opens with only the URL changed: every outcome is shown, every settlement seen, and
//! nothing is logged at WARN or above but what the demo provokes (a payload that does not
//! decode, a dead letter, the start-up note that `retry_after` copies wait in the
//! process where the form has no delays of its own). Needs the brokers `scripts/test`
//! starts: Redis (6379), RabbitMQ 3 (5672) and 4 (5673), NATS (4222), PostgreSQL (5432),
//! Mosquitto (1883) and the Kafka-protocol broker (9092, `scripts/kafka.sh start`).

mod support;

use std::process::Command;

use support::{amqp_url, postgres_url, redis_url, unique_prefix};

/// What the demo itself makes the runtime log at WARN.
const PROVOKED: [&str; 3] = [
    "payload did not decode",
    "dead-lettered",
    "retry_after copies of this mount wait in this process",
];

/// Runs the demo with its dead-letter handler on `broker`, which must show every outcome
/// and log nothing the demo does not provoke.
fn run_on(broker: &str, what: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .env("RUSTSTREAM_BROKER_URL", broker)
        .env("DEMO_PREFIX", unique_prefix(what))
        .env_remove("DEMO_KEEP_DEAD_LETTERS")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the demo binary");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the demo on {broker} failed (is the broker running? scripts/test starts it)\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    // A run that saw fewer settlements than the demo makes fails (checked above).
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("demo: ") && l.contains(" settlements seen")),
        "no count of settlements: {stdout}"
    );
    for shown in ["dead letter: order 5 (doomed) gave up", "Drop (Decode("] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
    for line in stderr.lines() {
        let loud = line.contains(" WARN ") || line.contains(" ERROR ");
        assert!(
            !loud || PROVOKED.iter().any(|p| line.contains(p)),
            "logged on {broker}: {line}"
        );
    }
}

#[test]
fn the_demo_runs_on_mqtt() {
    let url =
        std::env::var("RUSTSTREAM_MQTT_URL").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".to_owned());
    run_on(&url, "run-mqtt");
}

/// A mount's topic must exist on Kafka: the URL's `partitions` makes a missing one.
#[test]
fn the_demo_runs_on_kafka() {
    let url = std::env::var("RUSTSTREAM_KAFKA_URL")
        .unwrap_or_else(|_| "kafka://127.0.0.1:9092".to_owned());
    let join = if url.contains('?') { '&' } else { '?' };
    run_on(&format!("{url}{join}partitions=3"), "run-kafka");
}

#[test]
fn the_demo_runs_on_postgres() {
    run_on(&postgres_url("ruststream_demo_run"), "run-postgres");
}

#[test]
fn the_demo_runs_in_memory() {
    run_on("memory://", "run-memory");
}

#[test]
fn the_demo_runs_on_redis() {
    run_on(&redis_url(), "run-redis");
}

/// AMQP 1.0 makes no queue unless told to: the URL's `declare` does it for both mounts
/// (the orders and their dead letters, which the first mount makes of the same type).
#[test]
fn the_demo_runs_on_amqp_1_0() {
    let url = amqp_url();
    let join = if url.contains('?') { '&' } else { '?' };
    run_on(&format!("{url}{join}declare=quorum"), "run-amqp");
}

#[test]
fn the_demo_runs_on_rabbitmq_over_amqp_0_9_1() {
    let url = std::env::var("RUSTSTREAM_LAPIN_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    run_on(&format!("amqp091://{rest}"), "run-lapin");
}

#[test]
fn the_demo_runs_on_nats() {
    let url =
        std::env::var("RUSTSTREAM_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    run_on(&url, "run-nats");
}
