//! SPEC §2, at least once: every row of the settlement table, checked through what the
//! broker does next. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use std::time::Duration;

use ruststream_amqp::{QueueOptions, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Message, Original, RETRY_COUNT, Settlement, Verdict};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("ack");
    q.quorum("retry");
    q.quorum_with_dlx("drop", None);
    q.quorum_with_dlx("later", None);
    q.quorum("none");
    q.quorum("capq");
    q.classic("capc");
    q.classic("nocount");
    q.quorum_with_dlx("capdl", None);
    q.classic("capdl-ours");
    q.quorum("dlnocap");
    q.classic("dlnocap-ours");
    q.quorum_with_dlx("self", Some(2));
    q.quorum("copy");
    q.quorum("topic-a");
    q.classic("topic-b");
    q.fanout("topic", &["topic-a", "topic-b"]);
}

fn q(role: &str) -> String {
    name(topology, role)
}

#[tokio::test]
async fn ack_accepts_and_the_message_leaves_the_queue() {
    let broker = broker().await;
    let queue = q("ack");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"m-0");
    let done = run(&broker, &sub, &decl, d, Verdict::Ack).await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Accept));
    assert!(matches!(done.settled, Some(Ok(()))));
    nothing_for(&mut sub, 500).await;
    drop(sub);
    empty(&broker, &queue, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn retry_modifies_and_the_quorum_queue_counts() {
    let broker = broker().await;
    let queue = q("retry");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    assert!(sub.capabilities.counts, "a quorum queue counts");
    for attempt in 1..=3 {
        let d = next(&mut sub, 10).await;
        assert_eq!(d.broker_attempt(), Some(attempt), "delivery-count + 1");
        assert_eq!(d.redelivery_count(), attempt);
        let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
        assert_eq!(done.plan.original, Original::Settle(Settlement::Requeue));
        assert!(done.plan.copy.is_none());
    }
    let d = next(&mut sub, 10).await;
    assert_eq!(d.broker_attempt(), Some(4));
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn drop_rejects_and_the_broker_dead_letters() {
    let broker = broker().await;
    let (queue, dead) = (q("drop"), q("drop-dead"));
    broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("{\"n\":1}").with_header("tenant", "acme"),
        )
        .await
        .expect("publish");
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let done = run(&broker, &sub, &decl, d, Verdict::Drop).await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Reject));
    nothing_for(&mut sub, 500).await;

    // The broker moved it to its dead-letter queue; the dead letter (with RabbitMQ's
    // `x-opt-deaths` annotation, an array of maps) is readable.
    let mut dead_sub = subscribe(&broker, spec(&dead, SubscribeOptions::new(), decl)).await;
    let d = next(&mut dead_sub, 10).await;
    assert_eq!(d.defect(), None, "dead letter must decode");
    assert_eq!(d.payload().as_ref(), b"{\"n\":1}");
    assert_eq!(d.headers().get_str("tenant"), Some("acme"));
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn retry_after_rejects_and_copies_with_the_retry_count_after_the_delay() {
    let broker = broker().await;
    // The queue dead-letters: the `rejected` original goes to its dead-letter queue.
    let (queue, dead) = (q("later"), q("later-dead"));
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let started = tokio::time::Instant::now();
    let done = run(
        &broker,
        &sub,
        &decl,
        d,
        Verdict::RetryAfter(Duration::from_millis(700)),
    )
    .await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Reject));
    assert!(matches!(done.settled, Some(Ok(()))));
    let copy = done.plan.copy.expect("a copy");
    assert_eq!(copy.retry_count, Some(1));
    let d = next(&mut sub, 10).await;
    assert!(
        started.elapsed() >= Duration::from_millis(650),
        "the copy waited"
    );
    assert_eq!(d.payload().as_ref(), b"m-0");
    assert_eq!(d.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(d.redelivery_count(), 2, "the copy is attempt 2");
    d.settle(Settlement::Accept).await.expect("accept");
    nothing_for(&mut sub, 500).await;
    // `rejected`: the broker's dead-letter policy took the original.
    let mut dead_sub = subscribe(&broker, spec(&dead, SubscribeOptions::new(), decl)).await;
    let d = next(&mut dead_sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"m-0");
    assert_eq!(d.headers().get(RETRY_COUNT), None);
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn no_outcome_before_the_link_goes_and_the_message_comes_back() {
    let broker = broker().await;
    let queue = q("none");
    publish_n(&broker, &queue, 1, "m").await;
    let mut first = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let held = next(&mut first, 10).await;
    // No outcome: the link detaches (the subscription is dropped) with it unsettled.
    drop(first);
    let mut second = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut second, 10).await;
    assert_eq!(d.payload().as_ref(), b"m-0");
    d.settle(Settlement::Accept).await.expect("accept");
    // The held delivery's link is gone: it cannot be settled any more.
    assert!(held.settle(Settlement::Accept).await.is_err());
    nothing_for(&mut second, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn capped_retry_on_a_quorum_queue_requeues_then_rejects_at_the_cap() {
    let broker = broker().await;
    let queue = q("capq");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = cap(3);
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub, 10).await;
        attempts.push(d.redelivery_count());
        run(&broker, &sub, &decl, d, Verdict::Retry).await;
    }
    assert_eq!(attempts, [1, 2, 3]);
    nothing_for(&mut sub, 700).await;
    drop(sub);
    empty(&broker, &queue, 300).await;
    broker.close().await;
}

