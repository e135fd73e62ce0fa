//! A Redis restart mid-stream, on a server of this test's own (a free port, never the
//! shared one): subscriptions resume; nothing acknowledged comes back.
//!
//! The server binary is `redis-server`, or `RUSTSTREAM_REDIS_SERVER` (e.g.
//! `valkey-server`).

mod support;

use std::time::Duration;

use ruststream_core::Settlement;
use ruststream_redis::{PubSub, ReliableList, Stream, Target};
use support::server::{SERIAL, Server};
use support::{ctx_at, msg, n_of, next_within};

async fn publish_until_received(
    ctx: &support::Ctx,
    sub: &mut ruststream_core::Subscription,
    address: &str,
    n: usize,
) -> ruststream_core::Delivery {
    // The publish itself may wait for the pool to reconnect.
    for _ in 0..50 {
        let published = ctx
            .broker
            .redis_publisher()
            .publish_as(address.into(), Target::Stream(None), msg(n))
            .await;
        if published.is_ok()
            && let Some(d) = next_within(sub, Duration::from_secs(2)).await
        {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("subscription did not resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_resumes_and_acked_entries_do_not_come_back() {
    let _serial = SERIAL.lock().await;
    let mut server = Server::start(true);
    let ctx = ctx_at(&server.url()).await;
    let form = Stream::new()
        .group("g")
        .consumer("c")
        .block(Duration::from_millis(200));
    let mut sub = ctx.subscribe("s", form, 16).await;
    for n in 0..5 {
        ctx.publish("s", msg(n)).await;
    }
    for _ in 0..5 {
        let d = next_within(&mut sub, Duration::from_secs(5))
            .await
            .expect("delivery");
        d.settle(Settlement::Accept).await.expect("ack");
    }
    server.restart(true);
    // After the restart the same subscription goes on with new entries only.
    let d = publish_until_received(&ctx, &mut sub, "s", 100).await;
    assert_eq!(n_of(&d), 100, "an acknowledged entry came back");
    d.settle(Settlement::Accept)
        .await
        .expect("ack after restart");
    for n in 101..105 {
        ctx.publish("s", msg(n)).await;
    }
    let mut got = Vec::new();
    while let Some(d) = next_within(&mut sub, Duration::from_millis(800)).await {
        got.push(n_of(&d));
        d.settle(Settlement::Accept).await.expect("ack");
    }
    assert_eq!(got, [101, 102, 103, 104]);
    assert_eq!(ctx.pending("s", "g").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_group_lost_with_the_data_is_recreated() {
    let _serial = SERIAL.lock().await;
    let mut server = Server::start(false);
    let ctx = ctx_at(&server.url()).await;
    let form = Stream::new().group("g").block(Duration::from_millis(200));
    let mut sub = ctx.subscribe("s", form, 16).await;
    ctx.publish("s", msg(1)).await;
    let d = next_within(&mut sub, Duration::from_secs(5))
        .await
        .expect("delivery");
    d.settle(Settlement::Accept).await.expect("ack");
    server.restart(false); // no persistence: stream and group are gone (NOGROUP)
    let d = publish_until_received(&ctx, &mut sub, "s", 2).await;
    assert_eq!(n_of(&d), 2);
    d.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.pending("s", "g").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_subscribes_again_after_a_restart() {
    let _serial = SERIAL.lock().await;
    let mut server = Server::start(false);
    let ctx = ctx_at(&server.url()).await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 16).await;
    // A message published before the SUBSCRIBE is in place is lost (Pub/Sub keeps
    // nothing): publish until one arrives.
    let mut first = None;
    for _ in 0..25 {
        ctx.publish("news", msg(1)).await;
        first = next_within(&mut sub, Duration::from_millis(200)).await;
        if first.is_some() {
            break;
        }
    }
    assert_eq!(n_of(&first.expect("a delivery before the restart")), 1);
    server.restart(false);
    let mut resumed = false;
    for attempt in 0..50 {
        let _ = ctx
            .broker
            .redis_publisher()
            .publish_as("news".into(), Target::Channel, msg(1000 + attempt))
            .await;
        if next_within(&mut sub, Duration::from_millis(300))
            .await
            .is_some()
        {
            resumed = true;
            break;
        }
    }
    assert!(resumed, "no message after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reliable_list_resumes_after_a_restart() {
    let _serial = SERIAL.lock().await;
    let mut server = Server::start(true);
    let ctx = ctx_at(&server.url()).await;
    let form = ReliableList::new()
        .consumer("c")
        .block(Duration::from_millis(200))
        .heartbeat(Duration::from_secs(3));
    let mut sub = ctx.subscribe("l", form, 16).await;
    ctx.publish_list("l", 1).await;
    let d = next_within(&mut sub, Duration::from_secs(5))
        .await
        .expect("delivery");
    d.settle(Settlement::Accept).await.expect("ack");
    server.restart(true);
    let mut got = None;
    for _ in 0..50 {
        let published = ctx
            .broker
            .redis_publisher()
            .publish_as("l".into(), Target::List, msg(2))
            .await;
        if published.is_ok() {
            got = next_within(&mut sub, Duration::from_secs(5)).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let d = got.expect("delivery after the restart");
    assert_eq!(n_of(&d), 2);
    d.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(
        ctx.llen(&format!("{{{}}}:processing:c", ctx.key("l")))
            .await,
        0
    );
}
