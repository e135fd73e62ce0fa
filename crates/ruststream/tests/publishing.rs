//! Publishing from handlers and from outside, headers, correlation ids, reply-to, replies,
//! codecs, and shared state.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{
    App, Headers, Mount, Publisher, Raw, Reply, RunError, State, codec::Codec,
    extract::ExtractError, retry,
};
use ruststream_core::{CONTENT_TYPE, CORRELATION_ID, MESSAGE_ID, Message, REPLY_TO, Verdict};
use serde::{Deserialize, Serialize};
use support::{Calls, settle};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Order {
    id: u64,
    item: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Shipped {
    order: u64,
}

fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message.headers.get_str(name)
}

#[tokio::test(start_paused = true)]
async fn a_handler_publishes_with_headers_correlation_id_and_reply_to() {
    let app = TestApp::start(|b| {
        App::new(b).mount("orders", |publisher: Publisher, order: Order| async move {
            publisher
                .message("shipped", &Shipped { order: order.id })
                .header("tenant", "acme")
                .correlation_id(format!("order-{}", order.id))
                .reply_to("shipped.replies")
                .message_id("m-1")
                .send()
                .await
        })
    })
    .await;
    app.publish(
        "orders",
        &Order {
            id: 7,
            item: "tea".into(),
        },
    )
    .await;
    settle(&app).await;
    let shipped = app.messages("shipped");
    assert_eq!(shipped.len(), 1);
    let body: Shipped = serde_json::from_slice(&shipped[0].payload).expect("json");
    assert_eq!(body, Shipped { order: 7 });
    assert_eq!(header(&shipped[0], CONTENT_TYPE), Some("application/json"));
    assert_eq!(header(&shipped[0], "tenant"), Some("acme"));
    assert_eq!(header(&shipped[0], CORRELATION_ID), Some("order-7"));
    assert_eq!(header(&shipped[0], REPLY_TO), Some("shipped.replies"));
    assert_eq!(header(&shipped[0], MESSAGE_ID), Some("m-1"));
    let verdicts: Vec<_> = app.settlements().iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [Verdict::Ack], "Ok(()) from send acks");
    app.stop().await.expect("clean stop");
}

/// `App::publisher` works outside handlers, before and after the start; what it sets
/// reaches the handler's `Headers`.
#[tokio::test(start_paused = true)]
async fn publishing_from_outside_reaches_the_handler_with_its_headers() {
    let calls = Calls::default();
    let log = calls.clone();
    let mut outside = None;
    let app = TestApp::start(|b| {
        let app = App::new(b).mount("orders", move |headers: Headers, order: Order| {
            log.record(1, &headers, order.item.as_bytes());
            async {}
        });
        outside = Some(app.publisher());
        app
    })
    .await;
    let outside = outside.expect("a publisher");
    outside
        .message(
            "orders",
            &Order {
                id: 1,
                item: "tea".into(),
            },
        )
        .correlation_id("c-1")
        .header("tenant", "acme")
        .send()
        .await
        .expect("published");
    outside
        .publish(
            "orders",
            &Order {
                id: 2,
                item: "cake".into(),
            },
        )
        .await
        .expect("published");
    settle(&app).await;
    let all = calls.all();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].payload, b"tea");
    assert_eq!(all[0].headers.get_str(CORRELATION_ID), Some("c-1"));
    assert_eq!(all[0].headers.get_str("tenant"), Some("acme"));
    assert_eq!(
        all[0].headers.get_str(CONTENT_TYPE),
        Some("application/json")
    );
    assert_eq!(all[1].payload, b"cake");
    assert_eq!(all[1].headers.get_str(CORRELATION_ID), None);
    app.stop().await.expect("clean stop");
}

async fn price(order: Order) -> Reply<u64> {
    Reply::new(order.item.len() as u64)
}