#[tokio::test]
async fn capped_retry_on_a_classic_queue_copies_and_ends_at_the_cap() {
    let broker = broker().await;
    let queue = q("capc");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = cap(3);
    // A classic queue on RabbitMQ 4 does not count `modified`: the adapter finds out.
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    assert!(!sub.capabilities.counts);
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub, 10).await;
        attempts.push(d.redelivery_count());
        let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
        if attempts.len() < 3 {
            assert_eq!(done.plan.original, Original::Settle(Settlement::Remove));
            assert!(done.plan.copy.is_some());
        } else {
            assert_eq!(done.plan.original, Original::Settle(Settlement::Reject));
        }
    }
    assert_eq!(attempts, [1, 2, 3]);
    nothing_for(&mut sub, 700).await;
    drop(sub);
    empty(&broker, &queue, 300).await;
    broker.close().await;
}

#[tokio::test]
async fn a_classic_queue_counts_modified_only_from_rabbitmq_4_3() {
    // Why a classic queue is taken as not counting: RabbitMQ 4.0 gives its message back
    // after `modified{delivery-failed}` with the same delivery-count (4.3 counts it; the
    // adapter's retry by copy on a classic queue counts on every version).
    // `counts(true)` forces the adapter to read that count, to see it.
    let broker = broker().await;
    let queue = q("nocount");
    publish_n(&broker, &queue, 1, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(
            &queue,
            SubscribeOptions::new().queue(QueueOptions::new().counts(true)),
            Declaration::default(),
        ),
    )
    .await;
    let d = next(&mut sub, 10).await;
    assert_eq!(d.broker_attempt(), Some(1));
    d.settle(Settlement::Requeue).await.expect("modified");
    let d = next(&mut sub, 10).await;
    let counted = if release() >= (4, 3) { 2 } else { 1 };
    assert_eq!(
        d.broker_attempt(),
        Some(counted),
        "classic queues count from RabbitMQ 4.3, not on 4.0"
    );
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}

