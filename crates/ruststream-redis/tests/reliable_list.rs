//! The reliable list form: LREM from the processing list, retries pushed back first, and
//! recovery of a dead consumer's processing list.

mod support;

use std::time::Duration;

use std::collections::BTreeSet;
use std::sync::Arc;

use fred::prelude::*;
use ruststream_conformance::proxy::Proxy;
use ruststream_core::{
    AckError, Broker, Capabilities, Declaration, RETRY_COUNT, Settlement, Verdict,
};
use ruststream_redis::{RedisBroker, ReliableList, Settings};
use support::{complete, ctx, msg, n_of, next, next_within};

fn reliable(consumer: &str) -> ReliableList {
    ReliableList::new()
        .consumer(consumer)
        .block(Duration::from_millis(100))
        .heartbeat(Duration::from_millis(600))
}

fn processing(ctx: &support::Ctx, list: &str, consumer: &str) -> String {
    format!("{{{}}}:processing:{consumer}", ctx.key(list))
}

#[tokio::test]
async fn ack_and_drop_are_lrem() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("tasks", reliable("c1"), 8).await;
    assert_eq!(sub.capabilities, Capabilities::SETTLES);
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("tasks", msg(1)).await;
    ctx.publish("tasks", msg(2)).await;
    let a = next(&mut sub).await;
    let b = next(&mut sub).await;
    assert_eq!(
        (n_of(&a), n_of(&b)),
        (1, 2),
        "FIFO: producers LPUSH, consumers take the right"
    );
    let proc = processing(&ctx, "tasks", "c1");
    assert_eq!(ctx.llen(&proc).await, 2);
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 0);
    complete(a, caps, Verdict::Ack, &Declaration::default(), &*publisher)
        .await
        .expect("ack");
    assert_eq!(ctx.llen(&proc).await, 1);
    complete(b, caps, Verdict::Drop, &Declaration::default(), &*publisher)
        .await
        .expect("drop");
    assert_eq!(ctx.llen(&proc).await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_pushes_back_then_lrem() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("tasks", reliable("c1"), 1).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("tasks", msg(8)).await;
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
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "c1")).await, 0);
    assert_eq!(
        ctx.llen(&ctx.key("tasks")).await,
        1,
        "the copy is back on the list"
    );
    let copy = next(&mut sub).await;
    assert_eq!(n_of(&copy), 8);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(copy.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn requeue_is_unsupported() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("tasks", reliable("c1"), 1).await;
    ctx.publish("tasks", msg(1)).await;
    let d = next(&mut sub).await;
    let err = d
        .settle(Settlement::Requeue)
        .await
        .expect_err("unsupported");
    assert!(matches!(err, AckError::Unsupported));
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_dead_consumers_entries_are_recovered() {
    let ctx = ctx().await;
    let mut dead = ctx.subscribe("tasks", reliable("dead"), 8).await;
    for n in 0..3 {
        ctx.publish("tasks", msg(n)).await;
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(next(&mut dead).await);
    }
    // The consumer dies: its heartbeat stops, its deliveries stay unsettled.
    drop(dead);
    std::mem::forget(held);
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "dead")).await, 3);
    let mut live = ctx.subscribe("tasks", reliable("live"), 8).await;
    let mut got = Vec::new();
    while got.len() < 3 {
        let d = next_within(&mut live, Duration::from_secs(5))
            .await
            .expect("recovered within a few heartbeats");
        got.push(n_of(&d));
        d.settle(Settlement::Accept).await.expect("ack");
    }
    assert_eq!(got, [0, 1, 2], "oldest first");
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "dead")).await, 0);
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "live")).await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_restarted_consumer_hands_back_its_own_list_first() {
    let ctx = ctx().await;
    let mut first = ctx.subscribe("tasks", reliable("same"), 8).await;
    ctx.publish("tasks", msg(1)).await;
    let held = next(&mut first).await;
    drop(first);
    std::mem::forget(held);
    let mut again = ctx.subscribe("tasks", reliable("same"), 8).await;
    let d = next(&mut again).await;
    assert_eq!(n_of(&d), 1);
    d.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "same")).await, 0);
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_live_consumers_entries_are_left_alone() {
    let ctx = ctx().await;
    let mut slow = ctx.subscribe("tasks", reliable("slow"), 8).await;
    ctx.publish("tasks", msg(1)).await;
    let held = next(&mut slow).await;
    let mut other = ctx.subscribe("tasks", reliable("other"), 8).await;
    // Several heartbeats pass while `slow` still holds its delivery.
    assert!(
        next_within(&mut other, Duration::from_millis(2_000))
            .await
            .is_none()
    );
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "slow")).await, 1);
    held.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.llen(&processing(&ctx, "tasks", "slow")).await, 0);
    drop(slow);
    ctx.cleanup().await;
}

