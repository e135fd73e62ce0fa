//! Reconnection after a broker restart (`scripts/rabbitmq4.sh restart`): the
//! subscription resumes by itself, durable messages survive, the publisher reconnects.
//!
//! This restarts the shared broker: it is one test in a binary of its own, and cargo
//! runs test binaries one after another, so `cargo test -p ruststream-amqp` is safe as
//! long as nothing else uses the broker at the same time. Run alone with
//! `cargo test -p ruststream-amqp --test restart`.

mod support;

use std::time::Duration;

use ruststream_amqp::{ConnectOptions, SubscribeOptions};
use ruststream_core::{AckError, Broker, Declaration, Message, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("restart");
}

#[tokio::test]
async fn consuming_and_publishing_resume_after_a_broker_restart() {
    let queue = name(topology, "restart");
    let options = ConnectOptions::new()
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .publish_timeout(Duration::from_secs(60));
    let broker = broker_with(options).await;
    let publisher = broker.publisher();
    publish_n(&broker, &queue, 2, "before").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let first = next(&mut sub, 10).await;
    assert_eq!(first.payload().as_ref(), b"before-0");
    first.settle(Settlement::Accept).await.expect("accept");
    let held = next(&mut sub, 10).await;
    assert_eq!(held.payload().as_ref(), b"before-1");

    tokio::task::spawn_blocking(|| rabbitmq4(&["restart"], None))
        .await
        .expect("restart");

    // No manual step: the unsettled durable message comes back on the re-attached link.
    let again = next(&mut sub, 60).await;
    assert_eq!(again.payload().as_ref(), b"before-1");
    assert!(matches!(
        held.settle(Settlement::Accept).await,
        Err(AckError::Disconnected)
    ));
    again
        .settle(Settlement::Accept)
        .await
        .expect("accept after restart");
    publisher
        .publish(queue.as_str().into(), Message::new("after"))
        .await
        .expect("publish after restart");
    let d = next(&mut sub, 30).await;
    assert_eq!(d.payload().as_ref(), b"after");
    d.settle(Settlement::Accept).await.expect("accept");
    nothing_for(&mut sub, 500).await;
    broker.close().await;
}
