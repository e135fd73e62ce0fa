//! The default: a missing queue is declared as a durable quorum queue with what the
//! mount implies (its delivery limit and dead letter, and the dead-letter queue); an
//! existing queue is never changed, only checked, and a mismatch names both sides and
//! the fix. `declare=never` declares nothing. The dead letter's queue is declared
//! wherever the mount's queue may be, and checked where not (a dead letter RabbitMQ
//! cannot route comes back for ever).

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{
    Address, Broker, Message, Setting, Settlement, SubscribeError, SubscribeSpec,
};
use support::{QueueSpec, Rabbit, broker, declare, unique, waiting};

/// `max_attempts(3)` and a dead letter, as a service mounts them; default options.
fn mounted(queue: &str, dead: &str) -> SubscribeSpec {
    let mut spec = SubscribeSpec::new(queue);
    spec.declaration.max_attempts = NonZeroU32::new(3);
    spec.declaration.dead_letter = Some(Address::from(dead));
    spec
}

/// The `type` and `arguments` columns of `queue` in `rabbitmqctl list_queues`.
fn listed(rabbit: Rabbit, queue: &str) -> Option<String> {
    let listing = rabbit.ctl(&[
        "list_queues",
        "-q",
        "--no-table-headers",
        "name",
        "type",
        "arguments",
    ]);
    listing
        .lines()
        .find(|line| line.split('\t').next() == Some(queue))
        .map(str::to_owned)
}

