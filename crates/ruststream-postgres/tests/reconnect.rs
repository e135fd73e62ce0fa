//! A lost connection: every connection of a consumer's broker (its pool and its `LISTEN`
//! connection) is terminated by the server; the consumer reconnects by itself and is
//! woken by the next publish, without waiting for its poll.

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_outlives_its_connections_being_terminated() {
    let schema = support::unique_schema("reconnect");
    // Its connections carry the schema as their name, so they can be found and cut.
    let consumer = support::broker(&schema, &format!("&poll=60s&application_name={schema}")).await;
    let producer = support::broker(&schema, "").await;
    let mut stream = consumer
        .subscribe(SubscribeSpec::new("jobs"))
        .await
        .expect("subscribed")
        .deliveries;
    tokio::time::sleep(Duration::from_millis(200)).await;

    support::terminate_connections(producer.pool(), &schema).await;

    let sent = Instant::now();
    let message = Message::new("after the cut");
    producer
        .publisher()
        .publish("jobs".into(), message)
        .await
        .expect("published");
    let delivery = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
            Ok(Some(Ok(delivery))) => break delivery,
            // A claim on a cut connection fails once, reported, and is tried again.
            Ok(Some(Err(error))) => eprintln!("reported: {error}"),
            Ok(None) => panic!("the stream ended"),
            Err(_) => panic!("nothing within 10s of the publish"),
        }
    };
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "woken late: {:?}",
        sent.elapsed()
    );
    assert_eq!(delivery.payload().as_ref(), b"after the cut");
    delivery.settle(Settlement::Accept).await.expect("accepted");
    consumer.close().await;
    producer.close().await;
    support::drop_schema(&schema);
}
