//! Browsing a queue and removing single messages (`Broker::inspect`, the dead-letter
//! tools) on RabbitMQ 4: receive and release leaves the queue as it was, uncounted.

mod support;

use ruststream_amqp::SubscribeOptions;
use ruststream_core::{Address, Broker, Declaration, InspectError, Settlement};
use support::{Queues, broker, name, next, nothing_for, publish_n, rabbitmq4, spec, subscribe};

fn topology(q: &mut Queues) {
    q.quorum("quorum");
    q.quorum("quorum-order");
    q.classic("classic");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Waits (up to 15 s: a quorum queue's figures are emitted every few seconds) until
/// rabbitmqctl reports `expected` messages (ready + unacknowledged) in `queue`.
fn settles_at(queue: &str, expected: u64) {
    let mut last = 0;
    for _ in 0..60 {
        last = messages(queue);
        if last == expected {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("queue {queue} holds {last} messages, not {expected}");
}

/// The queue's `messages` (ready + unacknowledged) as rabbitmqctl reports it.
fn messages(queue: &str) -> u64 {
    let listed = rabbitmq4(&["ctl", "-q", "list_queues", "name", "messages"], None);
    listed
        .lines()
        .find_map(|line| {
            let (n, count) = line.split_once('\t')?;
            (n == queue).then(|| count.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("queue {queue} not listed: {listed}"))
}

async fn browse_then_remove(role: &str) {
    let queue = q(role);
    let broker = broker().await;
    publish_n(&broker, &queue, 3, "m").await;
    let inspect = broker.inspect().expect("amqp inspects");
    let address = Address::from(queue.as_str());
    let texts = |w: &[ruststream_core::Waiting]| -> Vec<String> {
        w.iter()
            .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
            .collect()
    };
    settles_at(&queue, 3);
    let seen = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(texts(&seen), ["m-0", "m-1", "m-2"]);
    let again = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(
        seen.iter().map(|w| &w.id).collect::<Vec<_>>(),
        again.iter().map(|w| &w.id).collect::<Vec<_>>(),
        "ids are stable and the order kept"
    );
    assert_eq!(
        texts(&inspect.browse(&address, 2).await.expect("browse")),
        ["m-0", "m-1"]
    );
    settles_at(&queue, 3); // browsing removes nothing

    let ids = [seen[1].id.clone(), "0000000000000000".into()];
    assert_eq!(inspect.remove(&address, &ids).await.expect("remove"), 1);
    settles_at(&queue, 2);

    // What is left comes in order, and browsing it four times did not count: attempt 1.
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    for expected in ["m-0", "m-2"] {
        let delivery = next(&mut sub, 10).await;
        assert_eq!(&delivery.payload()[..], expected.as_bytes());
        if role == "quorum" {
            assert_eq!(
                delivery.broker_attempt(),
                Some(1),
                "{expected}: not counted"
            );
        }
        delivery.settle(Settlement::Accept).await.expect("accept");
    }
    nothing_for(&mut sub, 300).await;
    drop(sub);
    broker.close().await;
}

#[tokio::test]
async fn a_quorum_queue_is_browsed_without_counting_and_one_message_removed() {
    browse_then_remove("quorum").await;
}

#[tokio::test]
async fn a_classic_queue_is_browsed_in_order_and_one_message_removed() {
    browse_then_remove("classic").await;
}

/// A quorum queue puts a released message at its back: a browse of the first two must
/// still leave all five in order, and so must removing the last, then the second.
#[tokio::test]
async fn a_partial_browse_of_a_quorum_queue_leaves_its_order() {
    let queue = q("quorum-order");
    let broker = broker().await;
    publish_n(&broker, &queue, 5, "m").await;
    let inspect = broker.inspect().expect("amqp inspects");
    let address = Address::from(queue.as_str());
    let texts = |w: Vec<ruststream_core::Waiting>| -> Vec<String> {
        w.iter()
            .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
            .collect()
    };
    let all = inspect.browse(&address, 10).await.expect("browse");
    let ids: Vec<String> = all.iter().map(|w| w.id.clone()).collect();
    assert_eq!(texts(all), ["m-0", "m-1", "m-2", "m-3", "m-4"]);
    assert_eq!(
        texts(inspect.browse(&address, 2).await.expect("browse")),
        ["m-0", "m-1"]
    );
    assert_eq!(
        texts(inspect.browse(&address, 10).await.expect("browse")),
        ["m-0", "m-1", "m-2", "m-3", "m-4"]
    );
    assert_eq!(
        inspect.remove(&address, &ids[4..]).await.expect("remove"),
        1
    );
    assert_eq!(
        inspect.remove(&address, &ids[1..2]).await.expect("remove"),
        1
    );
    assert_eq!(
        texts(inspect.browse(&address, 10).await.expect("browse")),
        ["m-0", "m-2", "m-3"]
    );
    broker.close().await;
}

#[tokio::test]
async fn exchanges_and_missing_queues_are_refused_by_name() {
    let broker = broker().await;
    let inspect = broker.inspect().expect("amqp inspects");
    let error = inspect
        .browse(&"/exchanges/amq.direct/k".into(), 5)
        .await
        .expect_err("an exchange");
    assert!(matches!(error, InspectError::Unsupported { .. }), "{error}");
    let missing = support::unique("missing");
    let error = inspect
        .browse(&missing.as_str().into(), 5)
        .await
        .expect_err("no queue");
    assert!(error.to_string().contains("does not exist"), "{error}");
    broker.close().await;
}
