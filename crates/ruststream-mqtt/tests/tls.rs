//! `mqtts://` against a real TLS listener: Mosquitto 2 on 127.0.0.1:8884 with the
//! throwaway CA of `scripts/tls-certs.sh` (`scripts/mosquitto-tls.sh` starts it;
//! `RUSTSTREAM_MQTT_TLS_URL`, `RUSTSTREAM_TLS_CA`). Built with the `tls` feature only.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_mqtt::MqttBroker;

const HOW: &str = "Start the TLS listener with `scripts/mosquitto-tls.sh` (Mosquitto on \
     127.0.0.1:8884 with the CA of scripts/tls-certs.sh), or set RUSTSTREAM_MQTT_TLS_URL \
     and RUSTSTREAM_TLS_CA.";

fn url() -> String {
    std::env::var("RUSTSTREAM_MQTT_TLS_URL").unwrap_or_else(|_| "mqtts://localhost:8884".into())
}

fn ca() -> String {
    std::env::var("RUSTSTREAM_TLS_CA").unwrap_or_else(|_| "/var/cache/ruststream/tls/ca.pem".into())
}

fn with_ca() -> String {
    let url = url();
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}tls_ca_file={}", ca())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_trip_over_tls_with_a_private_ca() {
    let broker = match MqttBroker::connect(&with_ca()).await {
        Ok(broker) => broker,
        Err(error) => panic!("no MQTT TLS listener at {} ({error}). {HOW}", url()),
    };
    let topic = support::unique("tls");
    let mut subscription = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed over tls");
    broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("secret"))
        .await
        .expect("published over tls");
    let delivery = tokio::time::timeout(Duration::from_secs(10), subscription.deliveries.next())
        .await
        .expect("in time")
        .expect("open")
        .expect("a delivery");
    assert_eq!(delivery.payload().as_ref(), b"secret");
    delivery.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_the_roots_do_not_vouch_for_is_refused() {
    // Without the private CA the webpki roots do not vouch for the test certificate.
    let error = MqttBroker::connect(&url())
        .await
        .err()
        .expect("the certificate is not trusted");
    assert!(error.to_string().contains("mqtt broker at"), "{error}");
    let error = MqttBroker::connect(&format!("{}?tls_ca_file=/nonexistent/ca.pem", url()))
        .await
        .err()
        .expect("no such file");
    assert!(error.to_string().contains("tls"), "{error}");
}