#[tokio::test]
async fn at_the_cap_the_delivery_goes_to_the_dead_letter_as_it_arrived() {
    let broker = broker().await;
    // The queue has a broker-side DLX too: `Remove` must not trigger it.
    let (queue, broker_dead) = (q("capdl"), q("capdl-dead"));
    let dead_letter = q("capdl-ours");
    broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("x").with_header("k", "v"),
        )
        .await
        .expect("publish");
    let decl = Declaration {
        dead_letter: Some(dead_letter.as_str().into()),
        ..cap(2)
    };
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    assert_eq!(
        run(&broker, &sub, &decl, d, Verdict::Retry)
            .await
            .plan
            .original,
        Original::Settle(Settlement::Requeue)
    );
    let d = next(&mut sub, 10).await;
    assert_eq!(d.redelivery_count(), 2);
    let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
    assert_eq!(done.plan.original, Original::Settle(Settlement::Remove));
    nothing_for(&mut sub, 500).await;
    let mut dl = subscribe(
        &broker,
        spec(
            &dead_letter,
            SubscribeOptions::new(),
            Declaration::default(),
        ),
    )
    .await;
    let d = next(&mut dl, 10).await;
    assert_eq!(d.payload().as_ref(), b"x");
    assert_eq!(d.headers().get_str("k"), Some("v"));
    assert_eq!(d.headers().get(RETRY_COUNT), None, "as it arrived");
    d.settle(Settlement::Accept).await.expect("accept");
    // accepted originals are not dead-lettered
    empty(&broker, &broker_dead, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn a_dead_letter_without_a_cap_takes_every_retry() {
    let broker = broker().await;
    let queue = q("dlnocap");
    let dead_letter = q("dlnocap-ours");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration {
        dead_letter: Some(dead_letter.as_str().into()),
        ..Declaration::default()
    };
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
    assert!(done.plan.copy.is_some());
    nothing_for(&mut sub, 500).await;
    let mut dl = subscribe(
        &broker,
        spec(
            &dead_letter,
            SubscribeOptions::new(),
            Declaration::default(),
        ),
    )
    .await;
    assert_eq!(next(&mut dl, 10).await.payload().as_ref(), b"m-0");
    broker.close().await;
}

#[tokio::test]
async fn a_queue_that_dead_letters_itself_counts_and_moves_spent_deliveries() {
    let broker = broker().await;
    let (queue, dead) = (q("self"), q("self-dead"));
    publish_n(&broker, &queue, 1, "m").await;
    // x-delivery-limit 2: RabbitMQ dead-letters a message that failed more than twice,
    // which is max_attempts(3) (a cap of 2 would be refused: the limit disagrees).
    let decl = cap(3);
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    assert!(sub.capabilities.dead_letters, "found out from the queue");
    for attempt in 1..=3 {
        let d = next(&mut sub, 10).await;
        assert_eq!(d.redelivery_count(), attempt);
        let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
        assert_eq!(done.plan.original, Original::Settle(Settlement::Requeue));
    }
    let mut dead_sub = subscribe(
        &broker,
        spec(&dead, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut dead_sub, 10).await;
    assert_eq!(d.defect(), None);
    assert_eq!(d.payload().as_ref(), b"m-0");
    nothing_for(&mut sub, 300).await;
    broker.close().await;
}

#[tokio::test]
async fn a_topic_address_gives_every_subscription_a_copy() {
    let broker = broker().await;
    let exchange = q("topic");
    let a = q("topic-a");
    let b = q("topic-b");
    let address = format!("/exchanges/{exchange}");
    let mut sa = subscribe(
        &broker,
        spec(&a, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let mut sb = subscribe(
        &broker,
        spec(&b, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    broker
        .publisher()
        .publish(address.as_str().into(), Message::new("t"))
        .await
        .expect("publish to exchange");
    for s in [&mut sa, &mut sb] {
        let d = next(s, 10).await;
        assert_eq!(d.payload().as_ref(), b"t");
        d.settle(Settlement::Accept).await.expect("accept");
    }
    broker.close().await;
}

#[tokio::test]
async fn a_copy_on_a_counting_queue_is_counted_by_its_retry_count_only() {
    // One attempt counter per delivery: a copy (it carries x-ruststream-retry-count) is
    // not also counted by the queue's delivery-count, which restarts at the copy.
    let broker = broker().await;
    let queue = q("copy");
    broker
        .publisher()
        .publish(
            queue.as_str().into(),
            Message::new("c").with_header(RETRY_COUNT, "2"),
        )
        .await
        .expect("publish");
    let decl = cap(5);
    let mut sub = subscribe(&broker, spec(&queue, SubscribeOptions::new(), decl.clone())).await;
    assert!(sub.capabilities.counts, "a quorum queue counts");
    let d = next(&mut sub, 10).await;
    assert_eq!(d.broker_attempt(), None, "a copy carries no broker count");
    assert_eq!(d.redelivery_count(), 3, "retry-count 2: attempt 3");
    // Given back with `modified` (as the broker's own requeue would): the queue counts
    // 1 now, and the copy is still attempt 3 by its header, not 1 + 1 + 2.
    d.settle(Settlement::Requeue).await.expect("modified");
    let d = next(&mut sub, 10).await;
    assert_eq!(d.broker_attempt(), None);
    assert_eq!(d.redelivery_count(), 3);
    // Under the cap, retry() on a copy is the next copy (SPEC §2).
    let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
    assert_eq!(done.plan.copy.as_ref().and_then(|c| c.retry_count), Some(3));
    assert_eq!(done.plan.original, Original::Settle(Settlement::Remove));
    let d = next(&mut sub, 10).await;
    assert_eq!(d.redelivery_count(), 4);
    d.settle(Settlement::Accept).await.expect("accept");
    broker.close().await;
}
