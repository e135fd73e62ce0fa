//! Bad input: bodies and headers this crate did not write. A delivery that cannot be
//! read is marked defective (the runtime's decode policy applies); nothing panics.
//! Messages are sent with fe2o3-amqp directly, as a foreign client would.

mod support;

use fe2o3_amqp::types::messaging::{
    AmqpSequence, AmqpValue, ApplicationProperties, Batch, Body, Data, Message as AmqpMessage,
};
use fe2o3_amqp::types::primitives::{Binary, OrderedMap, SimpleValue, Value};
use fe2o3_amqp::{Connection, Sender, Session};
use ruststream_amqp::{ConnectOptions, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Message, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("value-int");
    q.quorum("sequence");
    q.quorum("props");
    q.quorum("data-sections");
    q.quorum("odd-prop");
    q.quorum("no-header");
    q.quorum("not-json");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Sends one message with fe2o3-amqp, as another client would.
async fn raw_send<T: fe2o3_amqp::types::messaging::SerializableBody>(
    queue: &str,
    message: AmqpMessage<T>,
) {
    let mut connection = Connection::open("raw-sender", url().as_str())
        .await
        .expect("raw connection");
    let mut session = Session::begin(&mut connection).await.expect("session");
    let mut sender = Sender::attach(&mut session, "raw", format!("/queues/{queue}"))
        .await
        .expect("attach");
    let outcome = sender.send(message).await.expect("send");
    assert!(outcome.is_accepted());
    sender.close().await.expect("close");
    session.end().await.expect("end");
    connection.close().await.expect("close");
}

fn message<B>(body: B) -> AmqpMessage<B> {
    AmqpMessage {
        header: None,
        delivery_annotations: None,
        message_annotations: None,
        properties: None,
        application_properties: None,
        body,
        footer: None,
    }
}

async fn receive(queue: &str) -> (ruststream_amqp::AmqpBroker, ruststream_core::Delivery) {
    let broker = broker().await;
    let mut sub = subscribe(
        &broker,
        spec(queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut sub, 10).await;
    (broker, d)
}

#[tokio::test]
async fn an_integer_amqp_value_body_is_a_defect() {
    let queue = q("value-int");
    raw_send(&queue, message(AmqpValue(Value::Int(42)))).await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.defect(), Some("amqp-value body of type integer"));
    assert!(d.payload().is_empty());
    // Still settles: the decode policy's outcome reaches the broker.
    d.settle(Settlement::Reject).await.expect("reject");
    broker.close().await;
}

#[tokio::test]
async fn an_amqp_sequence_body_is_a_defect() {
    let queue = q("sequence");
    raw_send(
        &queue,
        message(Batch::new(vec![AmqpSequence(vec![Value::Int(1)])])),
    )
    .await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.defect(), Some("amqp-sequence body"));
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn foreign_property_types_become_text_and_a_string_value_is_the_payload() {
    let queue = q("props");
    let mut app = OrderedMap::new();
    app.insert("n".to_owned(), SimpleValue::Int(-7));
    app.insert("flag".to_owned(), SimpleValue::Bool(true));
    app.insert(
        "bin".to_owned(),
        SimpleValue::Binary(vec![0xff, 0x01].into()),
    );
    app.insert("x-ruststream-retry-count".to_owned(), SimpleValue::Uint(2));
    let mut m = message(AmqpValue(Value::String("{\"a\":1}".into())));
    m.application_properties = Some(ApplicationProperties(app));
    raw_send(&queue, m).await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.defect(), None);
    assert_eq!(d.payload().as_ref(), b"{\"a\":1}");
    assert_eq!(d.headers().get_str("n"), Some("-7"));
    assert_eq!(d.headers().get_str("flag"), Some("true"));
    assert_eq!(
        d.headers().get("bin").map(|v| v.as_bytes()),
        Some(&[0xff, 0x01][..])
    );
    assert_eq!(d.headers().retry_count(), 2);
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn several_data_sections_are_joined() {
    let queue = q("data-sections");
    raw_send(
        &queue,
        message(Batch::new(vec![
            Data(Binary::from(b"ab".to_vec())),
            Data(Binary::from(b"cd".to_vec())),
        ])),
    )
    .await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.defect(), None);
    assert_eq!(d.payload().as_ref(), b"abcd");
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn a_property_without_a_text_form_is_a_defect() {
    let queue = q("odd-prop");
    let mut app = OrderedMap::new();
    app.insert("nothing".to_owned(), SimpleValue::Null);
    let mut m = message(Body::<Value>::Empty);
    m.application_properties = Some(ApplicationProperties(app));
    raw_send(&queue, m).await;
    let (broker, d) = receive(&queue).await;
    let defect = d.defect().expect("a defect");
    assert!(defect.contains("\"nothing\""), "{defect}");
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn a_copy_published_without_a_header_section_counts_its_retries() {
    let queue = q("no-header");
    // Published by this crate with `durable(false)`: no header section. RabbitMQ 4 adds
    // one on delivery (delivery-count 0), so the attempt is the retry count + 1 either
    // way; a message that truly arrives without a header has no broker count (unit test
    // `message::tests::no_header_section_when_not_durable`).
    let publisher = broker_with(ConnectOptions::new().durable(false)).await;
    publisher
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("x").with_header("x-ruststream-retry-count", "4"),
        )
        .await
        .expect("publish");
    publisher.close().await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.redelivery_count(), 5, "retry count 4, so attempt 5");
    assert!(matches!(d.broker_attempt(), None | Some(5)));
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn a_body_that_is_not_json_passes_unchanged_for_the_codec_to_judge() {
    let queue = q("not-json");
    publish_n(&support::broker().await, &queue, 1, "{not json").await;
    let (broker, d) = receive(&queue).await;
    assert_eq!(d.defect(), None);
    assert_eq!(d.payload().as_ref(), b"{not json-0");
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}
