//! Reconnection: the broker closes the adapter's connection (as an operator or a broker
//! restart would); the subscription reports it once, detaches, consumes again on a new
//! connection and attaches; settlements of the lost channel are `Disconnected` and their
//! deliveries come back; publishing goes on.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{AckError, Broker, Message, Settlement, SubscribeSpec, Subscription};
use ruststream_lapin::ConnectOptions;
use support::{QueueSpec, Rabbit, broker_with, declare, unique, waiting};

async fn next(sub: &mut Subscription) -> Result<ruststream_core::Delivery, String> {
    match tokio::time::timeout(Duration::from_secs(20), sub.deliveries.next()).await {
        Ok(Some(Ok(d))) => Ok(d),
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => panic!("the subscription ended"),
        Err(_) => panic!("nothing within 20 s"),
    }
}

async fn consumes_again_after_the_connection_is_closed(rabbit: Rabbit) {
    let queue = unique("recover");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let name = unique("conn");
    let broker = broker_with(rabbit, ConnectOptions::new().name(name.clone())).await;
    let publisher = broker.publisher();
    publisher
        .publish(queue.as_str().into(), Message::new("one"))
        .await
        .expect("sent");
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.in_flight = 8;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let attached = sub.attached.clone();
    let held = next(&mut sub).await.expect("a delivery");
    assert_eq!(held.broker_attempt(), Some(1));

    assert_eq!(
        rabbit.close_connections(&name),
        1,
        "{rabbit:?}: our connection is listed"
    );
    // The loss is reported once, and the subscription detaches.
    let report = next(&mut sub).await.expect_err("the loss is reported");
    assert!(report.contains("consuming again"), "{report}");
    // The delivery held across the loss cannot be settled: the broker put it back.
    assert_eq!(
        held.settle(Settlement::Accept).await,
        Err(AckError::Disconnected)
    );
    // It comes back on the new connection (a quorum queue counts the return).
    let again = next(&mut sub).await.expect("redelivered");
    assert_eq!(again.payload().as_ref(), b"one");
    assert_eq!(again.broker_attempt(), Some(2), "{rabbit:?}");
    assert!(attached.is_attached());
    assert_eq!(attached.reconnects(), 1);
    again
        .settle(Settlement::Accept)
        .await
        .expect("acked on the new channel");

    // Publishing goes on over the new connection.
    publisher
        .publish(queue.as_str().into(), Message::new("two"))
        .await
        .expect("sent again");
    let d = next(&mut sub).await.expect("the new message");
    assert_eq!(d.payload().as_ref(), b"two");
    d.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

async fn a_publish_waits_for_the_connection(rabbit: Rabbit) {
    let queue = unique("publish-recover");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let name = unique("conn");
    let broker = broker_with(rabbit, ConnectOptions::new().name(name.clone())).await;
    let publisher = broker.publisher();
    publisher
        .publish(queue.as_str().into(), Message::new("a"))
        .await
        .expect("sent");
    assert_eq!(rabbit.close_connections(&name), 1);
    // Wait until the client has noticed, then publish: it reconnects by itself.
    tokio::time::sleep(Duration::from_millis(200)).await;
    publisher
        .publish(queue.as_str().into(), Message::new("b"))
        .await
        .expect("sent after the loss");
    assert_eq!(waiting(rabbit, &queue).await, 2);
    broker.close().await;
}

async fn consumes_again_after_the_broker_cancels_the_consumer(rabbit: Rabbit) {
    // A deleted queue cancels its consumers (a channel-level loss, the connection stays).
    let queue = unique("cancelled");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker_with(rabbit, ConnectOptions::new()).await;
    let mut sub = broker
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    let attached = sub.attached.clone();
    support::delete(rabbit, &queue).await;
    let report = next(&mut sub).await.expect_err("the cancel is reported");
    assert!(report.contains("cancelled"), "{report}");
    assert!(!attached.is_attached());
    // Consuming fails while the queue is missing; once it is back, the subscription
    // reads it again by itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("back"))
        .await
        .expect("sent");
    let d = next(&mut sub).await.expect("consumed again");
    assert_eq!(d.payload().as_ref(), b"back");
    assert!(attached.is_attached());
    d.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
}

/// Deliveries buffered for the handlers when the connection drops are of a channel that
/// is gone: RabbitMQ has put them back, and they cannot be settled. They are not handed
/// out (a handler running one would only make a duplicate); each message comes once, on
/// the new channel. Without it, with the default prefetch (256) a connection reset made
/// a duplicate of every message buffered.
async fn a_delivery_of_a_lost_channel_is_not_handed_out(rabbit: Rabbit) {
    const MESSAGES: usize = 5;
    let queue = unique("stale");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let name = unique("conn");
    let broker = broker_with(rabbit, ConnectOptions::new().name(name.clone())).await;
    for i in 0..MESSAGES {
        broker
            .publisher()
            .publish(queue.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("sent");
    }
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.in_flight = 8;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let attached = sub.attached.clone();
    let held = next(&mut sub).await.expect("a delivery");
    // The rest arrives and waits in the subscription's buffer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rabbit.close_connections(&name), 1, "{rabbit:?}");
    assert!(
        support::until(Duration::from_secs(10), || !attached.is_attached()).await,
        "{rabbit:?}: the loss is seen"
    );
    drop(held);
    let report = next(&mut sub)
        .await
        .expect_err("the loss is reported first");
    assert!(report.contains("consuming again"), "{report}");
    let mut seen = Vec::new();
    for _ in 0..MESSAGES {
        let d = next(&mut sub).await.expect("redelivered");
        assert_eq!(
            d.broker_attempt(),
            Some(2),
            "{rabbit:?}: from the new channel"
        );
        seen.push(String::from_utf8_lossy(d.payload()).into_owned());
        d.settle(Settlement::Accept)
            .await
            .expect("every delivery handed out can be settled");
    }
    seen.sort();
    assert_eq!(seen, ["m0", "m1", "m2", "m3", "m4"], "{rabbit:?}");
    broker.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod rabbitmq3 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V3).await; })*
        }
        mod rabbitmq4 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V4).await; })*
        }
    };
}

on_both!(
    consumes_again_after_the_connection_is_closed,
    a_delivery_of_a_lost_channel_is_not_handed_out,
    a_publish_waits_for_the_connection,
    consumes_again_after_the_broker_cancels_the_consumer
);
