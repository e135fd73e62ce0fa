//! The dead-letter tools' capability on RabbitMQ 3.10 and 4 over AMQP 0-9-1: a browse
//! of a classic queue leaves it as it was (same messages, same order, nothing
//! counted); removing takes exactly the ids asked for; what cannot be browsed safely
//! is refused by name.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{
    Broker, Inspect, InspectError, Message, REPLAYED_AT, Settlement, SubscribeSpec, Waiting,
};
use ruststream_lapin::LapinBroker;
use support::{QueueSpec, Rabbit, broker, declare, unique, waiting};

fn inspect(broker: &LapinBroker) -> &dyn Inspect {
    broker.inspect().expect("the lapin broker offers Inspect")
}

async fn publish(broker: &LapinBroker, queue: &str, messages: &[Message]) {
    for message in messages {
        broker
            .publisher()
            .publish(queue.into(), message.clone())
            .await
            .expect("confirmed");
    }
}

fn payloads(waiting: &[Waiting]) -> Vec<String> {
    waiting
        .iter()
        .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
        .collect()
}

fn dead(n: u32) -> Message {
    Message::new(format!("dead {n}"))
        .with_header("x-ruststream-dead-letter-from", "orders")
        .with_header("x-ruststream-dead-letter-reason", "retry")
}

async fn a_browse_leaves_the_queue_as_it_was(rabbit: Rabbit) {
    let queue = unique("browse");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker(rabbit).await;
    publish(&broker, &queue, &[dead(1), dead(2), dead(3)]).await;

    let all = inspect(&broker)
        .browse(&queue.as_str().into(), 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&all), ["dead 1", "dead 2", "dead 3"]);
    assert_eq!(
        all[1]
            .message
            .headers
            .get_str("x-ruststream-dead-letter-from"),
        Some("orders")
    );
    assert!(all.iter().all(|w| w.id.len() == 16 && w.defect.is_none()));
    let first = inspect(&broker)
        .browse(&queue.as_str().into(), 2)
        .await
        .expect("browse");
    assert_eq!(first, all[..2], "the same ids, in the same order");
    assert_eq!(waiting(rabbit, &queue).await, 3, "nothing consumed");

    // Consumed afterwards: the same order, each at its first attempt.
    let mut subscription = broker
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    for n in 1..=3 {
        let delivery = tokio::time::timeout(Duration::from_secs(5), subscription.deliveries.next())
            .await
            .expect("a delivery")
            .expect("open")
            .expect("ok");
        assert_eq!(delivery.payload().as_ref(), format!("dead {n}").as_bytes());
        assert_eq!(
            (delivery.broker_attempt(), delivery.redelivery_count()),
            (None, 1),
            "a browse is not an attempt"
        );
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    broker.close().await;
}

async fn remove_takes_exactly_the_ids_asked(rabbit: Rabbit) {
    let queue = unique("remove");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker(rabbit).await;
    publish(&broker, &queue, &[dead(1), dead(2), dead(2), dead(3)]).await;
    let address = queue.as_str().into();
    let all = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(all[1].id, all[2].id, "byte-identical messages share an id");

    // One message per id given; an id not there is skipped.
    let ids = [all[1].id.clone(), "0000000000000000".to_owned()];
    assert_eq!(inspect(&broker).remove(&address, &ids).await, Ok(1));
    let left = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&left), ["dead 1", "dead 2", "dead 3"]);
    let ids = [all[3].id.clone(), all[0].id.clone()];
    assert_eq!(inspect(&broker).remove(&address, &ids).await, Ok(2));
    assert_eq!(inspect(&broker).remove(&address, &ids).await, Ok(0));
    let left = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&left), ["dead 2"]);
    assert_eq!(waiting(rabbit, &queue).await, 1);
    broker.close().await;
}

