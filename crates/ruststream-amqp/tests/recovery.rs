//! Connection drops: unsettled deliveries come back, the subscription re-attaches by
//! itself, the publisher reconnects or hands the message back. The broker is reached
//! through a TCP proxy that the test cuts, so other tests are not disturbed.

mod support;

use std::time::Duration;

use ruststream_amqp::{ConnectOptions, SubscribeOptions};
use ruststream_core::{AckError, Broker, Declaration, Message, PublishErrorKind, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("drop");
    q.quorum("pub");
    q.quorum("stale");
}

fn q(role: &str) -> String {
    name(topology, role)
}

fn fast() -> ConnectOptions {
    ConnectOptions::new()
        .backoff(Duration::from_millis(50), Duration::from_millis(500))
        .publish_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn a_dropped_connection_gives_unsettled_deliveries_back_and_consuming_resumes() {
    let direct = broker().await;
    let queue = q("drop");
    let proxy = support::proxy().await;
    let broker = broker_at(&proxy.through(&support::url()), fast()).await;
    publish_n(&direct, &queue, 3, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub, 10).await;
        assert_eq!(d.broker_attempt(), Some(1));
        held.push(d);
    }
    proxy.cut();
    // The subscription re-attaches by itself; the broker hands the three back, counted.
    let mut again = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub, 20).await;
        assert_eq!(
            d.broker_attempt(),
            Some(2),
            "a dropped connection counts on quorum queues"
        );
        again.push(String::from_utf8_lossy(d.payload()).into_owned());
        d.settle(Settlement::Accept)
            .await
            .expect("accept on the new link");
    }
    again.sort();
    assert_eq!(again, ["m-0", "m-1", "m-2"]);
    for d in held {
        assert!(matches!(
            d.settle(Settlement::Accept).await,
            Err(AckError::Disconnected)
        ));
    }
    // Publishing through the reconnected connection works, and so does consuming.
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("after"))
        .await
        .expect("publish after reconnect");
    let d = next(&mut sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"after");
    d.settle(Settlement::Accept).await.expect("accept");
    nothing_for(&mut sub, 300).await;
    broker.close().await;
    direct.close().await;
}

/// Deliveries that arrived on a link and were not yet taken when it was lost are not
/// handed out: the broker took them back and sends them again, so handling them would
/// only make duplicates whose settlements fail (a reset every few seconds with a credit
/// of 256 once kept a queue from draining).
#[tokio::test]
async fn deliveries_of_a_lost_link_not_yet_taken_are_skipped() {
    let direct = broker().await;
    let queue = q("stale");
    let proxy = support::proxy().await;
    let broker = broker_at(&proxy.through(&support::url()), fast()).await;
    publish_n(&direct, &queue, 10, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let first = next(&mut sub, 10).await;
    // The other nine are in the subscription's buffer by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut again = Vec::new();
    while again.len() < 10 {
        let d = next(&mut sub, 20).await;
        assert_eq!(
            d.broker_attempt(),
            Some(2),
            "a delivery of the lost link was handed out: {:?}",
            String::from_utf8_lossy(d.payload())
        );
        again.push(String::from_utf8_lossy(d.payload()).into_owned());
        d.settle(Settlement::Accept).await.expect("accept");
    }
    again.sort();
    let expected: Vec<String> = (0..10).map(|i| format!("m-{i}")).collect();
    assert_eq!(again, expected);
    drop(first);
    nothing_for(&mut sub, 300).await;
    broker.close().await;
    direct.close().await;
}

#[tokio::test]
async fn a_publisher_that_cannot_reach_the_broker_hands_the_message_back() {
    let queue = q("pub");
    let proxy = support::proxy().await;
    let options = fast().publish_timeout(Duration::from_millis(800));
    let broker = broker_at(&proxy.through(&support::url()), options).await;
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("first"))
        .await
        .expect("publish while connected");
    proxy.down();
    let started = tokio::time::Instant::now();
    let err = broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("unsent").with_header("k", "v"),
        )
        .await
        .expect_err("the broker is unreachable");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err.kind, PublishErrorKind::Disconnected), "{err}");
    assert_eq!(err.message.payload.as_ref(), b"unsent");
    assert_eq!(err.message.headers.get_str("k"), Some("v"));
    broker.close().await;
    // The first message made it.
    let direct = support::broker().await;
    let mut sub = subscribe(
        &direct,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"first");
    // Settled: a delivery dropped unsettled would be released and come again.
    d.settle(ruststream_core::Settlement::Accept)
        .await
        .expect("accept");
    nothing_for(&mut sub, 300).await;
    direct.close().await;
}
