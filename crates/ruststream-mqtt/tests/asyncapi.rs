//! A service on MQTT described as AsyncAPI: every receive and send operation carries the
//! MQTT binding of what the adapter does, QoS 1, publishes not retained. The document is
//! written where `scripts/test` validates it (`mqtt.json`, `mqtt.yaml`, with
//! @asyncapi/parser, which checks the bindings against their schemas). Needs an MQTT
//! broker (Mosquitto on 127.0.0.1:1883; `RUSTSTREAM_MQTT_URL`).

mod support;

use std::path::PathBuf;

use ruststream::asyncapi::AsyncApiInfo;
use ruststream::{App, Mount, publisher::PublishTarget};
use ruststream_mqtt::MqttConnector;
use serde_json::json;

async fn handle(_: String) {}

#[tokio::test]
async fn operations_carry_qos_1() {
    let broker = support::connect().await;
    let app = App::new(broker)
        .name("sensors")
        .mount(
            Mount::new("sensors/+/temperature")
                .max_attempts(3)
                .dead_letter("sensors/dead"),
            handle,
        )
        .publishes(PublishTarget::new("alerts"));
    let info = AsyncApiInfo {
        version: "1.0.0".into(),
        server: Some(
            ruststream_core::Connector::server(&MqttConnector, &support::url()).expect("described"),
        ),
        ..AsyncApiInfo::default()
    };
    let document = app.asyncapi(&info).expect("document");
    let operations = document["operations"].as_object().expect("operations");
    assert_eq!(
        operations.len(),
        4,
        "{:?}",
        operations.keys().collect::<Vec<_>>()
    );
    for (id, operation) in operations {
        let want = match operation["action"].as_str() {
            Some("receive") => json!({"mqtt": {"qos": 1, "bindingVersion": "0.2.0"}}),
            _ => json!({"mqtt": {"qos": 1, "retain": false, "bindingVersion": "0.2.0"}}),
        };
        assert_eq!(operation["bindings"], want, "{id}");
    }
    // MQTT has no channel binding.
    for (address, channel) in document["channels"].as_object().expect("channels") {
        assert!(channel.get("bindings").is_none(), "{address}");
    }
    ruststream_conformance::asyncapi::write(
        "mqtt",
        &app,
        &info,
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asyncapi"),
    );
}
