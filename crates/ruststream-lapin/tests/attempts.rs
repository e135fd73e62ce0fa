//! Attempts as the broker counts them: a quorum queue's `x-delivery-count` (checked on
//! the real brokers: none on the first delivery, `n` after `n` requeues, RabbitMQ 4.3's
//! included, which counts a retry only as `basic.reject`), a classic queue that does not
//! count, abandoning, and a quorum queue that dead-letters itself after exactly
//! `x-delivery-limit + 1` deliveries.

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{
    Address, Broker, Message, RETRY_COUNT, Settlement, SubscribeError, SubscribeSpec, Subscription,
};
use ruststream_lapin::LapinBroker;
use support::{QueueSpec, Rabbit, broker, declare, next, unique, waiting};

/// A queue of `spec` declared under a name made from `name` (returned), `message`
/// waiting in it, and a subscription to it with default options.
async fn one_waiting(
    rabbit: Rabbit,
    name: &str,
    spec: QueueSpec,
    message: Message,
) -> (String, LapinBroker, Subscription) {
    let queue = unique(name);
    declare(rabbit, &[(queue.clone(), spec)]);
    let broker = broker(rabbit).await;
    broker
        .publisher()
        .publish(queue.as_str().into(), message)
        .await
        .expect("sent");
    let sub = broker
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    (queue, broker, sub)
}

