//! A quorum queue's delivery limit where it is not an argument: RabbitMQ 4 gives a
//! quorum queue without `x-delivery-limit` a limit of 20 and removes a message after 21
//! deliveries (RabbitMQ 3 has none). A mount whose `max_attempts` does not fit under the
//! limit is refused at subscribe, with the fix; a policy's limit is stated with
//! `delivery_limit`.

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{
    Address, Broker, Message, Settlement, SubscribeError, SubscribeSpec, Subscription,
};
use ruststream_lapin::{QueueOptions, QueueType, SubscribeOptions};
use support::{QueueSpec, Rabbit, broker, declare, unique};

/// `max_attempts(25)` and a dead letter, as a service mounts them.
fn capped(queue: &str, dead: &str) -> SubscribeSpec {
    let mut spec = SubscribeSpec::new(queue);
    spec.declaration.max_attempts = NonZeroU32::new(25);
    spec.declaration.dead_letter = Some(Address::from(dead));
    spec
}

/// Requeues the one message `times` times; then it must be delivered once more.
async fn requeue(sub: &mut Subscription, times: u32) {
    for attempt in 1..=times + 1 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .unwrap_or_else(|_| panic!("delivery {attempt} within 10 s"))
            .expect("open")
            .expect("a delivery");
        assert_eq!(d.broker_attempt(), Some(attempt));
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
}

async fn operator_quorum_queue(rabbit: Rabbit) -> (String, String) {
    let (queue, dead) = (unique("limit"), unique("limit-dead"));
    declare(
        rabbit,
        &[
            (dead.clone(), QueueSpec::classic()),
            (queue.clone(), QueueSpec::quorum()),
        ],
    );
    (queue, dead)
}

#[tokio::test]
async fn a_cap_above_rabbitmq_4s_default_limit_is_refused_with_the_fix() {
    let (queue, dead) = operator_quorum_queue(Rabbit::V4).await;
    let broker = broker(Rabbit::V4).await;
    match broker.subscribe(capped(&queue, &dead)).await {
        Err(SubscribeError::BadOption(why)) => {
            for says in [
                "delivery limit of 20",
                "RabbitMQ 4's default",
                "max_attempts(21) or less",
                "rabbitmqctl set_policy",
                "delivery_limit=24",
            ] {
                assert!(why.contains(says), "{says}: {why}");
            }
        }
        Err(other) => panic!("not refused for the limit: {other}"),
        Ok(_) => panic!("subscribed with max_attempts(25) under RabbitMQ 4's limit of 20"),
    }
    // A cap that fits is fine.
    let mut spec = capped(&queue, &dead);
    spec.declaration.max_attempts = NonZeroU32::new(21);
    broker.subscribe(spec).await.expect("21 fits");
    broker.close().await;
}

#[tokio::test]
async fn rabbitmq_3_keeps_no_default_limit() {
    let (queue, dead) = operator_quorum_queue(Rabbit::V3).await;
    let broker = broker(Rabbit::V3).await;
    let mut sub = broker
        .subscribe(capped(&queue, &dead))
        .await
        .expect("no limit on RabbitMQ 3");
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("again"))
        .await
        .expect("sent");
    requeue(&mut sub, 24).await;
    broker.close().await;
}

#[tokio::test]
async fn delivery_limit_states_a_policys_limit() {
    let (queue, dead) = operator_quorum_queue(Rabbit::V4).await;
    let policy = format!("{queue}-limit");
    let pattern = format!("^{queue}$");
    Rabbit::V4.ctl(&[
        "set_policy",
        &policy,
        &pattern,
        r#"{"delivery-limit":24}"#,
        "--apply-to",
        "quorum_queues",
    ]);
    let broker = broker(Rabbit::V4).await;
    let mut spec = capped(&queue, &dead);
    spec.options
        .insert(SubscribeOptions::new().queue(QueueOptions::new().delivery_limit(24)));
    let subscribed = broker.subscribe(spec).await;
    let mut sub = subscribed.expect("the stated limit fits");
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("again"))
        .await
        .expect("sent");
    requeue(&mut sub, 24).await;
    broker.close().await;
    Rabbit::V4.ctl(&["clear_policy", &policy]);
}

#[tokio::test]
async fn declare_quorum_without_max_attempts_sets_no_limit_on_rabbitmq_4() {
    let queue = unique("nolimit");
    let broker = broker(Rabbit::V4).await;
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.options
        .insert(SubscribeOptions::new().declare(QueueType::Quorum));
    let mut sub = broker.subscribe(spec).await.expect("declared");
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("again"))
        .await
        .expect("sent");
    // RabbitMQ 4's default would remove it after the 21st delivery.
    requeue(&mut sub, 22).await;
    broker.close().await;
    support::delete(Rabbit::V4, &queue).await;
}
