//! The stream form (consumer group): every outcome row, checked on the server.

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use ruststream_core::{
    AckError, Address, Broker, Capabilities, Declaration, RETRY_COUNT, Settlement, Verdict,
};
use ruststream_redis::{GroupStart, Stream};
use support::{complete, ctx, msg, n_of, next, next_within};

fn stream() -> Stream {
    Stream::new().group("g").block(Duration::from_millis(200))
}

#[tokio::test]
async fn capabilities_are_settles_only() {
    let ctx = ctx().await;
    let sub = ctx.subscribe("orders", stream(), 8).await;
    assert_eq!(sub.capabilities, Capabilities::SETTLES);
    ctx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_and_drop_are_xack() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("orders", msg(1)).await;
    ctx.publish("orders", msg(2)).await;
    let first = next(&mut sub).await;
    let second = next(&mut sub).await;
    assert_eq!((n_of(&first), n_of(&second)), (1, 2));
    assert_eq!(
        first.headers().get_str("content-type"),
        Some("application/json")
    );
    assert_eq!(
        first.broker_attempt(),
        None,
        "a plain stream does not count"
    );
    assert_eq!(ctx.pending("orders", "g").await, 2);
    let none = Declaration::default();
    complete(first, caps, Verdict::Ack, &none, &*publisher)
        .await
        .expect("ack");
    assert_eq!(ctx.pending("orders", "g").await, 1);
    complete(second, caps, Verdict::Drop, &none, &*publisher)
        .await
        .expect("drop");
    assert_eq!(ctx.pending("orders", "g").await, 0);
    assert_eq!(
        ctx.xlen("orders").await,
        2,
        "XACK leaves entries in the stream"
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_is_a_copy_then_xack() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("orders", msg(7)).await;
    let d = next(&mut sub).await;
    assert_eq!(d.redelivery_count(), 1);
    complete(
        d,
        caps,
        Verdict::Retry,
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("retry");
    assert_eq!(ctx.xlen("orders").await, 2, "the copy was appended");
    assert_eq!(
        ctx.pending("orders", "g").await,
        0,
        "the original was acked"
    );
    let copy = next(&mut sub).await;
    assert_eq!(n_of(&copy), 7);
    assert_eq!(copy.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(copy.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_after_in_process_acks_now_and_copies_later() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("orders", msg(3)).await;
    let d = next(&mut sub).await;
    let delay = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let done = tokio::spawn({
        let publisher = publisher.clone();
        async move {
            complete(
                d,
                caps,
                Verdict::RetryAfter(delay),
                &Declaration::default(),
                &*publisher,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ctx.pending("orders", "g").await,
        0,
        "the original is acked at once"
    );
    assert_eq!(ctx.xlen("orders").await, 1, "no copy before the delay");
    done.await.expect("task").expect("settled");
    let copy = next(&mut sub).await;
    assert!(started.elapsed() >= delay);
    assert_eq!(copy.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn at_the_cap_rejects_or_dead_letters() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let capped = Declaration {
        max_attempts: NonZeroU32::new(2),
        ..Declaration::default()
    };
    // Attempt 2 (retry count 1) is at the cap: rejected, nothing copied.
    ctx.publish("orders", msg(1).with_header(RETRY_COUNT, "1"))
        .await;
    let d = next(&mut sub).await;
    complete(d, caps, Verdict::Retry, &capped, &*publisher)
        .await
        .expect("reject");
    assert_eq!(ctx.pending("orders", "g").await, 0);
    assert_eq!(ctx.xlen("orders").await, 1);
    // With a dead letter: the delivery as it arrived goes there, then the original goes.
    let dead = Declaration {
        dead_letter: Some(Address::new("orders.dead")),
        ..capped
    };
    ctx.publish("orders", msg(2).with_header(RETRY_COUNT, "1"))
        .await;
    let d = next(&mut sub).await;
    complete(d, caps, Verdict::Retry, &dead, &*publisher)
        .await
        .expect("dead letter");
    assert_eq!(ctx.pending("orders", "g").await, 0);
    assert_eq!(ctx.xlen("orders.dead").await, 1);
    assert_eq!(ctx.xlen("orders").await, 2, "no retry copy");
    ctx.cleanup().await;
}

#[tokio::test]
async fn requeue_is_unsupported_on_a_plain_stream() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    ctx.publish("orders", msg(1)).await;
    let d = next(&mut sub).await;
    let err = d.settle(Settlement::Requeue).await.expect_err("no requeue");
    assert!(matches!(err, AckError::Unsupported));
    assert_eq!(ctx.pending("orders", "g").await, 1, "still pending");
    ctx.cleanup().await;
}

#[tokio::test]
async fn unsettled_entries_are_re_read_by_a_restarted_consumer() {
    let ctx = ctx().await;
    let form = stream().consumer("pod-1");
    let mut sub = ctx.subscribe("orders", form.clone(), 8).await;
    for n in 0..3 {
        ctx.publish("orders", msg(n)).await;
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(n_of(&next(&mut sub).await)); // no outcome: dropped unsettled
    }
    assert_eq!(seen, [0, 1, 2]);
    drop(sub);
    assert_eq!(ctx.pending("orders", "g").await, 3);
    // The same consumer, restarted: its own pending entries first, then new ones.
    ctx.publish("orders", msg(3)).await;
    let mut sub = ctx.subscribe("orders", form, 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let mut again = Vec::new();
    for _ in 0..4 {
        let d = next(&mut sub).await;
        again.push(n_of(&d));
        complete(d, caps, Verdict::Ack, &Declaration::default(), &*publisher)
            .await
            .expect("ack");
    }
    assert_eq!(again, [0, 1, 2, 3]);
    assert_eq!(ctx.pending("orders", "g").await, 0);
    ctx.cleanup().await;
}

#[tokio::test]
async fn group_start_end_skips_older_entries() {
    let ctx = ctx().await;
    ctx.publish("orders", msg(1)).await;
    let mut sub = ctx
        .subscribe("orders", stream().start(GroupStart::End), 8)
        .await;
    assert!(
        next_within(&mut sub, Duration::from_millis(400))
            .await
            .is_none()
    );
    ctx.publish("orders", msg(2)).await;
    assert_eq!(n_of(&next(&mut sub).await), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn two_groups_each_get_every_entry_and_consumers_share_one() {
    let ctx = ctx().await;
    let mut a1 = ctx.subscribe("orders", stream().group("a"), 1).await;
    let mut a2 = ctx.subscribe("orders", stream().group("a"), 1).await;
    let mut b = ctx.subscribe("orders", stream().group("b"), 8).await;
    for n in 0..4 {
        ctx.publish("orders", msg(n)).await;
    }
    // Deliveries are kept in hand: one dropped unsettled would be given back.
    let mut in_hand = Vec::new();
    let mut in_b = Vec::new();
    for _ in 0..4 {
        let d = next(&mut b).await;
        in_b.push(n_of(&d));
        in_hand.push(d);
    }
    assert_eq!(in_b, [0, 1, 2, 3]);
    let mut in_a = Vec::new();
    while in_a.len() < 4 {
        let d = tokio::select! {
            Some(d) = next_within(&mut a1, Duration::from_secs(5)) => d,
            Some(d) = next_within(&mut a2, Duration::from_secs(5)) => d,
        };
        in_a.push(n_of(&d));
        in_hand.push(d);
    }
    in_a.sort_unstable();
    assert_eq!(in_a, [0, 1, 2, 3], "each entry once within a group");
    ctx.cleanup().await;
}

/// Settlements made at the same time share `XACK`s, one after another settles alone:
/// either way each resolves only once the server has acked its entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_and_sequential_acks_all_reach_the_server() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream().count(128), 512).await;
    for n in 0..300 {
        ctx.publish("orders", msg(n)).await;
    }
    let mut deliveries = Vec::new();
    while deliveries.len() < 300 {
        deliveries.push(next(&mut sub).await);
    }
    assert_eq!(ctx.pending("orders", "g").await, 300);
    // 250 at once, from as many tasks.
    let rest = deliveries.split_off(250);
    let tasks: Vec<_> = deliveries
        .into_iter()
        .map(|d| tokio::spawn(async move { d.settle(Settlement::Accept).await }))
        .collect();
    for task in tasks {
        task.await.expect("joined").expect("acked");
    }
    assert_eq!(ctx.pending("orders", "g").await, 50);
    // The rest one by one.
    for (i, d) in rest.into_iter().enumerate() {
        d.settle(Settlement::Accept).await.expect("acked");
        assert_eq!(ctx.pending("orders", "g").await, 49 - i as u64);
    }
    ctx.cleanup().await;
}

/// A delivery dropped unsettled (`Acker::abandon`) is read again by the same
/// subscription, without a restart; the one kept in hand is not delivered twice.
#[tokio::test]
async fn an_abandoned_delivery_comes_back_at_once() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 8).await;
    ctx.publish("orders", msg(1)).await;
    ctx.publish("orders", msg(2)).await;
    let first = next(&mut sub).await;
    let kept = next(&mut sub).await;
    assert_eq!((n_of(&first), n_of(&kept)), (1, 2));
    drop(first);
    let back = next_within(&mut sub, Duration::from_secs(3))
        .await
        .expect("the abandoned delivery back within 3 s");
    assert_eq!(n_of(&back), 1);
    back.settle(Settlement::Accept).await.expect("ack");
    assert!(
        next_within(&mut sub, Duration::from_millis(600))
            .await
            .is_none(),
        "the delivery in hand is not given again"
    );
    kept.settle(Settlement::Accept).await.expect("ack");
    assert_eq!(ctx.pending("orders", "g").await, 0);
    ctx.cleanup().await;
}

/// Settlements asked for before `close` reach the server before the pool closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_waits_for_settlements_asked_before_it() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("orders", stream(), 64).await;
    for n in 0..50 {
        ctx.publish("orders", msg(n)).await;
    }
    let mut settling = Vec::new();
    for _ in 0..50 {
        settling.push(next(&mut sub).await.settle(Settlement::Accept));
    }
    drop(sub);
    // The settlements are carried out a little later, as a busy runtime would.
    let tasks: Vec<_> = settling
        .into_iter()
        .map(|s| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                s.await
            })
        })
        .collect();
    ctx.broker.close().await;
    for task in tasks {
        task.await
            .expect("join")
            .expect("acked before the pool closed");
    }
    assert_eq!(ctx.pending("orders", "g").await, 0);
    ctx.cleanup().await;
}