fn tea() -> Order {
    Order {
        id: 1,
        item: "tea".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_reply_goes_to_the_requests_reply_to_with_its_correlation_id() {
    let app = TestApp::start(|b| {
        App::new(b).mount(Mount::new("prices").reply_to("prices.fallback"), price)
    })
    .await;
    app.publisher()
        .message("prices", &tea())
        .reply_to("client.inbox")
        .correlation_id("c-9")
        .send()
        .await
        .expect("published");
    settle(&app).await;
    let replies = app.messages("client.inbox");
    assert_eq!(replies.len(), 1);
    assert_eq!(&replies[0].payload[..], b"3");
    assert_eq!(header(&replies[0], CORRELATION_ID), Some("c-9"));
    assert_eq!(header(&replies[0], CONTENT_TYPE), Some("application/json"));
    assert!(app.messages("prices.fallback").is_empty(), "reply-to wins");
    assert_eq!(app.settlements()[0].verdict, Verdict::Ack);
    assert!(app.broker().ready("prices") == 0);
    app.stop().await.expect("clean stop");
}

/// Without a `reply-to` the mount's `reply_to` is used; without a correlation id the
/// request's message id correlates.
#[tokio::test(start_paused = true)]
async fn a_reply_without_reply_to_goes_to_the_mounts_reply_to() {
    let app = TestApp::start(|b| {
        App::new(b).mount(Mount::new("prices").reply_to("prices.fallback"), price)
    })
    .await;
    app.publisher()
        .message("prices", &tea())
        .message_id("m-5")
        .send()
        .await
        .expect("published");
    settle(&app).await;
    let replies = app.messages("prices.fallback");
    assert_eq!(replies.len(), 1);
    assert_eq!(&replies[0].payload[..], b"3");
    assert_eq!(header(&replies[0], CORRELATION_ID), Some("m-5"));
    app.stop().await.expect("clean stop");
}

/// Nowhere to reply: the reply is not sent, and the request is still settled as asked.
#[tokio::test(start_paused = true)]
async fn a_reply_with_nowhere_to_go_is_not_sent() {
    let app = TestApp::start(|b| App::new(b).mount("prices", price)).await;
    app.publish("prices", &tea()).await;
    settle(&app).await;
    assert!(app.broker().is_idle(), "nothing published anywhere");
    assert_eq!(app.settlements()[0].verdict, Verdict::Ack);
    app.stop().await.expect("clean stop");
}

/// A reply with another outcome: published, then the request is settled that way.
#[tokio::test(start_paused = true)]
async fn a_reply_can_settle_with_another_outcome() {
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("prices").max_attempts(2),
            |ruststream::Attempt(a): ruststream::Attempt, order: Order| async move {
                if a == 1 {
                    Reply::with_outcome(0_u64, retry())
                } else {
                    Reply::new(order.item.len() as u64)
                }
            },
        )
    })
    .await;
    app.publisher()
        .message("prices", &tea())
        .reply_to("inbox")
        .send()
        .await
        .expect("published");
    settle(&app).await;
    let verdicts: Vec<_> = app.settlements().iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [Verdict::Retry, Verdict::Ack]);
    let replies: Vec<_> = app
        .messages("inbox")
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect();
    assert_eq!(replies, ["0", "3"], "one reply per attempt");
    app.stop().await.expect("clean stop");
}

