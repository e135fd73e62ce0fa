//! Shared test support: the broker under test (a real MQTT 5 broker, Mosquitto 2) and
//! unique topic names.
#![allow(dead_code, unreachable_pub)]

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ruststream_mqtt::MqttBroker;

/// How to start the broker a test needs.
pub const HOW: &str = "Mosquitto 2 runs as a machine service on 127.0.0.1:1883 \
     (`apt-get install mosquitto`, then `service mosquitto start`, or `mosquitto -d`), \
     or point RUSTSTREAM_MQTT_URL at an MQTT 5 broker that takes anonymous clients.";

/// The broker under test: `RUSTSTREAM_MQTT_URL`, default `mqtt://127.0.0.1:1883`.
pub fn url() -> String {
    ruststream_mqtt::default_url()
}

/// [`url`] with `query` (`key=value&…`) added.
pub fn url_with(query: &str) -> String {
    let url = url();
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}{query}")
}

/// The `host:port` of [`url`] (port 1883 where it names none).
pub fn host_port() -> String {
    let url = url();
    let hostport = url
        .split_once("://")
        .map_or(url.as_str(), |(_, rest)| rest)
        .split(['?', '/'])
        .next()
        .unwrap_or_default();
    let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
    if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:1883")
    }
}

/// Fails the test, saying how to start the broker, unless something answers at [`url`].
pub fn require_broker() {
    let (url, hostport) = (url(), host_port());
    let answers = hostport
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok());
    assert!(answers, "no MQTT broker answers at {url}. {HOW}");
}

/// A connection to the broker under test, at `url`; fails saying how to start it.
pub async fn connect_to(url: &str) -> MqttBroker {
    require_broker();
    match MqttBroker::connect(url).await {
        Ok(broker) => broker,
        Err(error) => panic!("cannot connect to the MQTT broker at {url} ({error}). {HOW}"),
    }
}

/// A connection to the broker under test.
pub async fn connect() -> MqttBroker {
    connect_to(&url()).await
}

static NAMES: AtomicU32 = AtomicU32::new(0);

/// A topic unique to this test run: `rstest/<prefix>/<pid>-<time>-<n>`.
pub fn unique(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 100_000_000)
        .unwrap_or(0);
    format!("rstest/{prefix}/{}-{t}-{n}", std::process::id())
}
