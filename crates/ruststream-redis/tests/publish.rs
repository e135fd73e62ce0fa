//! Publishing resolves what an address is: a declared route, else the key's real type,
//! else the kind marker list and Pub/Sub subscriptions leave, else a stream.

mod support;

use fred::prelude::*;
use ruststream_core::{Address, Broker, Message, PublishErrorKind, Settlement};
use ruststream_redis::{PubSub, RedisBroker, ReliableList, Settings, Target};
use support::{ctx, msg, n_of, next};

/// Another service on the same server and key prefix: a broker of its own.
async fn other_service(ctx: &support::Ctx) -> RedisBroker {
    RedisBroker::connect_with(
        &support::url(),
        Settings::default().key_prefix(ctx.prefix.clone()),
    )
    .await
    .expect("connect")
}

fn bad_address(kind: &PublishErrorKind) -> &str {
    match kind {
        PublishErrorKind::BadAddress(why) => why,
        other => panic!("not a bad address: {other}"),
    }
}

#[tokio::test]
async fn a_producer_only_service_publishes_to_the_list_another_service_reads() {
    let ctx = ctx().await;
    // The consumer: a reliable list, on a broker of its own; the list is empty.
    let mut sub = ctx.subscribe("jobs", ReliableList::new(), 8).await;
    let producer = other_service(&ctx).await;
    producer
        .publisher()
        .publish(Address::new("jobs"), msg(1))
        .await
        .expect("publish");
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 1);
    d.settle(Settlement::Accept).await.expect("ack");
    // Known from now on: the list is empty again, the next one goes there too.
    producer
        .publisher()
        .publish(Address::new("jobs"), msg(2))
        .await
        .expect("publish");
    assert_eq!(n_of(&next(&mut sub).await), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn an_existing_list_or_stream_is_published_to_as_what_it_is() {
    let ctx = ctx().await;
    let _: Value = ctx
        .admin
        .lpush(ctx.key("a-list"), "not a frame")
        .await
        .expect("lpush");
    let _: Value = ctx
        .admin
        .xadd(ctx.key("a-stream"), false, None, "*", ("_payload", "x"))
        .await
        .expect("xadd");
    let publisher = ctx.broker.publisher();
    publisher
        .publish(Address::new("a-list"), msg(1))
        .await
        .expect("to the list");
    publisher
        .publish(Address::new("a-stream"), msg(1))
        .await
        .expect("to the stream");
    assert_eq!(ctx.llen(&ctx.key("a-list")).await, 2);
    assert_eq!(ctx.xlen("a-stream").await, 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_channel_another_service_subscribes_to_is_published_to() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    let producer = other_service(&ctx).await;
    producer
        .publisher()
        .publish(Address::new("news"), msg(3))
        .await
        .expect("publish");
    assert_eq!(n_of(&next(&mut sub).await), 3);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_key_of_the_wrong_type_is_an_error_naming_it() {
    let ctx = ctx().await;
    let publisher = ctx.broker.publisher();
    // A string: neither a stream nor a list.
    let _: Value = ctx
        .admin
        .set(ctx.key("config"), "x", None, None, false)
        .await
        .expect("set");
    let err = publisher
        .publish(Address::new("config"), Message::new("m"))
        .await
        .expect_err("a string");
    let why = bad_address(&err.kind);
    assert!(
        why.contains(&ctx.key("config")) && why.contains("string"),
        "{why}"
    );
    assert_eq!(&err.message.payload[..], b"m", "the message comes back");

    // Routed as a list, but the key is a stream.
    let _: Value = ctx
        .admin
        .xadd(ctx.key("orders"), false, None, "*", ("_payload", "x"))
        .await
        .expect("xadd");
    ctx.broker.route("orders", Target::List);
    let err = publisher
        .publish(Address::new("orders"), Message::new("m"))
        .await
        .expect_err("a stream routed as a list");
    let why = bad_address(&err.kind);
    assert!(
        why.contains(&ctx.key("orders")) && why.contains("stream") && why.contains("list"),
        "{why}"
    );
    assert_eq!(ctx.xlen("orders").await, 1, "nothing written");
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_key_that_changed_kind_is_a_wrongtype_error_naming_both_kinds() {
    let ctx = ctx().await;
    let publisher = ctx.broker.publisher();
    let _: Value = ctx.admin.lpush(ctx.key("moved"), "x").await.expect("lpush");
    publisher
        .publish(Address::new("moved"), msg(1))
        .await
        .expect("a list");
    // The key becomes a stream behind the publisher's back.
    let _: Value = ctx.admin.del(ctx.key("moved")).await.expect("del");
    let _: Value = ctx
        .admin
        .xadd(ctx.key("moved"), false, None, "*", ("_payload", "x"))
        .await
        .expect("xadd");
    let err = publisher
        .publish(Address::new("moved"), msg(2))
        .await
        .expect_err("WRONGTYPE");
    let why = bad_address(&err.kind);
    assert!(
        why.contains(&ctx.key("moved")) && why.contains("stream") && why.contains("list"),
        "{why}"
    );
    // Forgotten: the next publish resolves again and goes to the stream.
    publisher
        .publish(Address::new("moved"), msg(3))
        .await
        .expect("a stream now");
    assert_eq!(ctx.xlen("moved").await, 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn an_address_nobody_declared_and_no_key_is_a_stream() {
    let ctx = ctx().await;
    ctx.broker
        .publisher()
        .publish(Address::new("fresh"), msg(1))
        .await
        .expect("publish");
    assert_eq!(ctx.xlen("fresh").await, 1);
    ctx.cleanup().await;
}