/// How many entries the processing lists of `list` hold, whatever the consumers' names.
async fn processing_total(ctx: &support::Ctx, list: &str) -> u64 {
    let keys: Vec<String> = ctx
        .admin
        .custom(
            fred::types::CustomCommand::new_static("KEYS", fred::types::ClusterHash::Random, false),
            vec![format!("{{{}}}:processing:*", ctx.key(list))],
        )
        .await
        .expect("keys");
    let mut total = 0;
    for key in keys {
        total += ctx.llen(&key).await;
    }
    total
}

/// A broker on the test's key prefix at `url`.
async fn broker_at(ctx: &support::Ctx, url: &str) -> RedisBroker {
    RedisBroker::connect_with(url, Settings::default().key_prefix(ctx.prefix.clone()))
        .await
        .expect("connect")
}

#[tokio::test]
async fn an_abandoned_delivery_is_back_on_the_list_at_once() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("tasks", ReliableList::new(), 8).await;
    ctx.publish_list("tasks", 4).await;
    let d = next(&mut sub).await;
    assert_eq!(processing_total(&ctx, "tasks").await, 1);
    // What the runtime does on fail_fast, at shutdown, or when a copy is not published.
    drop(d);
    // Long before the heartbeat (10 s) could expire.
    let again = next_within(&mut sub, Duration::from_secs(2))
        .await
        .expect("redelivered at once");
    assert_eq!(n_of(&again), 4);
    assert_eq!(
        processing_total(&ctx, "tasks").await,
        1,
        "only the new take"
    );
    again.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(processing_total(&ctx, "tasks").await, 0);
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_dropped_subscription_hands_back_what_it_read_but_did_not_hand_out() {
    let ctx = ctx().await;
    for n in 0..20 {
        ctx.publish_list("tasks", n).await;
    }
    let mut sub = ctx.subscribe("tasks", ReliableList::new(), 8).await;
    for n in 0..2 {
        let d = next(&mut sub).await;
        assert_eq!(n_of(&d), n);
        d.settle(Settlement::Accept).await.expect("ack");
    }
    // Six more were taken with the first batch: a graceful stop drops them unread.
    drop(sub);
    ctx.broker.close().await;
    assert_eq!(processing_total(&ctx, "tasks").await, 0, "nothing stranded");
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 18);
    let again = broker_at(&ctx, &support::url()).await;
    let mut options = ruststream_core::Options::default();
    options.insert(ReliableList::new());
    let mut spec = ruststream_core::SubscribeSpec::new("tasks");
    spec.options = options;
    spec.in_flight = 8;
    let mut sub = again.subscribe(spec).await.expect("subscribe");
    for n in 2..20 {
        let d = next(&mut sub).await;
        assert_eq!(n_of(&d), n, "in their order");
        d.settle(Settlement::Accept).await.expect("ack");
    }
    ctx.cleanup().await;
}

