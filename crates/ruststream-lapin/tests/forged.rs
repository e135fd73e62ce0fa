//! A producer cannot forge the attempt: RabbitMQ's quorum queues count deliveries in
//! `x-delivery-count`, and a producer may publish a header of that name itself. The
//! adapter believes it only on a redelivery (the broker then writes its own count over
//! it; on a first delivery it leaves the producer's alone), and never publishes one.

mod support;

use lapin::options::{BasicGetOptions, BasicPublishOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec, Subscription};
use support::{QueueSpec, Rabbit, broker, declare, next, unique, waiting};

/// Publishes with a plain AMQP client, `x-delivery-count` = `value` in the headers.
async fn publish_forged(rabbit: Rabbit, queue: &str, value: AMQPValue) {
    let connection = Connection::connect(&rabbit.url(), ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    let mut headers = FieldTable::default();
    headers.insert("x-delivery-count".into(), value);
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            b"forged",
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("confirmed");
    let _ = connection.close(200, "published".into()).await;
}

/// The first delivery is attempt 1 and shows no `x-delivery-count`; after a requeue the
/// broker's count takes over.
async fn counts_from_the_broker(rabbit: Rabbit, sub: &mut Subscription) {
    let d = next(sub).await;
    assert_eq!(
        (d.broker_attempt(), d.headers().get_str("x-delivery-count")),
        (Some(1), None),
        "{rabbit:?}: a producer's x-delivery-count was believed"
    );
    d.settle(Settlement::Requeue).await.expect("requeued");
    let d = next(sub).await;
    assert_eq!(
        (d.broker_attempt(), d.headers().get_str("x-delivery-count")),
        (Some(2), Some("1")),
        "{rabbit:?}: the broker's count on a redelivery"
    );
    d.settle(Settlement::Accept).await.expect("acked");
}

async fn a_forged_delivery_count_is_not_believed(rabbit: Rabbit) {
    let queue = unique("forged");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let lapin = broker(rabbit).await;
    let mut sub = lapin
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    assert!(sub.capabilities.counts);
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    for value in [
        AMQPValue::LongLongInt(99),
        AMQPValue::LongInt(3),
        text("99"),
    ] {
        publish_forged(rabbit, &queue, value).await;
        counts_from_the_broker(rabbit, &mut sub).await;
    }
    // Through the framework's publisher the header does not even go out.
    lapin
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("own").with_header("x-delivery-count", "99"),
        )
        .await
        .expect("sent");
    counts_from_the_broker(rabbit, &mut sub).await;
    drop(sub);
    // As any client sees it (a classic queue: RabbitMQ writes a quorum queue's
    // x-delivery-count on basic.get, even 0): no x-delivery-count left the framework.
    let classic = unique("forged-classic");
    declare(rabbit, &[(classic.clone(), QueueSpec::classic())]);
    lapin
        .publisher()
        .publish(
            classic.as_str().into(),
            Message::new("own").with_header("x-delivery-count", "99"),
        )
        .await
        .expect("sent");
    let connection = Connection::connect(&rabbit.url(), ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    let got = channel
        .basic_get(classic.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .expect("basic.get")
        .expect("the message");
    let sent = got
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("x-delivery-count").cloned());
    assert_eq!(sent, None, "{rabbit:?}: published with x-delivery-count");
    let _ = connection.close(200, "got".into()).await;
    lapin.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_delivery_count_is_not_believed_3() {
    a_forged_delivery_count_is_not_believed(Rabbit::V3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_delivery_count_is_not_believed_4() {
    a_forged_delivery_count_is_not_believed(Rabbit::V4).await;
}