/// Raw bytes: a raw publisher records `application/octet-stream`; `Raw` hands the bytes as
/// they are (even when they are not text); a raw mount decodes text into `String` and
/// replies in raw bytes.
#[tokio::test(start_paused = true)]
async fn raw_bytes_through_the_raw_codec_and_extractor() {
    let calls = Calls::default();
    let log = calls.clone();
    let app = TestApp::start(|b| {
        App::new(b)
            .mount(
                Mount::new("bytes").codec(Codec::Raw),
                move |headers: Headers, Raw(bytes): Raw| {
                    log.record(1, &headers, &bytes);
                    async {}
                },
            )
            .mount(
                Mount::new("echo").codec(Codec::Raw).reply_to("echoed"),
                |text: String| async move { Reply::new(text.to_uppercase()) },
            )
    })
    .await;
    let raw = app.publisher().clone().with_codec(Codec::Raw);
    raw.publish("bytes", "héllo").await.expect("published");
    app.publish_message("bytes", Message::new(vec![0xff, 0x00, 0xfe]))
        .await;
    raw.publish("echo", "shout").await.expect("published");
    // Not text: a raw mount's `String` does not decode it (dropped by the decode policy).
    app.publish_message("echo", Message::new(vec![0xff])).await;
    settle(&app).await;
    let all = calls.all();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].payload, "héllo".as_bytes());
    assert_eq!(
        all[0].headers.get_str(CONTENT_TYPE),
        Some("application/octet-stream")
    );
    assert_eq!(all[1].payload, [0xff, 0x00, 0xfe]);
    let echoed = app.messages("echoed");
    assert_eq!(echoed.len(), 1);
    assert_eq!(&echoed[0].payload[..], b"SHOUT");
    assert_eq!(
        header(&echoed[0], CONTENT_TYPE),
        Some("application/octet-stream")
    );
    let echo: Vec<_> = app
        .settlements()
        .iter()
        .filter(|r| r.address.as_str() == "echo")
        .map(|r| r.verdict)
        .collect();
    assert_eq!(echo, [Verdict::Ack, Verdict::Drop]);
    app.stop().await.expect("clean stop");
}

