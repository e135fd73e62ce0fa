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
            delays: true,
            max_delay: None,
            dead_letters: false
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
