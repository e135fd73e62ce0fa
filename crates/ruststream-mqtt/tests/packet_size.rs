//! The server's Maximum Packet Size (its CONNACK's, Mosquitto's `max_packet_size`): a
//! publish larger than it fails with `TooLarge` naming that limit and returns the
//! message, and the publishing connection goes on (a packet over the limit would be
//! refused by the client's codec, losing the connection and every publish in flight on
//! it). A delayed retry copy over it keeps its original with the broker. Runs a
//! Mosquitto of its own (`/usr/sbin/mosquitto`, the machine's package) on a free port,
//! configured with `max_packet_size 4096`.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream::{App, Mount, Settled, retry_after};
use ruststream_conformance::mosquitto::Mosquitto;
use ruststream_core::{Address, Broker, Message, PublishErrorKind, Settlement, SubscribeSpec};
use ruststream_mqtt::MqttBroker;
use tokio::sync::mpsc;

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

/// `retry_after` on MQTT is a copy published from the process once the delay is over,
/// after the original's PUBACK. A message that fits the server's packet size but whose
/// copy does not (the retry count is one more user property) would then be lost: the
/// copy can never go out, and the stop gives it up. The publisher knows the server's
/// limit, so the original is kept instead (no PUBACK), handed back to the broker, and it
/// is still in the session after the service stops. Without that check the handler ran
/// once, the original was acknowledged, and the session was empty after the stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_copy_over_the_servers_packet_size_keeps_its_original() {
    let mosquitto = Mosquitto::start(&format!("max_packet_size {LIMIT}\n"));
    let url = format!("mqtt://127.0.0.1:{}", mosquitto.port());
    let topic = support::unique("delayed-size");
    // The original's packet (fixed header 3, topic 2 + its length, packet id 2, no
    // properties 1, payload) is 10 bytes under the limit; its copy's retry count is
    // about 30 bytes more.
    let payload = format!("\"{}\"", "x".repeat(LIMIT - 10 - 8 - topic.len() - 2));
    let (settled, mut settlements) = mpsc::unbounded_channel();
    let (handled, mut runs) = mpsc::unbounded_channel();
    let running = App::new(MqttBroker::connect(&url).await.expect("connected"))
        .shutdown_timeout(Duration::from_secs(2))
        .mount(Mount::new(topic.as_str()), move |_: String| {
            let _ = handled.send(());
            async { retry_after(Duration::from_secs(60)) }
        })
        .after_settle(move |s: &Settled| {
            let _ = settled.send(s.error().map(ToString::to_string));
        })
        .start()
        .await
        .expect("starts");
    let publisher = MqttBroker::connect(&url).await.expect("connected");
    publisher
        .publisher()
        .publish(topic.as_str().into(), Message::new(payload.clone()))
        .await
        .expect("the original fits");
    let first = tokio::time::timeout(Duration::from_secs(10), settlements.recv())
        .await
        .expect("settled within 10 s")
        .expect("running");
    let error = first.expect("the copy is refused before the original is acknowledged");
    assert!(error.contains("too large"), "{error}");
    assert!(error.contains(&format!("limit {LIMIT}")), "{error}");
    // Handed back after a second: the broker sends it again.
    for run in 0..2 {
        tokio::time::timeout(Duration::from_secs(15), runs.recv())
            .await
            .unwrap_or_else(|_| panic!("run {run} of the handler within 15 s"))
            .expect("running");
    }
    running.stop().await.expect("a clean stop");
    publisher.close().await;

    // The session the mount read is where the message still is.
    let later = MqttBroker::connect(&url).await.expect("connected");
    let mut deliveries = later
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let kept = tokio::time::timeout(Duration::from_secs(10), deliveries.next())
        .await
        .expect("the original is still in the session")
        .expect("open")
        .expect("a delivery");
    assert_eq!(kept.payload(), payload.as_bytes());
    kept.settle(Settlement::Accept).await.expect("acked");
    later.close().await;
}
