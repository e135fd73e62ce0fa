//! Connecting: a cluster nobody answers for is a clear error, and soon (librdkafka would
//! try for the whole metadata timeout, logging each failed try at ERROR); a bootstrap
//! list with one server down still connects through the others.
//! Needs a Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::time::{Duration, Instant};

use ruststream_core::Broker;
use ruststream_kafka::{ConnectError, KafkaBroker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_nobody_answers_for_is_a_clear_error_at_once() {
    let port = support::free_port();
    let started = Instant::now();
    let error = KafkaBroker::connect(&format!("kafka://127.0.0.1:{port}"))
        .await
        .err()
        .expect("nothing listens there");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(error, ConnectError::Unreachable { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("cannot reach kafka at 127.0.0.1:{port}")),
        "{text}"
    );
    assert!(text.contains("Connection refused"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_server_down_is_passed_over() {
    let bootstrap = support::bootstrap();
    let port = support::free_port();
    let broker = KafkaBroker::connect(&format!("kafka://127.0.0.1:{port},{bootstrap}"))
        .await
        .unwrap_or_else(|error| panic!("through {bootstrap}: {error}. {}", support::HOW));
    broker.close().await;
}
