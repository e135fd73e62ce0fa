//! When a settlement counts as done: once its disposition is handed to the session (the
//! connection's writer), not when it is queued; a settlement whose link is lost first
//! is `AckError::Disconnected`. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use ruststream_amqp::{ConnectOptions, SubscribeOptions};
use ruststream_core::{AckError, Broker, Declaration, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("written");
    q.quorum("lost");
}

#[tokio::test]
async fn settling_completes_when_the_disposition_is_written_not_when_queued() {
    let broker = broker().await;
    let queue = name(topology, "written");
    publish_n(&broker, &queue, 1, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut sub, 10).await;
    let mut settling = d.settle(Settlement::Accept);
    assert!(
        settling.take_ready().is_none(),
        "a settlement only queued for the link task is not done yet"
    );
    settling.await.expect("written");
    nothing_for(&mut sub, 500).await;
    drop(sub);
    empty(&broker, &queue, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn settlements_of_a_lost_link_are_disconnected_and_come_back() {
    let queue = name(topology, "lost");
    let proxy = support::proxy().await;
    let broker = broker_at(&proxy.through(&support::url()), ConnectOptions::new()).await;
    let n = 20;
    publish_n(&broker, &queue, n, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(next(&mut sub, 10).await);
    }
    proxy.cut();
    // The subscription reports the loss, then re-attaches.
    match tokio::time::timeout(
        std::time::Duration::from_secs(10),
        futures_util::StreamExt::next(&mut sub.deliveries),
    )
    .await
    {
        Ok(Some(Err(e))) => eprintln!("lost: {e}"),
        other => panic!("expected the link loss, got {other:?}"),
    }
    for d in held {
        let r = d.settle(Settlement::Accept).await;
        assert!(matches!(r, Err(AckError::Disconnected)), "{r:?}");
    }
    // None of them reached the broker: all come back.
    for _ in 0..n {
        let d = next(&mut sub, 20).await;
        d.settle(Settlement::Accept).await.expect("accept");
    }
    broker.close().await;
}
