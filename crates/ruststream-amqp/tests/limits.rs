//! A quorum queue's delivery limit where it is not an argument: RabbitMQ 4 gives a
//! quorum queue without `x-delivery-limit` a limit of 20 and removes a message after 21
//! deliveries. A mount whose `max_attempts` does not fit under the limit is refused at
//! subscribe, with the fix; a policy's limit is stated with `delivery_limit`. Needs
//! RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use ruststream_amqp::{QueueOptions, QueueType, SubscribeOptions};
use ruststream_core::{Address, Broker, Declaration, Message, Settlement, SubscribeError};
use ruststream_core::{SubscribeSpec, Subscription};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("quorum");
    q.quorum("policed");
    q.classic("dead");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// `max_attempts(n)` and a dead letter, as a service mounts them.
fn capped(n: u32) -> Declaration {
    Declaration {
        dead_letter: Some(Address::from(q("dead").as_str())),
        ..cap(n)
    }
}

/// Requeues the one message `times` times; then it must be delivered once more.
async fn requeue(sub: &mut Subscription, times: u32) {
    for attempt in 1..=times + 1 {
        let d = next(sub, 10).await;
        assert_eq!(d.broker_attempt(), Some(attempt));
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
}

#[tokio::test]
async fn a_cap_above_rabbitmq_4s_default_limit_is_refused_with_the_fix() {
    let broker = broker().await;
    let queue = q("quorum");
    match broker
        .subscribe(spec(&queue, SubscribeOptions::new(), capped(25)))
        .await
    {
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
    subscribe(&broker, spec(&queue, SubscribeOptions::new(), capped(21))).await;
    broker.close().await;
}

#[tokio::test]
async fn delivery_limit_states_a_policys_limit() {
    let queue = q("policed");
    let policy = format!("{queue}-limit");
    let pattern = format!("^{queue}$");
    let policy_json = r#"{"delivery-limit":24}"#;
    rabbitmq4(
        &[
            "ctl",
            "set_policy",
            &policy,
            &pattern,
            policy_json,
            "--apply-to",
            "quorum_queues",
        ],
        None,
    );
    let broker = broker().await;
    let options = SubscribeOptions::new().queue(QueueOptions::new().delivery_limit(24));
    let mut sub = subscribe(&broker, spec(&queue, options, capped(25))).await;
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("again"))
        .await
        .expect("sent");
    requeue(&mut sub, 24).await;
    broker.close().await;
    rabbitmq4(&["ctl", "clear_policy", &policy], None);
}

#[tokio::test]
async fn declare_quorum_without_max_attempts_sets_no_limit() {
    let queue = unique("nolimit");
    let broker = broker().await;
    let mut declared = SubscribeSpec::new(queue.as_str());
    declared
        .options
        .insert(SubscribeOptions::new().declare(QueueType::Quorum));
    let mut sub = subscribe(&broker, declared).await;
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("again"))
        .await
        .expect("sent");
    // RabbitMQ 4's default would remove it after the 21st delivery.
    requeue(&mut sub, 22).await;
    broker.close().await;
    rabbitmq4(&["ctl", "delete_queue", &queue], None);
}
