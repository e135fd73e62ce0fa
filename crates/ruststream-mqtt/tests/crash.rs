//! A process killed (SIGKILL) with a delivery in hand: no PUBACK, no DISCONNECT. With the
//! default options its session stays with the broker, and the delivery comes again to
//! the session's next connection (the same client id: same host, group and filter).
//! Needs an MQTT 5 broker (Mosquitto 2 on 127.0.0.1:1883; `RUSTSTREAM_MQTT_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_conformance::child::Child;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

/// The child's topic, set by the parent.
const CHILD: &str = "RUSTSTREAM_MQTT_CRASH_TOPIC";

/// In the child only (the parent runs it): takes one delivery, says so, and waits to be
/// killed. Run alone, without the parent's variable, it has nothing to do.
#[tokio::test]
async fn child_holding_a_delivery() {
    let Ok(topic) = std::env::var(CHILD) else {
        return;
    };
    let broker = support::connect().await;
    let mut deliveries = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let held = deliveries.next().await;
    assert!(matches!(held, Some(Ok(_))), "{held:?}");
    println!("holding");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_processs_delivery_comes_back_to_its_session() {
    let topic = support::unique("crash");
    // The session first (the child's, by its client id), so that the publish has a
    // subscriber to go to while no process is connected.
    let first = support::connect().await;
    drop(
        first
            .subscribe(SubscribeSpec::new(topic.as_str()))
            .await
            .expect("subscribed"),
    );
    first.close().await;
    let publisher = support::connect().await;
    publisher
        .publisher()
        .publish(topic.as_str().into(), Message::new("held"))
        .await
        .expect("published into the session");

    Child::started(
        "child_holding_a_delivery",
        (CHILD, &topic),
        "holding",
        Duration::from_secs(30),
    )
    .await
    .kill();

    let after = support::connect().await;
    let mut deliveries = after
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed after the kill")
        .deliveries;
    let back = tokio::time::timeout(Duration::from_secs(10), deliveries.next())
        .await
        .expect("back in time")
        .expect("open")
        .expect("a delivery");
    assert_eq!(back.payload().as_ref(), b"held");
    back.settle(Settlement::Accept).await.expect("acked");
    after.close().await;
    publisher.close().await;
}
