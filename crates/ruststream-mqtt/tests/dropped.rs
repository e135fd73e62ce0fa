//! The broker's own drops are seen: Mosquitto acknowledges a QoS 1 publish and then drops
//! it for a session whose queue is full (`max_queued_messages`), which neither side of
//! MQTT is told. `MqttBroker::dropped_by_broker` reads Mosquitto's count of them. Runs a
//! Mosquitto of its own (`/usr/sbin/mosquitto`, the machine's package) on a free port,
//! with a queue of 10 messages and its `$SYS` values published every second.

mod support;

use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, Incoming, MqttOptions};
use ruststream_conformance::mosquitto::Mosquitto;
use ruststream_core::{Address, Broker, Message};
use ruststream_mqtt::MqttBroker;

/// The queue the broker keeps for a session.
const QUEUE: usize = 10;

/// Leaves a persistent session subscribed to `topic` at QoS 1 on the broker at `port`,
/// with nobody connected to it.
async fn offline_session(port: u16, topic: &str) {
    let mut options = MqttOptions::new(support::unique("offline"), "127.0.0.1", port);
    options
        .set_clean_start(false)
        .set_session_expiry_interval(Some(300));
    let (client, mut events) = AsyncClient::new(options, 16);
    client
        .subscribe(topic, QoS::AtLeastOnce)
        .await
        .expect("subscribe sent");
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.poll().await.expect("connected") {
                Event::Incoming(Incoming::SubAck(_)) => break,
                _ => continue,
            }
        }
    })
    .await
    .expect("subscribed");
    client.disconnect().await.expect("disconnect sent");
    let _ = tokio::time::timeout(Duration::from_secs(1), events.poll()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_the_broker_drops_past_a_sessions_queue_are_counted() {
    let mosquitto = Mosquitto::start(&format!("max_queued_messages {QUEUE}\nsys_interval 1\n"));
    let url = format!("mqtt://127.0.0.1:{}", mosquitto.port());
    let broker = MqttBroker::connect(&url).await.expect("connected");
    let topic = support::unique("dropped");
    offline_session(mosquitto.port(), &topic).await;
    let publisher = broker.publisher();
    let n = 50;
    for i in 0..n {
        publisher
            .publish(Address::new(topic.clone()), Message::new(format!("{i}")))
            .await
            .expect("acknowledged by the broker");
    }
    // Every publish was acknowledged; all but the queue's 10 were dropped.
    let expected = (n - QUEUE) as u64;
    let counted = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            if let Some(dropped) = broker.dropped_by_broker()
                && dropped >= expected
            {
                return dropped;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the broker's drops were not counted: {:?} after 15 s",
            broker.dropped_by_broker()
        )
    });
    assert_eq!(counted, expected, "exactly the publishes past the queue");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_dropped_nothing_counts_nothing() {
    let mosquitto = Mosquitto::start("sys_interval 1\n");
    let url = format!("mqtt://127.0.0.1:{}", mosquitto.port());
    let broker = MqttBroker::connect(&url).await.expect("connected");
    let topic = support::unique("kept");
    offline_session(mosquitto.port(), &topic).await;
    for i in 0..20 {
        broker
            .publisher()
            .publish(Address::new(topic.clone()), Message::new(format!("{i}")))
            .await
            .expect("acknowledged");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        broker.dropped_by_broker().unwrap_or(0),
        0,
        "a queue of 1,000 kept all 20"
    );
    broker.close().await;
}