async fn a_missing_queue_is_declared_as_a_quorum_queue_by_default(rabbit: Rabbit) {
    let (queue, dead) = (unique("made"), unique("made-dead"));
    let broker = broker(rabbit).await;
    let mut sub = broker
        .subscribe(mounted(&queue, &dead))
        .await
        .expect("declared by default");
    assert!(sub.capabilities.counts && sub.capabilities.dead_letters);
    let made = listed(rabbit, &queue).expect("the queue exists");
    assert!(made.contains("quorum"), "{made}");
    assert!(made.contains("x-delivery-limit"), "{made}");
    let made_dead = listed(rabbit, &dead).expect("the dead-letter queue exists");
    assert!(
        made_dead.contains("classic"),
        "classic where the mount names no type, for the dead-letter tools: {made_dead}"
    );
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("poison"))
        .await
        .expect("sent");
    for attempt in 1..=3 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .expect("a delivery")
            .expect("open")
            .expect("ok");
        assert_eq!(d.broker_attempt(), Some(attempt));
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
    let mut moved = 0;
    for _ in 0..50 {
        moved = waiting(rabbit, &dead).await;
        if moved == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(moved, 1, "the broker dead-lettered it at the cap");
    drop(sub);
    // Found again as it was made, by another service.
    let again = support::broker(rabbit).await;
    let sub = again
        .subscribe(mounted(&queue, &dead))
        .await
        .expect("found");
    assert!(sub.capabilities.dead_letters);
    again.close().await;
    broker.close().await;
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

async fn an_existing_queue_is_checked_and_never_changed(rabbit: Rabbit) {
    let (classic, limited, dead) = (unique("hand"), unique("hand-q"), unique("hand-dead"));
    declare(
        rabbit,
        &[
            (dead.clone(), QueueSpec::classic()),
            (classic.clone(), QueueSpec::classic()),
            (limited.clone(), QueueSpec::self_dead_lettering(5, &dead)),
        ],
    );
    let before = listed(rabbit, &classic).expect("listed");
    let broker = broker(rabbit).await;
    let sub = broker
        .subscribe(mounted(&classic, &dead))
        .await
        .expect("an existing classic queue is taken as it is");
    assert!(!sub.capabilities.counts && !sub.capabilities.dead_letters);
    assert_eq!(listed(rabbit, &classic), Some(before), "unchanged");
    match broker.subscribe(mounted(&limited, &dead)).await {
        Err(SubscribeError::BadOption(why)) => {
            for says in [
                "x-delivery-limit 5, max_attempts(3) needs 2",
                "max_attempts(6) on the mount",
                &format!("rabbitmqctl delete_queue {limited}"),
            ] {
                assert!(why.contains(says), "{says}: {why}");
            }
        }
        other => panic!("a mismatch: {other:?}"),
    }
    let args = listed(rabbit, &limited).expect("listed");
    assert!(args.contains("5"), "unchanged: {args}");
    broker.close().await;
}

async fn declare_never_refuses_a_missing_queue(rabbit: Rabbit) {
    let queue = unique("never");
    let broker = broker(rabbit).await;
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.options
        .configure(Setting::new("declare", "never", "url"));
    match broker.subscribe(spec).await {
        Err(SubscribeError::BadAddress(why)) => {
            assert!(why.contains(&format!("no queue {queue}")), "{why}");
        }
        other => panic!("declared anyway: {other:?}"),
    }
    assert_eq!(listed(rabbit, &queue), None);
    broker.close().await;
}

/// Publishes to the dead letter as the runtime does: RabbitMQ must route it.
async fn routable(broker: &ruststream_lapin::LapinBroker, dead: &str) {
    broker
        .publisher()
        .publish(dead.into(), Message::new("dead letter"))
        .await
        .unwrap_or_else(|e| panic!("the dead letter {dead} is not routable: {e:?}"));
}

async fn the_dead_letter_queue_is_declared_for_an_existing_queue(rabbit: Rabbit) {
    let (queue, dead) = (unique("dlq-hand"), unique("dlq-hand-dead"));
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker(rabbit).await;
    broker
        .subscribe(mounted(&queue, &dead))
        .await
        .expect("subscribes");
    assert!(
        listed(rabbit, &dead).is_some(),
        "the dead-letter queue exists"
    );
    routable(&broker, &dead).await;
    broker.close().await;
    support::delete(rabbit, &dead).await;
}

async fn declare_classic_declares_the_dead_letter_queue_too(rabbit: Rabbit) {
    let (queue, dead) = (unique("dlq-classic"), unique("dlq-classic-dead"));
    let broker = broker(rabbit).await;
    let mut spec = mounted(&queue, &dead);
    spec.options
        .configure(Setting::new("declare", "classic", "url"));
    let sub = broker.subscribe(spec).await.expect("declared");
    assert!(!sub.capabilities.dead_letters, "the runtime dead-letters");
    let made = listed(rabbit, &queue).expect("the queue exists");
    assert!(made.contains("classic"), "{made}");
    let made_dead = listed(rabbit, &dead).expect("the dead-letter queue exists");
    assert!(
        made_dead.contains("classic"),
        "of the mount's type: {made_dead}"
    );
    routable(&broker, &dead).await;
    broker.close().await;
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

/// A service that mounts a handler on its own dead letters, both mounts declaring the
/// same type (`declare=quorum`, as a URL gives every mount): the dead-letter queue the
/// first mount made is the queue the second declares. When it was made classic
/// whatever the mount's type, the second mount was refused ("a classic queue, declared
/// quorum"). (With no `declare`: `tests/logs.rs`.)
async fn a_mount_on_the_dead_letters_finds_the_queue_as_it_would_make_it(rabbit: Rabbit) {
    let (queue, dead) = (unique("dlq-own"), unique("dlq-own-dead"));
    let broker = broker(rabbit).await;
    let declared = |mut spec: SubscribeSpec| {
        spec.options
            .configure(Setting::new("declare", "quorum", "url"));
        spec
    };
    let _orders = broker
        .subscribe(declared(mounted(&queue, &dead)))
        .await
        .expect("declared");
    let letters = broker
        .subscribe(declared(SubscribeSpec::new(dead.as_str())))
        .await
        .expect("the dead-letter queue is a quorum queue as the mount declares it");
    assert!(letters.capabilities.counts, "a quorum queue counts");
    broker.close().await;
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

async fn declare_never_refuses_a_missing_dead_letter_queue(rabbit: Rabbit) {
    let (queue, dead) = (unique("dlq-never"), unique("dlq-never-dead"));
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker(rabbit).await;
    let mut spec = mounted(&queue, &dead);
    spec.options
        .configure(Setting::new("declare", "never", "url"));
    match broker.subscribe(spec).await {
        Err(SubscribeError::BadAddress(why)) => {
            for says in [
                format!("no dead-letter queue {dead}"),
                format!("rabbitmqadmin declare queue name={dead}"),
            ] {
                assert!(why.contains(&says), "{says}: {why}");
            }
        }
        other => panic!("a missing dead letter: {other:?}"),
    }
    assert_eq!(listed(rabbit, &dead), None, "nothing declared");
    broker.close().await;
}

async fn a_missing_dead_letter_exchange_is_refused(rabbit: Rabbit) {
    let queue = unique("dlx-missing");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let exchange = unique("no-such-exchange");
    let broker = broker(rabbit).await;
    let dead = format!("/exchanges/{exchange}/k");
    match broker.subscribe(mounted(&queue, &dead)).await {
        Err(SubscribeError::BadAddress(why)) => {
            assert!(
                why.contains(&format!("no dead-letter exchange {exchange}")),
                "{why}"
            );
        }
        other => panic!("a missing dead-letter exchange: {other:?}"),
    }
    broker.close().await;
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
    a_missing_queue_is_declared_as_a_quorum_queue_by_default,
    an_existing_queue_is_checked_and_never_changed,
    declare_never_refuses_a_missing_queue,
    the_dead_letter_queue_is_declared_for_an_existing_queue,
    declare_classic_declares_the_dead_letter_queue_too,
    a_mount_on_the_dead_letters_finds_the_queue_as_it_would_make_it,
    declare_never_refuses_a_missing_dead_letter_queue,
    a_missing_dead_letter_exchange_is_refused
);