/// JSON is the default codec: what does not parse as the handler's type is dropped, and a
/// raw-codec publisher cannot encode a struct (nothing is sent).
#[tokio::test(start_paused = true)]
async fn json_is_the_default_codec() {
    let calls = Calls::default();
    let log = calls.clone();
    let app = TestApp::start(|b| {
        App::new(b).mount("orders", move |headers: Headers, order: Order| {
            log.record(1, &headers, order.item.as_bytes());
            async {}
        })
    })
    .await;
    assert_eq!(app.publisher().codec(), Codec::Json);
    app.publish_message("orders", Message::new(r#"{"id":3,"item":"jam"}"#))
        .await;
    app.publish_message("orders", Message::new(r#"{"id":"three"}"#))
        .await;
    let refused = app
        .publisher()
        .clone()
        .with_codec(Codec::Raw)
        .publish("orders", &tea())
        .await;
    assert!(
        matches!(refused, Err(ruststream::publisher::SendError::Encode(_))),
        "{refused:?}"
    );
    settle(&app).await;
    assert_eq!(calls.all().len(), 1);
    assert_eq!(calls.all()[0].payload, b"jam");
    let verdicts: Vec<_> = app.settlements().iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [Verdict::Ack, Verdict::Drop]);
    app.stop().await.expect("clean stop");
}

#[derive(Clone)]
struct Counter(Arc<AtomicUsize>);

#[derive(Clone)]
struct Tenant(&'static str);

#[tokio::test(start_paused = true)]
async fn state_is_shared_with_handlers() {
    let counter = Counter(Arc::new(AtomicUsize::new(0)));
    let seen = Calls::default();
    let log = seen.clone();
    let app = TestApp::start(|b| {
        App::new(b)
            .state(counter.clone())
            .state(Tenant("acme"))
            .mount(
                "q",
                move |State(Counter(n)): State<Counter>,
                      State(Tenant(t)): State<Tenant>,
                      _: u32| {
                    n.fetch_add(1, Ordering::SeqCst);
                    log.record(1, &Headers::new(), t.as_bytes());
                    async {}
                },
            )
    })
    .await;
    for i in 0..3 {
        app.publish("q", &i).await;
    }
    settle(&app).await;
    assert_eq!(counter.0.load(Ordering::SeqCst), 3);
    assert!(seen.all().iter().all(|c| c.payload == b"acme"));
    app.stop().await.expect("clean stop");
}

/// A handler taking state the app does not have is refused when the app starts, before
/// anything is subscribed.
#[tokio::test(start_paused = true)]
async fn missing_state_is_refused_at_start() {
    let broker = MemoryBroker::new();
    let result = TestApp::try_start(broker.clone(), |b| {
        App::new(b)
            .state(Tenant("acme"))
            .mount("fine", |_: State<Tenant>, _: u32| async {})
            .mount("q", |_: State<Counter>, _: u32| async {})
    })
    .await;
    match result {
        Err(RunError::Mount {
            address,
            source: ExtractError::MissingState(name),
        }) => {
            assert_eq!(address, "q");
            assert!(name.ends_with("Counter"), "{name}");
        }
        Err(other) => panic!("expected a mount error, got {other}"),
        Ok(_) => panic!("started without the state"),
    }
    assert!(
        broker.snapshot().iter().all(|q| q.consumers == 0),
        "nothing subscribed"
    );
}

/// An option of another broker on a mount is refused when the app starts: a Redis form on
/// a memory mount would otherwise be ignored without a word.
#[tokio::test(start_paused = true)]
async fn another_brokers_option_is_refused_at_start() {
    struct RedisForm;
    impl ruststream_core::BrokerOption for RedisForm {
        const BROKER: &'static str = "redis";
    }
    let broker = MemoryBroker::new();
    let result = TestApp::try_start(broker.clone(), |b| {
        App::new(b)
            .mount("fine", |_: u32| async {})
            .mount(Mount::new("q").option(RedisForm), |_: u32| async {})
    })
    .await;
    match result {
        Err(RunError::Subscribe { address, source }) => {
            assert_eq!(address, "q");
            let text = source.to_string();
            assert!(
                text.contains("RedisForm") && text.contains("redis") && text.contains("memory"),
                "{text}"
            );
        }
        Err(other) => panic!("expected a subscribe error, got {other}"),
        Ok(_) => panic!("started with a foreign option"),
    }
    assert!(
        broker.snapshot().iter().all(|q| q.consumers == 0),
        "nothing subscribed"
    );
}

/// A reply the broker does not take: the request is retried (through the cap) rather than
/// acknowledged without its answer.
#[tokio::test(start_paused = true)]
async fn a_reply_that_cannot_be_published_retries_the_request() {
    let app = TestApp::try_start(
        MemoryBroker::with_capabilities(ruststream_core::Capabilities::SETTLES),
        |b| {
            App::new(support::Faulty::new(b).refuse_publish_to("client.inbox"))
                .mount(Mount::new("prices").max_attempts(2), price)
        },
    )
    .await
    .expect("starts");
    app.publisher()
        .message("prices", &tea())
        .reply_to("client.inbox")
        .send()
        .await
        .expect("published");
    support::wait_until("two settlements", || app.settlements().len() == 2).await;
    let records = app.settlements();
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.verdict))
            .collect::<Vec<_>>(),
        [(1, Verdict::Retry), (2, Verdict::Retry)],
        "retried, then rejected at the cap"
    );
    app.stop().await.expect("clean stop");
}

/// `allow_reply_to`: a request whose reply-to the mount does not answer gets no reply and
/// is settled as the handler said; an allowed one gets its reply.
#[tokio::test(start_paused = true)]
async fn replies_go_only_where_the_mount_allows() {
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("prices").allow_reply_to(|to| to.starts_with("replies.")),
            price,
        )
    })
    .await;
    for to in ["internal.commands", "replies.alice"] {
        app.publisher()
            .message("prices", &tea())
            .reply_to(to)
            .send()
            .await
            .expect("published");
    }
    settle(&app).await;
    assert!(app.messages("internal.commands").is_empty(), "not answered");
    assert_eq!(app.messages("replies.alice").len(), 1);
    assert!(
        app.settlements().iter().all(|r| r.verdict == Verdict::Ack),
        "{:?}",
        app.settlements()
    );
    app.stop().await.expect("clean stop");
}