async fn quorum_counts_requeues(rabbit: Rabbit) {
    let (queue, broker, mut sub) =
        one_waiting(rabbit, "count", QueueSpec::quorum(), Message::new("again")).await;
    assert!(sub.capabilities.counts && sub.capabilities.requeues);
    assert!(!sub.capabilities.dead_letters);
    for attempt in 1..=4 {
        let d = next(&mut sub).await;
        assert_eq!(
            d.broker_attempt(),
            Some(attempt),
            "{rabbit:?} {:?}",
            d.headers()
        );
        assert_eq!(d.redelivery_count(), attempt);
        let header = d.headers().get_str("x-delivery-count").map(str::to_owned);
        assert_eq!(
            header,
            (attempt > 1).then(|| (attempt - 1).to_string()),
            "{rabbit:?}"
        );
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
    // Abandoning gives it back at once, a return: counted before RabbitMQ 4.3, not from
    // 4.3 on (a retry, `basic.reject`, counts on both).
    let d = next(&mut sub).await;
    assert_eq!(d.broker_attempt(), Some(5));
    drop(d);
    let d = next(&mut sub).await;
    let (after, how) = if rabbit.counts_returns() {
        (6, "counts")
    } else {
        (5, "does not count")
    };
    assert_eq!(
        d.broker_attempt(),
        Some(after),
        "{rabbit:?}: an abandoned delivery {how}"
    );
    d.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

async fn a_copy_counts_by_its_header_alone(rabbit: Rabbit) {
    let (_, broker, mut sub) = one_waiting(
        rabbit,
        "copy",
        QueueSpec::quorum(),
        Message::new("copy").with_header(RETRY_COUNT, "2"),
    )
    .await;
    let d = next(&mut sub).await;
    assert_eq!(d.broker_attempt(), None);
    assert_eq!(d.redelivery_count(), 3);
    d.settle(Settlement::Requeue).await.expect("requeued");
    let d = next(&mut sub).await;
    assert_eq!(d.broker_attempt(), None, "never both counts");
    assert_eq!(d.redelivery_count(), 3);
    d.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
}

async fn classic_does_not_count(rabbit: Rabbit) {
    let (queue, broker, mut sub) =
        one_waiting(rabbit, "classic", QueueSpec::classic(), Message::new("c")).await;
    assert!(!sub.capabilities.counts && sub.capabilities.requeues);
    let d = next(&mut sub).await;
    assert_eq!(d.broker_attempt(), None);
    d.settle(Settlement::Requeue).await.expect("requeued");
    let d = next(&mut sub).await;
    assert_eq!(d.broker_attempt(), None);
    assert_eq!(d.redelivery_count(), 1);
    // Reject without a dead-letter exchange: gone.
    d.settle(Settlement::Reject).await.expect("rejected");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
    broker.close().await;
}

async fn self_dead_lettering_quorum_delivers_max_attempts_times(rabbit: Rabbit) {
    let (queue, dead) = (unique("selfdl"), unique("selfdl-dead"));
    declare(
        rabbit,
        &[
            (dead.clone(), QueueSpec::classic()),
            (queue.clone(), QueueSpec::self_dead_lettering(2, &dead)),
        ],
    );
    let broker = broker(rabbit).await;
    // The mount must agree with the queue: max_attempts(3) is x-delivery-limit 2.
    let spec = |max: u32, dead_letter: &str| {
        let mut spec = SubscribeSpec::new(queue.as_str());
        spec.declaration.max_attempts = NonZeroU32::new(max);
        spec.declaration.dead_letter = Some(Address::from(dead_letter));
        spec
    };
    for (max, dl, says) in [
        (
            4,
            dead.as_str(),
            "x-delivery-limit 2, max_attempts(4) needs 3",
        ),
        (
            2,
            dead.as_str(),
            "x-delivery-limit 2, max_attempts(2) needs 1",
        ),
        (3, "elsewhere", "dead_letter is elsewhere"),
    ] {
        match broker.subscribe(spec(max, dl)).await {
            Err(SubscribeError::BadOption(why)) => assert!(why.contains(says), "{why}"),
            other => panic!("{rabbit:?}: max_attempts({max}) {dl}: {other:?}"),
        }
    }
    let mut sub = broker.subscribe(spec(3, &dead)).await.expect("agrees");
    assert!(sub.capabilities.dead_letters && sub.capabilities.counts);
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("poison"))
        .await
        .expect("sent");
    for attempt in 1..=3 {
        let d = next(&mut sub).await;
        assert_eq!(d.broker_attempt(), Some(attempt));
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
    // The third failure was the last: the queue moved it to the dead letter itself.
    let quiet = tokio::time::timeout(Duration::from_secs(1), sub.deliveries.next()).await;
    assert!(
        quiet.is_err(),
        "{rabbit:?}: delivered a fourth time: {quiet:?}"
    );
    let mut moved = 0;
    for _ in 0..50 {
        moved = waiting(rabbit, &dead).await;
        if moved == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(moved, 1, "{rabbit:?}: the dead letter has it");
    broker.close().await;
}

async fn a_stream_is_read_and_never_requeued(rabbit: Rabbit) {
    let queue = unique("stream");
    declare(
        rabbit,
        &[(
            queue.clone(),
            QueueSpec {
                kind: "stream",
                ..QueueSpec::default()
            },
        )],
    );
    let broker = broker(rabbit).await;
    let mut sub = broker
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    assert!(sub.capabilities.settles && !sub.capabilities.requeues && !sub.capabilities.counts);
    for i in 0..3 {
        broker
            .publisher()
            .publish(queue.as_str().into(), Message::new(format!("s{i}")))
            .await
            .expect("sent");
    }
    for i in 0..3 {
        let d = next(&mut sub).await;
        assert_eq!(d.payload().as_ref(), format!("s{i}").as_bytes());
        assert_eq!(d.broker_attempt(), None);
        d.settle(Settlement::Accept).await.expect("acked");
    }
    broker.close().await;
    support::delete(rabbit, &queue).await;
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod rabbitmq3 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V3).await; })*
        }
        mod rabbitmq4 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V4).await; })*
        }
    };
}

on_both!(
    quorum_counts_requeues,
    a_copy_counts_by_its_header_alone,
    classic_does_not_count,
    self_dead_lettering_quorum_delivers_max_attempts_times,
    a_stream_is_read_and_never_requeued
);
