//! Bad URLs and options are clear errors; what cannot be published is handed back with
//! a reason; a message whose headers the client cannot read does not stop the
//! subscription. Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use ruststream_core::{
    Broker, HeaderValue, Message, PublishErrorKind, Settlement, SubscribeError, SubscribeSpec,
};
use ruststream_nats::{ConnectError, Core, JetStream, NatsBroker};
use support::{broker, publish, subscribe, try_next, unique};

#[tokio::test]
async fn bad_urls_are_clear_errors() {
    for url in [
        "",
        "127.0.0.1:4222",
        "http://127.0.0.1:4222",
        "nats://host:99999",
    ] {
        match NatsBroker::connect(url).await {
            Err(ConnectError::BadUrl { .. }) => {}
            other => panic!("{url:?}: {other:?}"),
        }
    }
    // Nothing listens on port 1.
    match NatsBroker::connect("nats://127.0.0.1:1").await {
        Err(error @ ConnectError::Unreachable { .. }) => {
            assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
        }
        other => panic!("port 1: {other:?}"),
    }
}

#[tokio::test]
async fn bad_options_are_refused() {
    let broker = broker().await;
    let mut both = SubscribeSpec::new(unique("both"));
    both.options.insert(Core::new());
    both.options.insert(JetStream::new());
    assert!(matches!(
        broker.subscribe(both).await,
        Err(SubscribeError::BadOption(_))
    ));

    let mut wildcard_group = SubscribeSpec::new(unique("group"));
    wildcard_group
        .options
        .insert(Core::new().queue_group("has space"));
    assert!(matches!(
        broker.subscribe(wildcard_group).await,
        Err(SubscribeError::BadOption(_))
    ));

    assert!(matches!(
        broker.subscribe(SubscribeSpec::new("a..b")).await,
        Err(SubscribeError::BadAddress(_))
    ));

    // A named stream that exists and does not hold the subject.
    let held = unique("held");
    drop(subscribe::<JetStream>(&broker, &held, None).await);
    let mut elsewhere = SubscribeSpec::new(unique("elsewhere"));
    elsewhere
        .options
        .insert(JetStream::new().stream(held.clone()));
    match broker.subscribe(elsewhere).await {
        Err(SubscribeError::BadOption(why)) => assert!(why.contains("does not hold"), "{why}"),
        other => panic!("{other:?}"),
    }
    support::delete_streams(&held);
}

#[tokio::test]
async fn unpublishable_messages_come_back_with_a_reason() {
    let broker = broker().await;
    let publisher = broker.publisher();
    let no_stream = unique("nostream");
    let error = publisher
        .publish(no_stream.as_str().into(), Message::new("x"))
        .await
        .expect_err("no stream holds it");
    assert!(
        matches!(error.kind, PublishErrorKind::BadAddress(_)),
        "{error}"
    );
    assert_eq!(error.message.payload.as_ref(), b"x");

    let error = publisher
        .publish("a.*".into(), Message::new("y"))
        .await
        .expect_err("a wildcard");
    assert!(
        matches!(error.kind, PublishErrorKind::BadAddress(_)),
        "{error}"
    );

    let binary = Message::new("z").with_header("x-bin", HeaderValue::from(vec![0xff, 0xfe]));
    let error = publisher
        .publish(no_stream.as_str().into(), binary)
        .await
        .expect_err("a binary header");
    assert!(error.to_string().contains("not UTF-8"), "{error}");
    assert_eq!(error.message.headers.len(), 1);
}

/// Publishes `payload` with a raw header block on `subject`, over a socket of its own.
fn raw_hpub(subject: &str, header: &[u8], payload: &[u8]) {
    let address = support::url().trim_start_matches("nats://").to_owned();
    let mut socket = std::net::TcpStream::connect(&address).expect("connect raw");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut info = [0u8; 4096];
    let _ = socket.read(&mut info).expect("INFO");
    let mut frame = b"CONNECT {\"headers\":true,\"verbose\":false,\"pedantic\":false}\r\n".to_vec();
    frame.extend(
        format!(
            "HPUB {subject} {} {}\r\n",
            header.len(),
            header.len() + payload.len()
        )
        .bytes(),
    );
    frame.extend(header);
    frame.extend(payload);
    frame.extend(b"\r\nPING\r\n");
    socket.write_all(&frame).expect("write");
    let mut answer = [0u8; 256];
    let n = socket.read(&mut answer).expect("PONG");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.contains("PONG"), "the server answered {answer:?}");
}

/// A stored message whose header block is not UTF-8: the client cannot read it. What
/// the subscription does must not be a panic, and a good message after it is received.
///
/// Known broken: async-nats 0.42 treats such a frame as a protocol error and drops the
/// connection (no panic: the subscription reports the loss and resumes), so the message
/// never reaches the adapter to be marked with a defect; the server delivers it again
/// after `ack_wait`, with whatever shared its pull batch, and the connection drops again.
#[tokio::test]
#[ignore = "known: async-nats drops the connection on a header block that is not UTF-8 (poison message; see docs/nats.md)"]
async fn an_unreadable_header_does_not_stop_the_subscription() {
    let subject = unique("badheader");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    raw_hpub(&subject, b"NATS/1.0\r\nX-Bad: \xff\xfe\r\n\r\n", b"bad");
    publish(&broker, &subject, Message::new("good")).await;
    let mut seen = Vec::new();
    while let Some(delivery) = try_next(&mut sub, Duration::from_secs(8)).await {
        seen.push((
            String::from_utf8_lossy(delivery.payload()).into_owned(),
            delivery.defect().map(str::to_owned),
        ));
        let _ = delivery.settle(Settlement::Accept).await;
        if seen.iter().any(|(p, _)| p == "good") {
            break;
        }
    }
    eprintln!("seen: {seen:?}");
    assert!(
        seen.iter().any(|(p, _)| p == "good"),
        "the good message after the bad one: {seen:?}"
    );
    support::delete_streams(&subject);
}