/// A replay publishes the copy first and removes the original after: the copy (another
/// id: it carries the replay's time) stays, even in the same queue.
async fn a_replay_copy_survives_the_removal_of_its_original(rabbit: Rabbit) {
    let (queue, orders) = (unique("replay-dead"), unique("replay-orders"));
    declare(
        rabbit,
        &[
            (queue.clone(), QueueSpec::classic()),
            (orders.clone(), QueueSpec::classic()),
        ],
    );
    let broker = broker(rabbit).await;
    publish(&broker, &queue, &[dead(1), dead(2)]).await;
    let address = queue.as_str().into();
    let all = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    let copy = all[0].message.clone().with_header(REPLAYED_AT, "1");
    publish(&broker, &orders, std::slice::from_ref(&copy)).await;
    publish(&broker, &queue, &[copy]).await;
    assert_eq!(
        inspect(&broker)
            .remove(&address, &[all[0].id.clone()])
            .await,
        Ok(1)
    );
    let left = inspect(&broker)
        .browse(&address, 100)
        .await
        .expect("browse");
    assert_eq!(payloads(&left), ["dead 2", "dead 1"]);
    assert_eq!(left[1].message.headers.get_str(REPLAYED_AT), Some("1"));
    assert_eq!(waiting(rabbit, &orders).await, 1);
    broker.close().await;
}

async fn what_cannot_be_browsed_safely_is_refused(rabbit: Rabbit) {
    let quorum = unique("quorum");
    declare(rabbit, &[(quorum.clone(), QueueSpec::quorum())]);
    let broker = broker(rabbit).await;
    publish(&broker, &quorum, &[dead(1)]).await;
    let refused = |address: &str, says: &'static str| {
        let address = address.into();
        let broker = &broker;
        async move {
            match inspect(broker).browse(&address, 10).await {
                Err(InspectError::Unsupported { reason, .. }) => {
                    assert!(reason.contains(says), "{address}: {reason}");
                }
                other => panic!("{address}: {other:?}"),
            }
            match inspect(broker).remove(&address, &["x".to_owned()]).await {
                Err(InspectError::Unsupported { .. }) => {}
                other => panic!("{address}: {other:?}"),
            }
        }
    };
    refused(&quorum, "quorum queue").await;
    refused(&unique("missing"), "does not exist").await;
    refused("/exchanges/amq.direct/k", "only queues").await;
    // The quorum queue was not touched: its message is there, never delivered.
    assert_eq!(waiting(rabbit, &quorum).await, 1);
    broker.close().await;
}

#[tokio::test]
async fn a_browse_leaves_the_queue_as_it_was_v3() {
    a_browse_leaves_the_queue_as_it_was(Rabbit::V3).await;
}

#[tokio::test]
async fn a_browse_leaves_the_queue_as_it_was_v4() {
    a_browse_leaves_the_queue_as_it_was(Rabbit::V4).await;
}

#[tokio::test]
async fn remove_takes_exactly_the_ids_asked_v3() {
    remove_takes_exactly_the_ids_asked(Rabbit::V3).await;
}

#[tokio::test]
async fn remove_takes_exactly_the_ids_asked_v4() {
    remove_takes_exactly_the_ids_asked(Rabbit::V4).await;
}

#[tokio::test]
async fn a_replay_copy_survives_the_removal_of_its_original_v3() {
    a_replay_copy_survives_the_removal_of_its_original(Rabbit::V3).await;
}

#[tokio::test]
async fn a_replay_copy_survives_the_removal_of_its_original_v4() {
    a_replay_copy_survives_the_removal_of_its_original(Rabbit::V4).await;
}

#[tokio::test]
async fn what_cannot_be_browsed_safely_is_refused_v3() {
    what_cannot_be_browsed_safely_is_refused(Rabbit::V3).await;
}

#[tokio::test]
async fn what_cannot_be_browsed_safely_is_refused_v4() {
    what_cannot_be_browsed_safely_is_refused(Rabbit::V4).await;
}
