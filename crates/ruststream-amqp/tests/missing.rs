//! Publishing to a queue that does not exist: an error naming it, at once, and the
//! connection stays up. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use std::time::{Duration, Instant};

use ruststream_core::{Broker, Message, PublishErrorKind};
use support::*;

fn topology(q: &mut Queues) {
    q.classic("there");
}

#[tokio::test]
async fn publishing_to_a_missing_queue_names_it_and_keeps_the_connection() {
    let broker = broker().await;
    let there = name(topology, "there");
    let missing = unique("missing");
    broker
        .publisher()
        .publish(there.as_str().into(), Message::new("warm-up"))
        .await
        .expect("publish to an existing queue");
    let started = Instant::now();
    let err = broker
        .publisher()
        .publish(missing.as_str().into(), Message::new("x"))
        .await
        .expect_err("no such queue");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not after the publish timeout: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err.kind, PublishErrorKind::BadAddress(why) if why.contains(&missing)),
        "{err:?}"
    );
    assert_eq!(err.message.payload.as_ref(), b"x", "the message comes back");
    // The connection is still up: the next publish goes through at once.
    let started = Instant::now();
    broker
        .publisher()
        .publish(there.as_str().into(), Message::new("after"))
        .await
        .expect("publish after the refusal");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    let mut sub = subscribe(
        &broker,
        spec(
            &there,
            ruststream_amqp::SubscribeOptions::new(),
            Default::default(),
        ),
    )
    .await;
    for want in ["warm-up", "after"] {
        let d = next(&mut sub, 5).await;
        assert_eq!(d.payload().as_ref(), want.as_bytes());
        d.settle(ruststream_core::Settlement::Accept)
            .await
            .expect("accept");
    }
    broker.close().await;
}

#[tokio::test]
async fn publishing_to_a_missing_exchange_names_it() {
    let broker = broker().await;
    let exchange = format!("/exchanges/{}", unique("no-exchange"));
    let err = broker
        .publisher()
        .publish(exchange.as_str().into(), Message::new("x"))
        .await
        .expect_err("no such exchange");
    assert!(
        matches!(&err.kind, PublishErrorKind::BadAddress(why) if why.contains(&exchange)),
        "{err:?}"
    );
    broker.close().await;
}
