//! What the adapter finds out about a queue at subscribe, with default options, and
//! declaring queues. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use ruststream_amqp::{QueueOptions, QueueType, SubscribeOptions};
use ruststream_core::{Address, Broker, Declaration, SubscribeError};
use support::*;

fn topology(q: &mut Queues) {
    q.classic("classic");
    q.quorum("quorum");
    q.quorum_with_dlx("selfdl", Some(2));
    q.queue("limited", "quorum", r#", "x-delivery-limit": 2"#);
}

fn q(role: &str) -> String {
    name(topology, role)
}

fn defaults(queue: &str, declaration: Declaration) -> ruststream_core::SubscribeSpec {
    spec(queue, SubscribeOptions::new(), declaration)
}

#[tokio::test]
async fn a_classic_queue_does_not_count() {
    let broker = broker().await;
    let sub = subscribe(&broker, defaults(&q("classic"), Declaration::default())).await;
    let c = sub.capabilities;
    assert!(c.settles && c.requeues, "{c:?}");
    assert!(
        !c.counts,
        "RabbitMQ 4 classic queues do not count modified: {c:?}"
    );
    assert!(!c.dead_letters, "{c:?}");
    broker.close().await;
}

#[tokio::test]
async fn a_quorum_queue_counts() {
    let broker = broker().await;
    let sub = subscribe(&broker, defaults(&q("quorum"), Declaration::default())).await;
    let c = sub.capabilities;
    assert!(c.settles && c.requeues && c.counts, "{c:?}");
    assert!(
        !c.dead_letters,
        "no delivery limit, no dead-letter exchange: {c:?}"
    );
    broker.close().await;
}

#[tokio::test]
async fn a_quorum_queue_with_a_limit_and_a_dlx_dead_letters_itself() {
    let broker = broker().await;
    let sub = subscribe(&broker, defaults(&q("selfdl"), Declaration::default())).await;
    let c = sub.capabilities;
    assert!(c.counts && c.dead_letters, "{c:?}");
    broker.close().await;
}

fn capped(n: u32, dead: Option<&str>) -> Declaration {
    Declaration {
        dead_letter: dead.map(Address::from),
        ..cap(n)
    }
}

async fn refused(spec: ruststream_core::SubscribeSpec) -> String {
    let broker = broker().await;
    let result = broker.subscribe(spec).await;
    broker.close().await;
    match result {
        Err(SubscribeError::BadOption(why)) => why,
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(sub) => panic!("subscribed: {:?}", sub.capabilities),
    }
}

#[tokio::test]
async fn a_delivery_limit_that_differs_from_the_cap_is_refused() {
    let (queue, dead) = (q("selfdl"), q("selfdl-dead"));
    // The queue dead-letters after 3 deliveries; the mount wants 5.
    let why = refused(defaults(&queue, capped(5, Some(&dead)))).await;
    assert!(
        why.contains(&queue) && why.contains("x-delivery-limit 2"),
        "{why}"
    );
    assert!(why.contains("max_attempts(5) needs 4"), "{why}");
}

#[tokio::test]
async fn a_limit_that_cuts_the_cap_short_is_refused() {
    // No dead-letter exchange: the broker would drop the message after 3 deliveries.
    let queue = q("limited");
    let why = refused(defaults(&queue, cap(5))).await;
    assert!(why.contains("x-delivery-limit 2"), "{why}");
    // A cap the limit does not cut short is fine.
    let broker = broker().await;
    let sub = subscribe(&broker, defaults(&queue, cap(3))).await;
    assert!(sub.capabilities.counts && !sub.capabilities.dead_letters);
    broker.close().await;
}

#[tokio::test]
async fn a_dead_letter_target_that_differs_is_refused() {
    let queue = q("selfdl");
    let elsewhere = q("classic");
    let why = refused(defaults(&queue, capped(3, Some(&elsewhere)))).await;
    assert!(why.contains(&queue) && why.contains(&elsewhere), "{why}");
    // The right one is accepted (its exchange is bound to it).
    let broker = broker().await;
    let sub = subscribe(
        &broker,
        defaults(&queue, capped(3, Some(&q("selfdl-dead")))),
    )
    .await;
    assert!(sub.capabilities.dead_letters);
    broker.close().await;
}

#[tokio::test]
async fn declaring_another_type_than_the_queue_has_is_refused() {
    let queue = q("classic");
    let options = SubscribeOptions::new().declare(QueueType::Quorum);
    let why = refused(spec(&queue, options, Declaration::default())).await;
    assert!(why.contains("is a classic queue, declared quorum"), "{why}");
}

/// `rabbitmqctl list_queues`' line of `queue`: its name, type and arguments.
fn listed(queue: &str) -> String {
    let all = rabbitmq4(
        &["ctl", "-q", "list_queues", "name", "type", "arguments"],
        None,
    );
    all.lines()
        .find(|l| l.starts_with(queue))
        .unwrap_or_else(|| panic!("{queue} not declared: {all}"))
        .to_owned()
}

#[tokio::test]
async fn declare_makes_the_queue_with_the_arguments() {
    let queue = unique("made");
    let dead = q("classic");
    let broker = broker().await;
    let options = SubscribeOptions::new().declare(QueueType::Quorum);
    let sub = subscribe(&broker, spec(&queue, options, capped(4, Some(&dead)))).await;
    assert!(sub.capabilities.counts && sub.capabilities.dead_letters);
    let line = listed(&queue);
    assert!(line.contains("quorum"), "{line}");
    assert!(
        line.contains("{\"x-delivery-limit\",long,3}") || line.contains("x-delivery-limit\",3"),
        "{line}"
    );
    assert!(line.contains(&dead), "{line}");
    drop(sub);
    // Declaring again is a no-op; a queue that is there already agrees.
    let options = SubscribeOptions::new().declare(QueueType::Quorum);
    let again = subscribe(&broker, spec(&queue, options, capped(4, Some(&dead)))).await;
    assert!(again.capabilities.dead_letters);
    broker.close().await;
    rabbitmq4(&["ctl", "-q", "delete_queue", &queue], None);
}

/// A classic queue the mount declares gets no dead-letter exchange: the runtime
/// dead-letters for it, and an exchange would also take the originals it rejects (of
/// every `retry_after` copy, of `drop()`).
#[tokio::test]
async fn a_declared_classic_queue_has_no_dead_letter_exchange() {
    let queue = unique("made-classic");
    let dead = q("classic");
    let broker = broker().await;
    let options = SubscribeOptions::new().declare(QueueType::Classic);
    let sub = subscribe(&broker, spec(&queue, options, capped(4, Some(&dead)))).await;
    assert!(!sub.capabilities.counts && !sub.capabilities.dead_letters);
    let line = listed(&queue);
    assert!(line.contains("classic"), "{line}");
    assert!(!line.contains("x-dead-letter"), "{line}");
    drop(sub);
    // Declaring again agrees with the queue that is there.
    let options = SubscribeOptions::new().declare(QueueType::Classic);
    let again = subscribe(&broker, spec(&queue, options, capped(4, Some(&dead)))).await;
    assert!(!again.capabilities.dead_letters);
    broker.close().await;
    rabbitmq4(&["ctl", "-q", "delete_queue", &queue], None);
}

#[tokio::test]
async fn a_missing_queue_is_named() {
    let queue = unique("missing");
    let broker = broker().await;
    let result = broker
        .subscribe(defaults(&queue, Declaration::default()))
        .await;
    match result {
        Err(SubscribeError::BadAddress(why)) => assert!(why.contains(&queue), "{why}"),
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("subscribed to a missing queue"),
    }
    broker.close().await;
}

#[tokio::test]
async fn a_stream_neither_counts_nor_requeues() {
    // Declared by the adapter (a stream takes no x-expires, so not in the topology).
    let stream = unique("stream");
    let broker = broker().await;
    let options = SubscribeOptions::new().declare(QueueType::Stream);
    let sub = subscribe(&broker, spec(&stream, options, Declaration::default())).await;
    let c = sub.capabilities;
    assert!(
        c.settles && !c.requeues && !c.counts && !c.dead_letters,
        "{c:?}"
    );
    drop(sub);
    broker.close().await;
    rabbitmq4(&["ctl", "-q", "delete_queue", &stream], None);
}

#[tokio::test]
async fn options_set_by_the_user_win_over_what_was_found() {
    let broker = broker().await;
    let forced = SubscribeOptions::new().queue(QueueOptions::new().counts(true).dead_letters(true));
    let sub = subscribe(&broker, spec(&q("classic"), forced, Declaration::default())).await;
    assert!(sub.capabilities.counts && sub.capabilities.dead_letters);
    let forced =
        SubscribeOptions::new().queue(QueueOptions::new().counts(false).dead_letters(false));
    let sub = subscribe(&broker, spec(&q("selfdl"), forced, Declaration::default())).await;
    assert!(!sub.capabilities.counts && !sub.capabilities.dead_letters);
    broker.close().await;
}
