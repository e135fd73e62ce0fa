//! Bad input on the wire: delivered with a defect (the runtime's decode policy applies),
//! never a panic; and bad URLs.

mod support;

use std::time::Duration;

use fred::prelude::*;
use ruststream_core::{Broker, Settlement};
use ruststream_redis::{ConnectError, List, PubSub, RedisBroker, ReliableList, Stream};
use support::{ctx, next};

#[tokio::test]
async fn stream_entry_without_payload_is_a_defect_and_can_be_settled() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    let _: String = ctx
        .admin
        .xadd(
            ctx.key("s"),
            false,
            None,
            "*",
            vec![("h:a", "1"), ("other", "x")],
        )
        .await
        .expect("xadd");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("stream entry has no _payload field"));
    assert_eq!(d.headers().get_str("a"), Some("1"));
    // The default decode policy drops: XACK.
    d.settle(Settlement::Reject).await.expect("reject");
    assert_eq!(ctx.pending("s", "g").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn stream_header_name_not_utf8_is_a_defect() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    let field = fred::types::Key::from(&b"h:\xff\xfe"[..]);
    let _: String = ctx
        .admin
        .xadd(
            ctx.key("s"),
            false,
            None,
            "*",
            vec![(fred::types::Key::from("_payload"), "body"), (field, "v")],
        )
        .await
        .expect("xadd");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("header name is not utf-8"));
    assert_eq!(&d.payload()[..], b"body");
    ctx.cleanup().await;
}

#[tokio::test]
async fn truncated_list_frames_are_defects_on_both_list_forms() {
    let ctx = ctx().await;
    // Claims one header of 16 bytes name, then stops.
    let truncated = bytes::Bytes::from_static(b"\0\0\0\x01\0\0\0\x10ab");
    let _: i64 = ctx
        .admin
        .lpush(ctx.key("plain"), truncated.clone())
        .await
        .expect("lpush");
    let mut sub = ctx
        .subscribe("plain", List::new().block(Duration::from_millis(100)), 8)
        .await;
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("truncated frame"));
    assert_eq!(d.payload(), &truncated, "delivered whole, as it arrived");

    let _: i64 = ctx
        .admin
        .lpush(ctx.key("reliable"), truncated.clone())
        .await
        .expect("lpush");
    let mut sub = ctx
        .subscribe(
            "reliable",
            ReliableList::new()
                .consumer("c")
                .block(Duration::from_millis(100)),
            8,
        )
        .await;
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("truncated frame"));
    d.settle(Settlement::Reject).await.expect("LREM");
    assert_eq!(
        ctx.llen(&format!("{{{}}}:processing:c", ctx.key("reliable")))
            .await,
        0
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn pubsub_frame_with_non_utf8_header_name_is_a_defect() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    let frame = bytes::Bytes::from_static(b"\0\0\0\x01\0\0\0\x01\xff\0\0\0\x01vpayload");
    let _: i64 = ctx
        .admin
        .publish(ctx.key("news"), frame)
        .await
        .expect("publish");
    let d = next(&mut sub).await;
    assert_eq!(d.defect(), Some("header name is not utf-8"));
    ctx.cleanup().await;
}

#[tokio::test]
async fn bad_urls_and_unreachable_servers_are_clear_errors() {
    for url in [
        "localhost:6379",
        "http://localhost",
        "redis://",
        "redis://h/notadb",
    ] {
        let err = RedisBroker::connect(url).await.expect_err(url);
        assert!(matches!(err, ConnectError::BadUrl(_)), "{url}: {err}");
    }
    let err = RedisBroker::connect("rediss://localhost")
        .await
        .expect_err("tls");
    if cfg!(feature = "tls") {
        assert!(matches!(err, ConnectError::Connect(_)), "{err}");
    } else {
        assert!(matches!(err, ConnectError::TlsDisabled), "{err}");
    }
    // Nothing listens on port 1.
    let err = RedisBroker::connect("redis://127.0.0.1:1")
        .await
        .expect_err("refused");
    assert!(matches!(err, ConnectError::Connect(_)), "{err}");
    assert!(err.to_string().starts_with("cannot connect to redis"));
}

#[tokio::test]
async fn closing_ends_subscriptions() {
    let ctx = ctx().await;
    let mut sub = ctx
        .subscribe(
            "s",
            Stream::new().group("g").block(Duration::from_millis(100)),
            8,
        )
        .await;
    ctx.broker.close().await;
    let end = tokio::time::timeout(
        Duration::from_secs(2),
        futures_util::StreamExt::next(&mut sub.deliveries),
    )
    .await
    .expect("ends promptly");
    assert!(end.is_none());
    ctx.cleanup().await;
}