#[tokio::test]
async fn byte_identical_messages_settled_differently_lose_nothing() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("tasks", ReliableList::new(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let none = Declaration::default();
    ctx.publish_list("tasks", 7).await;
    ctx.publish_list("tasks", 7).await;
    let a = next(&mut sub).await;
    let b = next(&mut sub).await;
    assert_eq!(processing_total(&ctx, "tasks").await, 2);
    complete(a, caps, Verdict::Ack, &none, &*publisher)
        .await
        .expect("ack");
    assert_eq!(processing_total(&ctx, "tasks").await, 1, "only one left");
    complete(b, caps, Verdict::Retry, &none, &*publisher)
        .await
        .expect("retry");
    assert_eq!(processing_total(&ctx, "tasks").await, 0);
    let copy = next(&mut sub).await;
    assert_eq!(n_of(&copy), 7);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    // One in the processing list, its twin on the list: settling it leaves the twin.
    ctx.publish_list("tasks", 7).await;
    copy.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(
        ctx.llen(&ctx.key("tasks")).await + processing_total(&ctx, "tasks").await,
        1
    );
    let twin = next(&mut sub).await;
    assert_eq!(n_of(&twin), 7);
    twin.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(processing_total(&ctx, "tasks").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn an_ack_replayed_after_a_lost_answer_leaves_a_byte_identical_twin() {
    let ctx = ctx().await;
    let proxy = Arc::new(Proxy::to_url(&support::url()).await);
    let broker = broker_at(&ctx, &proxy.through(&support::url())).await;
    let mut options = ruststream_core::Options::default();
    options.insert(ReliableList::new());
    let mut spec = ruststream_core::SubscribeSpec::new("tasks");
    spec.options = options;
    spec.in_flight = 8;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    ctx.publish_list("tasks", 7).await;
    ctx.publish_list("tasks", 7).await;
    let a = next(&mut sub).await;
    let b = next(&mut sub).await;
    // The server removes `a`'s element; the answer is lost and the client sends the
    // `LREM` again on a new connection.
    proxy.mute(true);
    let ack = tokio::spawn(a.settle(Settlement::Accept));
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.cut();
    proxy.mute(false);
    ack.await.expect("task").expect("ack, replayed");
    assert_eq!(
        processing_total(&ctx, "tasks").await,
        1,
        "b's element is still there: a crash now would not lose it"
    );
    b.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(processing_total(&ctx, "tasks").await, 0);
    drop(sub);
    broker.close().await;
    ctx.cleanup().await;
}

#[tokio::test]
async fn takes_replayed_after_connection_resets_strand_nothing() {
    const N: usize = 500;
    let ctx = ctx().await;
    let proxy = Arc::new(Proxy::to_url(&support::url()).await);
    let broker = broker_at(&ctx, &proxy.through(&support::url())).await;
    let mut options = ruststream_core::Options::default();
    options.insert(ReliableList::new());
    let mut spec = ruststream_core::SubscribeSpec::new("tasks");
    spec.options = options;
    spec.in_flight = 16;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let handled = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let consumer = {
        let handled = handled.clone();
        tokio::spawn(async move {
            while let Some(d) = next_within(&mut sub, Duration::from_secs(8)).await {
                handled.lock().expect("lock").insert(n_of(&d));
                if let Err(e) = d.settle(Settlement::Accept).await {
                    eprintln!("ack failed: {e}");
                }
                if handled.lock().expect("lock").len() == N {
                    break;
                }
            }
            sub
        })
    };
    // While messages flow: six times, what the consumer sends runs on the server and is
    // never answered, then every connection is cut.
    let proxy = Arc::new(proxy);
    let chaos = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            for _ in 0..6 {
                tokio::time::sleep(Duration::from_millis(120)).await;
                // What the client sends meanwhile runs and is never answered.
                proxy.mute(true);
                tokio::time::sleep(Duration::from_millis(100)).await;
                proxy.cut();
                proxy.mute(false);
            }
        })
    };
    for n in 0..N {
        ctx.publish_list("tasks", n).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    chaos.await.expect("chaos");
    let sub = consumer.await.expect("consumer");
    let handled = handled.lock().expect("lock").clone();
    let missing: Vec<usize> = (0..N).filter(|n| !handled.contains(n)).collect();
    assert!(missing.is_empty(), "never handled: {missing:?}");
    assert_eq!(processing_total(&ctx, "tasks").await, 0, "nothing stranded");
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 0);
    drop(sub);
    broker.close().await;
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_take_in_flight_when_the_subscription_is_dropped_is_handed_back() {
    let ctx = ctx().await;
    let proxy = Arc::new(Proxy::to_url(&support::url()).await);
    let broker = broker_at(&ctx, &proxy.through(&support::url())).await;
    let mut options = ruststream_core::Options::default();
    options.insert(ReliableList::new());
    let mut spec = ruststream_core::SubscribeSpec::new("tasks");
    spec.options = options;
    spec.in_flight = 8;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    for n in 0..3 {
        ctx.publish_list("tasks", n).await;
    }
    // The first take runs on the server; its answer does not come back before the stop.
    proxy.mute(true);
    assert!(
        next_within(&mut sub, Duration::from_millis(300))
            .await
            .is_none()
    );
    assert_eq!(processing_total(&ctx, "tasks").await, 3, "taken, unseen");
    drop(sub);
    proxy.cut();
    proxy.mute(false);
    broker.close().await;
    assert_eq!(processing_total(&ctx, "tasks").await, 0, "nothing stranded");
    assert_eq!(ctx.llen(&ctx.key("tasks")).await, 3);
    ctx.cleanup().await;
}
