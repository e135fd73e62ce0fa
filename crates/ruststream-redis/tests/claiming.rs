//! The claiming form: requeues stay in the PEL and come back after `min_idle` with the
//! same id and the server's counter + 1.

mod support;

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use ruststream_core::{Address, Broker, Capabilities, Declaration, Verdict};
use ruststream_redis::Claiming;
use support::{complete, ctx, msg, n_of, next, next_within};

const MIN_IDLE: Duration = Duration::from_millis(300);

fn claiming() -> Claiming {
    Claiming::new(MIN_IDLE)
        .group("g")
        .block(Duration::from_millis(100))
}

#[tokio::test]
async fn capabilities_settle_requeue_count_and_delay() {
    let ctx = ctx().await;
    let sub = ctx.subscribe("jobs", claiming(), 8).await;
    assert_eq!(
        sub.capabilities,
        Capabilities {
            settles: true,
            requeues: true,
            counts: true,
            // A longer delay is the runtime's copy.
            delays: Some(MIN_IDLE),
            dead_letters: false,
            moves: false,
        }
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn ack_and_drop_are_xack() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("jobs", msg(1)).await;
    ctx.publish("jobs", msg(2)).await;
    let a = next(&mut sub).await;
    let b = next(&mut sub).await;
    assert_eq!(a.broker_attempt(), Some(1));
    complete(a, caps, Verdict::Ack, &Declaration::default(), &*publisher)
        .await
        .expect("ack");
    complete(b, caps, Verdict::Drop, &Declaration::default(), &*publisher)
        .await
        .expect("drop");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    // Nothing comes back after min_idle.
    assert!(next_within(&mut sub, MIN_IDLE * 3).await.is_none());
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_stays_in_the_pel_and_comes_back_counted() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let decl = Declaration {
        max_attempts: NonZeroU32::new(3),
        ..Declaration::default()
    };
    ctx.publish("jobs", msg(9)).await;
    let first = next(&mut sub).await;
    assert_eq!(first.redelivery_count(), 1);
    let started = Instant::now();
    complete(first, caps, Verdict::Retry, &decl, &*publisher)
        .await
        .expect("requeue");
    assert_eq!(ctx.pending("jobs", "g").await, 1, "left in the PEL");
    assert_eq!(ctx.xlen("jobs").await, 1, "no copy");
    let second = next(&mut sub).await;
    assert!(started.elapsed() >= MIN_IDLE, "back only after min_idle");
    assert_eq!(n_of(&second), 9);
    assert_eq!(second.redelivery_count(), 2, "the server's counter");
    assert_eq!(ctx.first_pending_counter("jobs", "g").await, Some(2));
    complete(second, caps, Verdict::Retry, &decl, &*publisher)
        .await
        .expect("requeue");
    let third = next(&mut sub).await;
    assert_eq!(third.redelivery_count(), 3);
    // At the cap without a dead letter: rejected (XACK).
    complete(third, caps, Verdict::Retry, &decl, &*publisher)
        .await
        .expect("reject");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    assert_eq!(ctx.xlen("jobs").await, 1);
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_after_shorter_than_min_idle_lasts_min_idle() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("jobs", msg(1)).await;
    let d = next(&mut sub).await;
    let started = Instant::now();
    complete(
        d,
        caps,
        Verdict::RetryAfter(Duration::from_millis(10)),
        &Declaration::default(),
        &*publisher,
    )
    .await
    .expect("requeue after");
    assert_eq!(ctx.pending("jobs", "g").await, 1);
    let again = next(&mut sub).await;
    assert!(started.elapsed() >= MIN_IDLE);
    assert_eq!(again.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn at_the_cap_with_a_dead_letter_copies_as_arrived() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let decl = Declaration {
        max_attempts: NonZeroU32::new(1),
        dead_letter: Some(Address::new("jobs.dead")),
        ..Declaration::default()
    };
    ctx.publish("jobs", msg(4)).await;
    let d = next(&mut sub).await;
    complete(d, caps, Verdict::Retry, &decl, &*publisher)
        .await
        .expect("dead letter");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    assert_eq!(ctx.xlen("jobs.dead").await, 1);
    ctx.cleanup().await;
}

#[tokio::test]
async fn another_consumer_claims_what_a_silent_one_left() {
    let ctx = ctx().await;
    let mut silent = ctx.subscribe("jobs", claiming(), 8).await;
    ctx.publish("jobs", msg(5)).await;
    let held = next(&mut silent).await;
    drop(held); // no outcome: it stays pending under the silent consumer
    let mut live = ctx.subscribe("jobs", claiming(), 8).await;
    let claimed = next(&mut live).await;
    assert_eq!(n_of(&claimed), 5);
    assert_eq!(claimed.redelivery_count(), 2);
    claimed
        .settle(ruststream_core::Settlement::Accept)
        .await
        .expect("ack");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    ctx.cleanup().await;
}

/// `retry_after` longer than `min_idle` is the runtime's copy (`max_delay`): the original
/// is acked now, the copy comes back no earlier than the delay, and its attempt goes on
/// from the original's (the copy's retry count plus the server's counter), so
/// `max_attempts` counts every try.
#[tokio::test]
async fn retry_after_longer_than_min_idle_waits_the_delay_and_counts_on() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    let decl = Declaration {
        max_attempts: NonZeroU32::new(3),
        ..Declaration::default()
    };
    let delay = MIN_IDLE * 4;
    ctx.publish("jobs", msg(7)).await;
    let mut attempt = 1;
    loop {
        let d = next(&mut sub).await;
        assert_eq!(n_of(&d), 7);
        assert_eq!(d.redelivery_count(), attempt, "one count across copies");
        let started = Instant::now();
        let settled = {
            let (decl, publisher) = (decl.clone(), publisher.clone());
            tokio::spawn(async move {
                complete(d, caps, Verdict::RetryAfter(delay), &decl, &*publisher).await
            })
        };
        if attempt == 3 {
            settled.await.expect("join").expect("rejected at the cap");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(ctx.pending("jobs", "g").await, 0, "the original acked now");
        let early = next_within(&mut sub, delay - Duration::from_millis(200)).await;
        assert!(early.is_none(), "back before the delay: {early:?}");
        settled.await.expect("join").expect("original settled");
        assert!(started.elapsed() >= delay);
        attempt += 1;
    }
    assert!(
        next_within(&mut sub, delay + MIN_IDLE).await.is_none(),
        "nothing after the cap"
    );
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    assert_eq!(ctx.xlen("jobs").await, 3, "the original and two copies");
    ctx.cleanup().await;
}

/// A handler that runs longer than `min_idle` keeps its entry: neither this consumer nor
/// another claims it while it is in hand.
#[tokio::test]
async fn a_handler_longer_than_min_idle_is_called_once() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("jobs", claiming(), 8).await;
    let mut other = ctx.subscribe("jobs", claiming(), 8).await;
    ctx.publish("jobs", msg(3)).await;
    let d = tokio::select! {
        d = next(&mut sub) => d,
        d = next(&mut other) => d,
    };
    // The handler runs for five times min_idle while both consumers keep reading.
    let (a, b) = tokio::join!(
        next_within(&mut sub, MIN_IDLE * 5),
        next_within(&mut other, MIN_IDLE * 5)
    );
    assert!(a.is_none() && b.is_none(), "claimed while in hand");
    d.settle(ruststream_core::Settlement::Accept)
        .await
        .expect("ack");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    ctx.cleanup().await;
}

/// A delivery dropped unsettled comes back at once, not after `min_idle`.
#[tokio::test]
async fn an_abandoned_delivery_comes_back_before_min_idle() {
    let ctx = ctx().await;
    let form = Claiming::new(Duration::from_secs(30))
        .group("g")
        .block(Duration::from_millis(100));
    let mut sub = ctx.subscribe("jobs", form, 8).await;
    ctx.publish("jobs", msg(4)).await;
    drop(next(&mut sub).await);
    let back = next_within(&mut sub, Duration::from_secs(3))
        .await
        .expect("back within 3 s");
    assert_eq!(n_of(&back), 4);
    assert_eq!(back.redelivery_count(), 2, "the server counted it");
    back.settle(ruststream_core::Settlement::Accept)
        .await
        .expect("ack");
    assert_eq!(ctx.pending("jobs", "g").await, 0);
    ctx.cleanup().await;
}

/// Taking back an abandoned delivery leaves a requeued one waiting its `min_idle`.
#[tokio::test]
async fn an_abandon_does_not_bring_back_a_requeued_entry_early() {
    let ctx = ctx().await;
    let min_idle = Duration::from_secs(3);
    let form = Claiming::new(min_idle)
        .group("g")
        .block(Duration::from_millis(100));
    let mut sub = ctx.subscribe("jobs", form, 8).await;
    ctx.publish("jobs", msg(1)).await;
    ctx.publish("jobs", msg(2)).await;
    let requeued = next(&mut sub).await;
    let abandoned = next(&mut sub).await;
    assert_eq!((n_of(&requeued), n_of(&abandoned)), (1, 2));
    let started = Instant::now();
    requeued
        .settle(ruststream_core::Settlement::Requeue)
        .await
        .expect("requeue");
    drop(abandoned);
    let back = next(&mut sub).await;
    assert_eq!(n_of(&back), 2, "the abandoned one first");
    back.settle(ruststream_core::Settlement::Accept)
        .await
        .expect("ack");
    let again = next(&mut sub).await;
    assert_eq!(n_of(&again), 1);
    assert!(
        started.elapsed() >= min_idle,
        "requeued back after min_idle"
    );
    again
        .settle(ruststream_core::Settlement::Accept)
        .await
        .expect("ack");
    ctx.cleanup().await;
}
