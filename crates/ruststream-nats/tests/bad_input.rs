//! Bad URLs and options are clear errors; what cannot be published is handed back with
//! a reason; a message whose headers the client cannot read does not stop the
//! subscription. Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::Duration;

use ruststream_core::{
    Broker, HeaderValue, Message, PublishErrorKind, Settlement, SubscribeError, SubscribeSpec,
};
use ruststream_nats::{ConnectError, Core, JetStream, NatsBroker};
use support::{broker, publish_until_connected, raw_hpub, subscribe, try_next, unique};

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

/// A stored message whose header block is not UTF-8: async-nats cannot read it and drops
/// the connection. The subscription resumes, finds the message through the stream's JSON
/// API and hands it over marked with a defect (no panic, no loop); settled (the decode
/// policy's drop: `+TERM`), it does not come back, and the good message published after
/// it is received (lost with the connection, it comes back after `ack_wait`).
#[tokio::test]
async fn an_unreadable_header_is_handed_over_with_a_defect() {
    let subject = unique("badheader");
    let broker = broker().await;
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    raw_hpub(&subject, b"NATS/1.0\r\nX-Bad: \xff\xfe\r\n\r\n", b"bad");
    // The connection may already be lost to the unreadable message (the server pushes
    // it at once to the waiting pull request): published again once it is back.
    publish_until_connected(&broker, &subject, Message::new("good")).await;
    let started = std::time::Instant::now();
    let (mut defects, mut good) = (Vec::new(), 0);
    while good == 0 {
        let Some(delivery) = try_next(&mut sub, Duration::from_secs(45)).await else {
            panic!(
                "after {:?}: defects {defects:?}, no good message",
                started.elapsed()
            );
        };
        match delivery.defect() {
            Some(defect) => {
                assert_eq!(delivery.payload().as_ref(), b"bad");
                defects.push((defect.to_owned(), started.elapsed()));
                delivery
                    .settle(Settlement::Reject)
                    .await
                    .expect("the defect settled");
            }
            None => {
                assert_eq!(delivery.payload().as_ref(), b"good");
                good += 1;
                delivery.settle(Settlement::Accept).await.expect("settled");
            }
        }
    }
    eprintln!("defects {defects:?}; good after {:?}", started.elapsed());
    assert_eq!(defects.len(), 1, "the unreadable message once: {defects:?}");
    assert!(defects[0].0.contains("not UTF-8"), "{defects:?}");
    assert!(
        defects[0].1 < Duration::from_secs(10),
        "handed over soon: {defects:?}"
    );
    assert!(
        try_next(&mut sub, Duration::from_secs(2)).await.is_none(),
        "nothing more"
    );
    support::delete_streams(&subject);
}

/// A message over the server's `max_payload` (1 MiB by default, headers and payload
/// together, as the server's INFO says): refused with `TooLarge` naming that limit and
/// handed back, before it is sent. Sent, the server answers `Maximum Payload Violation`
/// and closes the connection: every subscription of the broker would reconnect, and the
/// publish would fail as a lost connection, which the runtime tries again for ever.
#[tokio::test]
async fn a_message_over_the_servers_max_payload_is_refused_before_it_is_sent() {
    let broker = broker().await;
    let subject = unique("large");
    let mut subscription = subscribe(&broker, &subject, None::<JetStream>).await;
    let limit = support::client().await.server_info().max_payload;
    let publisher = broker.publisher();
    for (what, message) in [
        ("payload", Message::new(vec![b'x'; limit + 1])),
        (
            "headers and payload",
            Message::new(vec![b'x'; limit - 10]).with_header("x-pad", "y".repeat(64)),
        ),
    ] {
        let error = publisher
            .publish(subject.as_str().into(), message.clone())
            .await
            .expect_err(what);
        match error.kind {
            PublishErrorKind::TooLarge { size, limit: said } => {
                assert_eq!(said, limit, "{what}: the server's max_payload");
                assert!(size > limit, "{what}: {size}");
            }
            other => panic!("{what}: expected TooLarge, got {other:?}"),
        }
        assert_eq!(
            error.message.payload, message.payload,
            "{what}: handed back"
        );
    }
    // The connection is still there: a message at the limit goes through at once.
    let fits = Message::new(vec![b'z'; limit - 1024]);
    tokio::time::timeout(
        Duration::from_secs(5),
        publisher.publish(subject.as_str().into(), fits),
    )
    .await
    .expect("at once")
    .expect("published");
    let got = support::next(&mut subscription, Duration::from_secs(10)).await;
    assert_eq!(got.payload().len(), limit - 1024);
    let _ = got.settle(Settlement::Accept).await;
}
