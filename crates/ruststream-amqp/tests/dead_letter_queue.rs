//! A dead letter that names a missing queue would bring every message at the cap back
//! for ever (the copy is refused, the original handed back): where the mount declares
//! its queue the dead-letter queue is declared too, else start-up refuses with the fix.
//! Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use ruststream_amqp::SubscribeOptions;
use ruststream_core::{Address, Broker, Declaration, Message, Setting, SubscribeError};
use support::*;

fn topology(q: &mut Queues) {
    q.classic("orders");
}

/// `max_attempts(3)` and a dead letter `dead`.
fn capped(dead: &str) -> Declaration {
    Declaration {
        dead_letter: Some(Address::from(dead)),
        ..cap(3)
    }
}

fn exists(queue: &str) -> bool {
    rabbitmq4(
        &["ctl", "list_queues", "-q", "--no-table-headers", "name"],
        None,
    )
    .lines()
    .any(|line| line.trim() == queue)
}

#[tokio::test]
async fn a_missing_dead_letter_queue_is_refused_with_the_fix() {
    let queue = name(topology, "orders");
    let dead = unique("missing-dead");
    let broker = broker().await;
    match broker
        .subscribe(spec(&queue, SubscribeOptions::new(), capped(&dead)))
        .await
    {
        Err(SubscribeError::BadAddress(why)) => {
            for says in [
                format!("no dead-letter queue {dead}"),
                format!("rabbitmqadmin declare queue name={dead}"),
                "declare=classic".to_owned(),
            ] {
                assert!(why.contains(&says), "{says}: {why}");
            }
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("subscribed with a dead letter that cannot be published"),
    }
    assert!(!exists(&dead));
    broker.close().await;
}

#[tokio::test]
async fn declare_classic_declares_the_dead_letter_queue_too() {
    let (queue, dead) = (unique("made"), unique("made-dead"));
    let broker = broker().await;
    let mut declared = ruststream_core::SubscribeSpec::new(queue.as_str());
    declared
        .options
        .configure(Setting::new("declare", "classic", "url"));
    declared.declaration = capped(&dead);
    subscribe(&broker, declared).await;
    assert!(exists(&queue) && exists(&dead), "both declared");
    broker
        .publisher()
        .publish(dead.as_str().into(), Message::new("dead letter"))
        .await
        .expect("the dead letter is publishable");
    broker.close().await;
    rabbitmq4(&["ctl", "delete_queue", &queue], None);
    rabbitmq4(&["ctl", "delete_queue", &dead], None);
}

/// The `type` of `queue` as `rabbitmqctl` lists it.
fn kind(queue: &str) -> String {
    rabbitmq4(
        &[
            "ctl",
            "list_queues",
            "-q",
            "--no-table-headers",
            "name",
            "type",
        ],
        None,
    )
    .lines()
    .find_map(|line| {
        let (name, kind) = line.split_once('\t')?;
        (name.trim() == queue).then(|| kind.trim().to_owned())
    })
    .unwrap_or_else(|| panic!("no queue {queue}"))
}

/// A service that mounts a handler on its own dead letters, both mounts declaring
/// `quorum` (as a URL's `declare=quorum` gives every mount): the dead-letter queue the
/// first mount made is of the mount's type, so the second mount finds the queue it
/// declares. Made classic whatever the mount's type, the second mount was refused
/// ("a classic queue, declared quorum").
#[tokio::test]
async fn a_mount_on_the_dead_letters_finds_the_queue_as_it_would_make_it() {
    let (queue, dead) = (unique("own"), unique("own-dead"));
    let broker = broker().await;
    let declared = |address: &str, declaration: Declaration| {
        let mut spec = ruststream_core::SubscribeSpec::new(address);
        spec.options
            .configure(Setting::new("declare", "quorum", "url"));
        spec.declaration = declaration;
        spec
    };
    let _orders = subscribe(&broker, declared(&queue, capped(&dead))).await;
    assert_eq!(kind(&dead), "quorum", "of the mount's type");
    let letters = broker
        .subscribe(declared(&dead, Declaration::default()))
        .await
        .expect("the dead-letter queue is as the mount declares it");
    assert!(letters.capabilities.counts, "a quorum queue counts");
    broker.close().await;
    rabbitmq4(&["ctl", "delete_queue", &queue], None);
    rabbitmq4(&["ctl", "delete_queue", &dead], None);
}
