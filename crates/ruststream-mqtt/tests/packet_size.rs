//! The server's Maximum Packet Size (its CONNACK's, Mosquitto's `max_packet_size`): a
//! publish larger than it fails with `TooLarge` naming that limit and returns the
//! message, and the publishing connection goes on (a packet over the limit would be
//! refused by the client's codec, losing the connection and every publish in flight on
//! it). Runs a Mosquitto of its own (`/usr/sbin/mosquitto`, the machine's package) on a
//! free port, configured with `max_packet_size 4096`.

mod support;

use std::time::Duration;

use ruststream_conformance::mosquitto::Mosquitto;
use ruststream_core::{Address, Broker, Message, PublishErrorKind};
use ruststream_mqtt::MqttBroker;

/// The limit the broker announces.
const LIMIT: usize = 4096;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_over_the_servers_packet_size_names_it_and_the_connection_goes_on() {
    let mosquitto = Mosquitto::start(&format!("max_packet_size {LIMIT}\n"));
    let url = format!("mqtt://127.0.0.1:{}", mosquitto.port());
    let broker = MqttBroker::connect(&url).await.expect("connected");
    let publisher = broker.publisher();
    let to = Address::new(support::unique("size"));
    // Default options: a publish must match a subscription.
    let _subscription = broker
        .subscribe(ruststream_core::SubscribeSpec::new(to.clone()))
        .await
        .expect("subscribed");
    // Once connected, the CONNACK's limit is known: a small publish first.
    publisher
        .publish(to.clone(), Message::new("small"))
        .await
        .expect("a small publish");
    let large = Message::new(vec![b'x'; LIMIT * 2]);
    let failed = publisher
        .publish(to.clone(), large.clone())
        .await
        .expect_err("over the server's maximum packet size");
    match failed.kind {
        PublishErrorKind::TooLarge { size, limit } => {
            assert_eq!(limit, LIMIT, "the server's limit");
            assert!(size > LIMIT, "{size}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(
        failed.message.payload, large.payload,
        "the message comes back"
    );
    // The connection is still there: the next publishes go out at once.
    for n in 0..5 {
        tokio::time::timeout(
            Duration::from_secs(2),
            publisher.publish(to.clone(), Message::new(format!("after {n}"))),
        )
        .await
        .expect("at once, on the same connection")
        .expect("published");
    }
    broker.close().await;
}
