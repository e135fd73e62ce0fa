//! A service on Kafka described as AsyncAPI: each channel carries the Kafka binding of
//! its topic, and each mount's receive operation the consumer group it reads in (the
//! adapter's default `ruststream.<topic>`, or the one the mount names). The document is
//! written where `scripts/test` validates it (`kafka.json`, `kafka.yaml`, with
//! @asyncapi/parser, which checks the bindings against their schemas). Needs a
//! Kafka-protocol broker (`scripts/kafka.sh`; `RUSTSTREAM_KAFKA_URL`).

mod support;

use std::path::PathBuf;

use ruststream::asyncapi::AsyncApiInfo;
use ruststream::{App, Mount, publisher::PublishTarget};
use ruststream_kafka::{Group, KafkaBroker, KafkaConnector};
use serde_json::{Value, json};

async fn handle(_: String) {}

fn channel<'a>(document: &'a Value, address: &str) -> &'a Value {
    document["channels"]
        .as_object()
        .and_then(|channels| channels.values().find(|c| c["address"] == address))
        .unwrap_or_else(|| panic!("no channel {address}"))
}

#[tokio::test]
async fn channels_are_topics_and_receives_name_their_group() {
    let broker = KafkaBroker::connect(&support::url())
        .await
        .unwrap_or_else(|e| panic!("{e}: start a Kafka-protocol broker (scripts/kafka.sh)"));
    let app = App::new(broker)
        .name("billing")
        .mount(
            Mount::new("orders")
                .max_attempts(3)
                .dead_letter("orders.dead"),
            handle,
        )
        .mount(Mount::new("invoices").option(Group::new("billing")), handle)
        .publishes(PublishTarget::new("receipts"));
    let info = AsyncApiInfo {
        version: "1.0.0".into(),
        server: Some(
            ruststream_core::Connector::server(&KafkaConnector, &support::url())
                .expect("described"),
        ),
        ..AsyncApiInfo::default()
    };
    let document = app.asyncapi(&info).expect("document");
    for topic in ["orders", "orders.dead", "invoices", "receipts"] {
        assert_eq!(
            channel(&document, topic)["bindings"],
            json!({"kafka": {"topic": topic, "bindingVersion": "0.5.0"}}),
            "{topic}"
        );
    }
    let operations = &document["operations"];
    let group = |id: &str| operations[id]["bindings"]["kafka"]["groupId"].clone();
    assert_eq!(
        group("receive.orders"),
        json!({"type": "string", "enum": ["ruststream.orders"]})
    );
    assert_eq!(
        group("receive.invoices"),
        json!({"type": "string", "enum": ["billing"]})
    );
    // A producer has no group: the send operations carry none.
    for id in ["retry.orders", "dead-letter.orders", "send.receipts"] {
        assert!(operations[id].is_object(), "{id}");
        assert!(operations[id].get("bindings").is_none(), "{id}");
    }
    ruststream_conformance::asyncapi::write(
        "kafka",
        &app,
        &info,
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asyncapi"),
    );
}
