//! SPEC §2, at most once (`Settle::AtMostOnce`): every row of its table, checked through
//! what the broker does next. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use std::time::Duration;

use ruststream_amqp::SubscribeOptions;
use ruststream_core::Broker;
use ruststream_core::{
    AckError, Capabilities, Declaration, Original, RETRY_COUNT, Settlement, Verdict,
};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("ack");
    q.quorum("drop");
    q.quorum("retry");
    q.quorum("retry-capped");
    q.quorum("later");
    q.quorum("none");
}

fn q(role: &str) -> String {
    name(topology, role)
}

#[tokio::test]
async fn ack_and_drop_are_unsupported_and_the_message_is_gone() {
    let broker = broker().await;
    for (role, verdict) in [("ack", Verdict::Ack), ("drop", Verdict::Drop)] {
        let queue = q(role);
        publish_n(&broker, &queue, 1, "m").await;
        let decl = Declaration::default();
        let mut sub = subscribe(&broker, spec(&queue, at_most_once(), decl.clone())).await;
        assert_eq!(sub.capabilities, Capabilities::NONE);
        let d = next(&mut sub, 10).await;
        assert_eq!(d.broker_attempt(), None, "nothing counts at most once");
        let done = run(&broker, &sub, &decl, d, verdict).await;
        assert_eq!(done.plan.original, Original::Unsupported);
        assert!(matches!(done.settled, Some(Err(AckError::Unsupported))));
        drop(sub);
        // Settled on receipt: it does not come back.
        empty(&broker, &queue, 500).await;
    }
    broker.close().await;
}

#[tokio::test]
async fn retry_is_unsupported_without_a_declaration() {
    let broker = broker().await;
    let queue = q("retry");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, at_most_once(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
    assert_eq!(done.plan.original, Original::Unsupported);
    assert!(done.plan.copy.is_none());
    assert!(matches!(done.settled, Some(Err(AckError::Unsupported))));
    nothing_for(&mut sub, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn retry_under_a_cap_publishes_an_immediate_copy_until_the_cap() {
    let broker = broker().await;
    let queue = q("retry-capped");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = cap(3);
    let mut sub = subscribe(&broker, spec(&queue, at_most_once(), decl.clone())).await;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let d = next(&mut sub, 10).await;
        attempts.push(d.redelivery_count());
        let done = run(&broker, &sub, &decl, d, Verdict::Retry).await;
        if attempts.len() < 3 {
            assert_eq!(done.plan.original, Original::Untouched);
            assert_eq!(
                done.plan.copy.as_ref().and_then(|c| c.retry_count),
                Some(attempts.len() as u32)
            );
        } else {
            // At the cap without a dead letter: reject, which at most once cannot do.
            assert_eq!(done.plan.original, Original::Unsupported);
        }
    }
    assert_eq!(attempts, [1, 2, 3]);
    nothing_for(&mut sub, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn retry_after_publishes_a_copy_after_the_delay() {
    let broker = broker().await;
    let queue = q("later");
    publish_n(&broker, &queue, 1, "m").await;
    let decl = Declaration::default();
    let mut sub = subscribe(&broker, spec(&queue, at_most_once(), decl.clone())).await;
    let d = next(&mut sub, 10).await;
    let started = tokio::time::Instant::now();
    let done = run(
        &broker,
        &sub,
        &decl,
        d,
        Verdict::RetryAfter(Duration::from_millis(600)),
    )
    .await;
    assert_eq!(done.plan.original, Original::Untouched);
    let d = next(&mut sub, 10).await;
    assert!(started.elapsed() >= Duration::from_millis(550));
    assert_eq!(d.headers().get_str(RETRY_COUNT), Some("1"));
    assert_eq!(d.redelivery_count(), 2);
    nothing_for(&mut sub, 500).await;
    broker.close().await;
}

#[tokio::test]
async fn no_outcome_means_nothing_the_broker_already_let_go() {
    let broker = broker().await;
    let queue = q("none");
    publish_n(&broker, &queue, 1, "m").await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, at_most_once(), Declaration::default()),
    )
    .await;
    let held = next(&mut sub, 10).await;
    drop(sub);
    empty(&broker, &queue, 700).await;
    assert!(matches!(
        held.settle(Settlement::Accept).await,
        Err(AckError::Unsupported)
    ));
    let _ = SubscribeOptions::new();
    broker.close().await;
}
