//! A producer's own `delivery-count` in the header section is not the broker's count: a
//! message published with `delivery-count = 99` to a quorum queue must still get every
//! attempt the mount declares.

mod support;

use fe2o3_amqp::types::messaging::{Data, Header, Message as AmqpMessage};
use fe2o3_amqp::types::primitives::Binary;
use fe2o3_amqp::{Connection, Sender, Session};
use ruststream_amqp::SubscribeOptions;
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("forged");
    q.classic("forged-classic");
}

/// Sends `body` with a header section whose `delivery-count` is `count`.
async fn send_with_count(queue: &str, body: &[u8], count: u32) {
    let mut connection = Connection::open("forged-sender", url().as_str())
        .await
        .expect("raw connection");
    let mut session = Session::begin(&mut connection).await.expect("session");
    let mut sender = Sender::attach(&mut session, "raw", format!("/queues/{queue}"))
        .await
        .expect("attach");
    let message = AmqpMessage::builder()
        .header(Header {
            durable: true,
            delivery_count: count,
            ..Header::default()
        })
        .data(Data(Binary::from(body.to_vec())))
        .build();
    let outcome = sender.send(message).await.expect("send");
    assert!(outcome.is_accepted());
    let _ = sender.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
}

async fn first_attempt_of_a_forged_message(queue: &str) -> u32 {
    let broker = broker().await;
    send_with_count(queue, b"forged", 99).await;
    let mut sub = subscribe(&broker, spec(queue, SubscribeOptions::new(), cap(5))).await;
    let delivery = next(&mut sub, 10).await;
    let attempt = delivery.redelivery_count();
    delivery
        .settle(ruststream_core::Settlement::Accept)
        .await
        .expect("accept");
    attempt
}

#[tokio::test]
async fn a_producers_delivery_count_is_not_the_attempt_on_a_quorum_queue() {
    let queue = name(topology, "forged");
    assert_eq!(first_attempt_of_a_forged_message(&queue).await, 1);
}

#[tokio::test]
async fn a_producers_delivery_count_is_not_the_attempt_on_a_classic_queue() {
    let queue = name(topology, "forged-classic");
    assert_eq!(first_attempt_of_a_forged_message(&queue).await, 1);
}
