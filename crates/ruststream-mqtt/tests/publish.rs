//! Publishing at QoS 1 on a real MQTT 5 broker (Mosquitto 2 on 127.0.0.1:1883,
//! `RUSTSTREAM_MQTT_URL`): each publish is done on its own PUBACK, many at once; a topic
//! no subscription matches fails (the broker would drop the message) unless the URL
//! accepts it; a header that is not text is refused by name.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Connector, HeaderValue, Message, PublishErrorKind, SubscribeSpec};
use ruststream_mqtt::MqttConnector;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_publishes_at_once_each_resolve_on_their_puback() {
    const N: usize = 2000;
    let topic = support::unique("many");
    let broker = support::connect().await;
    let mut spec = SubscribeSpec::new(topic.as_str());
    spec.in_flight = 1000;
    let mut subscription = broker.subscribe(spec).await.expect("subscribed");
    let publisher = broker.publisher();
    let started = std::time::Instant::now();
    let sends =
        (0..N).map(|n| publisher.publish(topic.as_str().into(), Message::new(n.to_string())));
    for sent in futures_util::future::join_all(sends).await {
        sent.expect("published");
    }
    let took = started.elapsed();
    eprintln!("{N} concurrent QoS 1 publishes acknowledged in {took:?}");
    let mut seen = vec![false; N];
    for _ in 0..N {
        let delivery =
            tokio::time::timeout(Duration::from_secs(10), subscription.deliveries.next())
                .await
                .expect("in time")
                .expect("open")
                .expect("a delivery");
        let n: usize = std::str::from_utf8(delivery.payload())
            .expect("text")
            .parse()
            .expect("a number");
        assert!(!seen[n], "{n} twice");
        seen[n] = true;
        delivery
            .settle(ruststream_core::Settlement::Accept)
            .await
            .expect("acked");
    }
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_nobody_subscribes_fails_unless_the_url_accepts_it() {
    let topic = support::unique("nobody");
    let broker = support::connect().await;
    let error = broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("lost"))
        .await
        .expect_err("no subscriber");
    assert!(
        matches!(error.kind, PublishErrorKind::BadAddress(_)),
        "{error}"
    );
    assert_eq!(
        error.message.payload.as_ref(),
        b"lost",
        "the message comes back"
    );
    broker.close().await;
    let accepting = support::connect_to(&support::url_with("unrouted=accept")).await;
    accepting
        .publisher()
        .publish(topic.as_str().into(), Message::new("dropped by the broker"))
        .await
        .expect("taken as done");
    accepting.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_that_is_not_text_is_refused_by_name() {
    let broker = support::connect().await;
    let message = Message::new("x").with_header("x-bin", HeaderValue::from(vec![0xff, 0x00]));
    let error = broker
        .publisher()
        .publish(support::unique("bin").as_str().into(), message)
        .await
        .expect_err("not text");
    assert!(error.to_string().contains("x-bin"), "{error}");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connector_opens_mqtt_urls_and_refuses_bad_settings() {
    support::require_broker();
    let broker = MqttConnector
        .connect(&support::url())
        .await
        .expect("opened");
    assert_eq!(broker.name(), "mqtt");
    broker.close().await;
    let error = MqttConnector
        .connect(&support::url_with("session_expiry=forever"))
        .await
        .err()
        .expect("a bad value");
    assert!(error.to_string().contains("session_expiry"), "{error}");
}
