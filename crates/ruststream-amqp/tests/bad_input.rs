//! Bad input: bodies and headers this crate did not write. A delivery that cannot be
//! read is marked defective (the runtime's decode policy applies); nothing panics.
//! Messages are sent with fe2o3-amqp directly, as a foreign client would.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use fe2o3_amqp::types::messaging::{MessageId, Properties};
use ruststream::{App, Attempt, Headers, Mount, Policy, Running, ack, retry};
use ruststream_conformance::logs::logs;
use serde::Deserialize;

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
    q.quorum("e2e");
    q.quorum("e2e-dl");
    q.classic("e2e-dl-dead");
    q.quorum("counts");
    q.classic("counts-dead");
    q.quorum("big");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Sends one message with fe2o3-amqp, as another client would.
async fn raw_send<T: fe2o3_amqp::types::messaging::SerializableBody>(
    queue: &str,
    message: AmqpMessage<T>,
) {
    let outcome = try_send(queue, message).await.expect("send");
    assert!(outcome, "accepted");
}

/// Sends one message with fe2o3-amqp: whether the broker accepted it, or the error.
async fn try_send<T: fe2o3_amqp::types::messaging::SerializableBody>(
    queue: &str,
    message: AmqpMessage<T>,
) -> Result<bool, String> {
    let mut connection = Connection::open("raw-sender", url().as_str())
        .await
        .expect("raw connection");
    let mut session = Session::begin(&mut connection).await.expect("session");
    let mut sender = Sender::attach(&mut session, "raw", format!("/queues/{queue}"))
        .await
        .expect("attach");
    let outcome = sender.send(message).await.map_err(|e| e.to_string());
    let _ = sender.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    outcome.map(|o| o.is_accepted())
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
    // The body as it arrived: the amqp-value section, int 42.
    assert_eq!(d.payload().as_ref(), &[0x00, 0x53, 0x77, 0x54, 42]);
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

/// The payload the end-to-end services read.
#[derive(Deserialize)]
struct Job {
    n: u64,
}

type Seen = (u64, u32, Option<String>);

/// Starts a service with `mount` whose handler sends each job's number, attempt and
/// message id, then settles as `outcome` says.
async fn service(
    mount: Mount,
    outcome: fn() -> ruststream::Outcome,
) -> (Running, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |headers: Headers, Attempt(attempt): Attempt, job: Job| {
        let _ = tx.send((
            job.n,
            attempt,
            headers.get_str("message-id").map(str::to_owned),
        ));
        async move { outcome() }
    };
    let running = App::new(broker().await)
        .mount(mount, handler)
        .start()
        .await
        .expect("the service starts");
    (running, rx)
}

/// Waits up to 20 s for the handler to see job `n`; returns what it saw on the way.
async fn until_job(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>, n: u64) -> Vec<Seen> {
    ruststream_conformance::logs::until(rx, Duration::from_secs(20), |job| job.0 == n).await
}

fn with_id<B>(mut m: AmqpMessage<B>, id: &str) -> AmqpMessage<B> {
    m.properties = Some(Properties {
        message_id: Some(MessageId::String(id.to_owned())),
        ..Properties::default()
    });
    m
}

fn data(bytes: &[u8]) -> Data {
    Data(Binary::from(bytes.to_vec()))
}

/// Many application properties: 2,000 of 100 bytes and one of 1 MiB.
fn huge_properties() -> OrderedMap<String, SimpleValue> {
    let mut app = OrderedMap::new();
    for i in 0..2_000 {
        app.insert(format!("p{i}"), SimpleValue::String(format!("{i:0>100}")));
    }
    app.insert("big".to_owned(), SimpleValue::String("b".repeat(1 << 20)));
    app
}

/// Sends the unreadable messages to `queue`, each with its message id: the ids.
async fn send_unreadable(queue: &str, id: &dyn Fn(&str) -> String) -> Vec<String> {
    raw_send(
        queue,
        with_id(message(AmqpValue(Value::Int(42))), &id("value-int")),
    )
    .await;
    raw_send(
        queue,
        with_id(
            message(Batch::new(vec![AmqpSequence(vec![Value::Int(1)])])),
            &id("sequence"),
        ),
    )
    .await;
    raw_send(
        queue,
        with_id(
            message(Batch::new(vec![data(b"{no"), data(b"t json")])),
            &id("data-sections"),
        ),
    )
    .await;
    raw_send(
        queue,
        with_id(message(Body::<Value>::Empty), &id("no-body")),
    )
    .await;
    let mut m = with_id(message(data(b"{not json}")), &id("huge-properties"));
    m.application_properties = Some(ApplicationProperties(huge_properties()));
    raw_send(queue, m).await;
    let mut nothing = OrderedMap::new();
    nothing.insert("nothing".to_owned(), SimpleValue::Null);
    let mut m = with_id(message(data(b"{\"n\":7}")), &id("null-property"));
    m.application_properties = Some(ApplicationProperties(nothing));
    raw_send(queue, m).await;
    [
        "value-int",
        "sequence",
        "data-sections",
        "no-body",
        "huge-properties",
        "null-property",
    ]
    .map(id)
    .to_vec()
}

#[tokio::test]
async fn unreadable_messages_get_the_decode_policy_and_the_service_goes_on() {
    let lines = logs();
    let queue = q("e2e");
    let id = |name: &str| format!("{queue}-{name}");
    let ids = send_unreadable(&queue, &id).await;
    raw_send(&queue, message(data(b"{\"n\":42}"))).await;
    // Default options, plus a dead letter.
    let dead = q("e2e-dl-dead");
    let (running, mut rx) =
        service(Mount::new(queue.as_str()).dead_letter(dead.as_str()), ack).await;
    let seen = until_job(&mut rx, 42).await;
    assert_eq!(
        seen.len(),
        1,
        "only the readable message reaches the handler: {seen:?}"
    );
    for id in &ids {
        let line = lines
            .line_with(&["payload did not decode", id.as_str()])
            .unwrap_or_else(|| panic!("no log line for {id}:\n{}", lines.text()));
        assert!(line.contains(&format!("address={queue}")), "{line}");
        assert!(line.contains("WARN") && line.contains("Drop"), "{line}");
    }
    running.stop().await.expect("a graceful stop");
    // The policy (drop: rejected) settled every one: the queue is empty.
    empty(&broker().await, &queue, 500).await;
}

#[tokio::test]
async fn the_dead_letter_of_an_unreadable_message_keeps_its_body_and_headers() {
    let queue = q("e2e-dl");
    let dead = q("e2e-dl-dead");
    let id = |name: &str| format!("{queue}-{name}");
    let ids = send_unreadable(&queue, &id).await;
    raw_send(&queue, message(data(b"{\"n\":42}"))).await;
    // A dead letter without a cap takes every retry: the policy `retry` sends each
    // unreadable message there at once.
    let mount = Mount::new(queue.as_str())
        .dead_letter(dead.as_str())
        .on_decode_error(Policy::Retry);
    let (running, mut rx) = service(mount, ack).await;
    until_job(&mut rx, 42).await;
    let reader = broker().await;
    let mut sub = subscribe(
        &reader,
        spec(&dead, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let mut letters = HashMap::new();
    for _ in 0..ids.len() {
        let d = next(&mut sub, 20).await;
        let id = d
            .headers()
            .get_str("message-id")
            .expect("message id kept")
            .to_owned();
        assert_eq!(
            d.headers().get_str("x-ruststream-dead-letter-reason"),
            Some("decode")
        );
        letters.insert(id, (d.payload().clone(), d.headers().clone()));
        d.settle(Settlement::Accept).await.expect("accept");
    }
    let body = |name: &str| letters[&id(name)].0.clone();
    assert_eq!(body("value-int"), encoded(&AmqpValue(Value::Int(42))));
    assert_eq!(
        body("sequence"),
        encoded(&AmqpSequence(vec![Value::Int(1)]))
    );
    assert_eq!(&body("data-sections")[..], b"{not json");
    assert!(body("no-body").is_empty());
    let headers = &letters[&id("huge-properties")].1;
    for (name, value) in huge_properties() {
        let SimpleValue::String(value) = value else {
            unreachable!()
        };
        assert_eq!(headers.get_str(&name), Some(value.as_str()), "{name}");
    }
    assert_eq!(&body("huge-properties")[..], b"{not json}");
    let headers = &letters[&id("null-property")].1;
    assert_eq!(
        headers.get("nothing").map(|v| v.as_bytes()),
        Some(&[0x40][..])
    );
    running.stop().await.expect("a graceful stop");
    reader.close().await;
}

/// A body section as fe2o3-amqp encodes it.
fn encoded<T: serde::Serialize>(section: &T) -> bytes::Bytes {
    serde_amqp::to_vec(section).expect("encodes").into()
}

#[tokio::test]
async fn a_retry_count_header_does_not_skip_retries() {
    let queue = q("counts");
    let dead = q("counts-dead");
    // Unreadable counts are no count; a count beyond the cap is not believed.
    let counts = ["abc", "-1", "99999999999999999999", "", "1000"];
    for (n, count) in counts.iter().enumerate() {
        let mut app = OrderedMap::new();
        app.insert(
            "x-ruststream-retry-count".to_owned(),
            SimpleValue::String((*count).to_owned()),
        );
        let mut m = message(data(format!("{{\"n\":{n}}}").as_bytes()));
        m.application_properties = Some(ApplicationProperties(app));
        raw_send(&queue, m).await;
    }
    let mount = Mount::new(queue.as_str())
        .max_attempts(3)
        .dead_letter(dead.as_str());
    let (running, mut rx) = service(mount, retry).await;
    let mut calls: HashMap<u64, Vec<u32>> = HashMap::new();
    for _ in 0..3 * counts.len() {
        let (n, attempt, _) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("too few handler calls within 20 s: {calls:?}"))
            .expect("running");
        calls.entry(n).or_default().push(attempt);
    }
    for (n, count) in counts.iter().enumerate() {
        assert_eq!(calls[&(n as u64)].len(), 3, "count {count:?}: {calls:?}");
    }
    assert_eq!(
        calls[&4],
        [1001, 2, 3],
        "the claim is shown, then not believed"
    );
    let reader = broker().await;
    let mut sub = subscribe(
        &reader,
        spec(&dead, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    for _ in 0..counts.len() {
        let d = next(&mut sub, 20).await;
        assert_eq!(
            d.headers().get_str("x-ruststream-dead-letter-attempt"),
            Some("3")
        );
        d.settle(Settlement::Accept).await.expect("accept");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        rx.try_recv().is_err(),
        "nothing more: every message spent at the cap"
    );
    running.stop().await.expect("a graceful stop");
    reader.close().await;
}

#[tokio::test]
async fn a_20_mb_message_is_refused_by_the_broker_and_the_service_goes_on() {
    let queue = q("big");
    let mut body = b"{\"n\":1,\"pad\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'p', 20 << 20));
    body.extend_from_slice(b"\"}");
    // RabbitMQ 4 declares a max-message-size of 16 MiB on the link; fe2o3-amqp honours
    // it, so a 20 MB message never reaches the queue (a service's own publish of one
    // fails the same way, as an error).
    let sent = try_send(&queue, message(data(&body))).await;
    let error = sent.expect_err("refused");
    assert!(
        error.contains("message size exceeds max of 16777216"),
        "{error}"
    );
    raw_send(&queue, message(data(b"{\"n\":42}"))).await;
    let (running, mut rx) = service(Mount::new(queue.as_str()), ack).await;
    let seen = until_job(&mut rx, 42).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    running.stop().await.expect("a graceful stop");
}
