//! A stream with `DelayedRetry::DurableZset`: `retry_after` parks a copy in a sorted set
//! (ZADD, retry count + 1) and acks; reads move due copies back (atomically, ≤ 128 each).

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ruststream_core::{Broker, Capabilities, Declaration, RETRY_COUNT, Settlement, Verdict};
use ruststream_redis::{DelayedRetry, Stream};
use support::{complete, ctx, msg, n_of, next, next_within};

fn durable() -> Stream {
    Stream::new()
        .group("g")
        .block(Duration::from_millis(50))
        .delayed_retry(DelayedRetry::DurableZset)
}

fn zset(ctx: &support::Ctx, address: &str) -> String {
    format!("{{{}}}:delayed", ctx.key(address))
}

#[tokio::test]
async fn capabilities_settle_and_delay() {
    let ctx = ctx().await;
    let sub = ctx.subscribe("mail", durable(), 8).await;
    let mut caps = Capabilities::SETTLES;
    caps.delays = Some(Capabilities::ANY_DELAY);
    assert_eq!(sub.capabilities, caps);
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_after_parks_a_copy_then_acks_and_the_copy_comes_back_later() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("mail", durable(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("mail", msg(1)).await;
    let d = next(&mut sub).await;
    let delay = Duration::from_millis(400);
    let started = Instant::now();
    complete(
        d,
        caps,
        Verdict::RetryAfter(delay),
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("parked");
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 1, "ZADD of the copy");
    assert_eq!(ctx.pending("mail", "g").await, 0, "XACK of the original");
    assert_eq!(ctx.xlen("mail").await, 1, "nothing back yet");
    let copy = next(&mut sub).await;
    assert!(started.elapsed() >= delay, "not before the delay");
    assert_eq!(n_of(&copy), 1);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(
        copy.headers().get_str("content-type"),
        Some("application/json")
    );
    assert_eq!(copy.redelivery_count(), 2);
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 0);
    assert_eq!(ctx.xlen("mail").await, 2);
    // Each lap counts one more.
    complete(
        copy,
        caps,
        Verdict::RetryAfter(Duration::from_millis(10)),
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("parked again");
    let second = next(&mut sub).await;
    assert_eq!(second.headers().get_str(RETRY_COUNT), Some("2"));
    assert_eq!(second.redelivery_count(), 3);
    ctx.cleanup().await;
}

#[tokio::test]
async fn immediate_retry_is_still_a_copy_then_xack() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("mail", durable(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("mail", msg(2)).await;
    let d = next(&mut sub).await;
    complete(
        d,
        caps,
        Verdict::Retry,
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("retry");
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 0);
    assert_eq!(ctx.xlen("mail").await, 2);
    assert_eq!(next(&mut sub).await.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn parking_the_same_delivery_twice_keeps_one_copy() {
    // A crash between ZADD and XACK makes the entry come back (re-read from the pending
    // list) and be parked again: the member is the same, so the zset keeps one copy.
    let ctx = ctx().await;
    let mut first = ctx.subscribe("mail", durable().consumer("c"), 8).await;
    ctx.publish("mail", msg(3)).await;
    let d1 = next(&mut first).await;
    drop(first);
    let mut again = ctx.subscribe("mail", durable().consumer("c"), 8).await;
    let d2 = next(&mut again).await;
    assert_eq!(n_of(&d2), 3);
    let park = Settlement::RequeueAfter(Duration::from_secs(60));
    d1.settle(park).await.expect("parked");
    d2.settle(park).await.expect("parked again");
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 1);
    assert_eq!(ctx.pending("mail", "g").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn max_128_copies_move_per_read() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("mail", durable(), 1000).await;
    for n in 0..300 {
        ctx.publish("mail", msg(n)).await;
    }
    let mut held = Vec::new();
    for _ in 0..300 {
        held.push(next(&mut sub).await);
    }
    drop(sub); // nobody reads while the copies become due
    for d in held {
        d.settle(Settlement::RequeueAfter(Duration::from_millis(1)))
            .await
            .expect("parked");
    }
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 300);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(ctx.broker.move_delayed("mail").await.expect("move"), 128);
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 172);
    assert_eq!(ctx.xlen("mail").await, 428);
    ctx.cleanup().await;
}

#[tokio::test]
async fn two_concurrent_movers_never_move_one_copy_twice() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("mail", durable(), 1000).await;
    let total = 1000;
    for n in 0..total {
        ctx.publish("mail", msg(n)).await;
    }
    let mut held = Vec::new();
    for _ in 0..total {
        held.push(next(&mut sub).await);
    }
    drop(sub);
    for d in held {
        d.settle(Settlement::RequeueAfter(Duration::from_millis(1)))
            .await
            .expect("parked");
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Two brokers (two pools) move the same queue at once.
    let second = ruststream_redis::RedisBroker::connect_with(
        &support::url(),
        ruststream_redis::Settings::default().key_prefix(ctx.prefix.clone()),
    )
    .await
    .expect("second broker");
    let mover = |b: ruststream_redis::RedisBroker| async move {
        let mut moved = 0;
        loop {
            let n = b.move_delayed("mail").await.expect("move");
            if n == 0 {
                return moved;
            }
            moved += n;
        }
    };
    let (a, b) = tokio::join!(mover(ctx.broker.clone()), mover(second));
    assert_eq!(
        a + b,
        total as u64,
        "every copy moved exactly once ({a} + {b})"
    );
    assert_eq!(ctx.zcard(&zset(&ctx, "mail")).await, 0);
    assert_eq!(ctx.xlen("mail").await, 2 * total as u64);
    // Read everything back: each copy once.
    let mut sub = ctx.subscribe("mail", durable().group("audit"), 1000).await;
    let mut copies = HashSet::new();
    let mut originals = 0;
    while let Some(d) = next_within(&mut sub, Duration::from_millis(500)).await {
        if d.headers().retry_count() == 1 {
            assert!(copies.insert(n_of(&d)), "copy {} twice", n_of(&d));
        } else {
            originals += 1;
        }
        // Settled: an abandoned delivery would be given back and read again.
        d.settle(Settlement::Accept).await.expect("ack");
    }
    assert_eq!(copies.len(), total);
    assert_eq!(originals, total);
    ctx.cleanup().await;
}
