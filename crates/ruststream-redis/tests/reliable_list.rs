//! The reliable list form: LREM from the processing list, retries pushed back first, and
//! recovery of a dead consumer's processing list.

mod support;

use std::time::Duration;

use ruststream_core::{
    AckError, Broker, Capabilities, Declaration, RETRY_COUNT, Settlement, Verdict,
};
use ruststream_redis::ReliableList;
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
