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
