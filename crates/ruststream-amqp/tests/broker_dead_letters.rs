//! Dead letters RabbitMQ moved itself (a quorum queue at its delivery limit) read as the
//! runtime's in the dead-letter tools: where from, why, when and how often, from
//! RabbitMQ 4's message annotations (`x-opt-deaths`, `x-last-death-*`); a replay to the
//! queue they name gets there. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use ruststream_amqp::SubscribeOptions;
use ruststream_core::{
    Broker, DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON, Declaration, Message, Settlement,
};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum_with_dlx("moved", Some(1));
}

#[tokio::test]
async fn broker_moved_dead_letters_read_as_the_runtimes() {
    let queue = name(topology, "moved");
    let dead = name(topology, "moved-dead");
    let broker = broker().await;
    let mut sub = subscribe(
        &broker,
        spec(&queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("doomed"))
        .await
        .expect("sent");
    for _ in 0..2 {
        let d = next(&mut sub, 10).await;
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
    let tools = broker.inspect().expect("Inspect");
    let address = dead.as_str().into();
    let mut listed = Vec::new();
    for _ in 0..50 {
        listed = tools.browse(&address, 10).await.expect("browse");
        if !listed.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(listed.len(), 1, "RabbitMQ moved it");
    let h = &listed[0].message.headers;
    assert_eq!(h.get_str(DEAD_LETTER_FROM), Some(queue.as_str()));
    assert_eq!(h.get_str(DEAD_LETTER_REASON), Some("delivery_limit"));
    assert_eq!(h.get_str("x-ruststream-dead-letter-count"), Some("1"));
    let at: u64 = h
        .get_str(DEAD_LETTER_AT)
        .expect("when")
        .parse()
        .expect("ms");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_millis() as u64;
    assert!(at <= now && now - at < 60_000, "at {at}, now {now}");
    let again = tools.browse(&address, 10).await.expect("browse");
    assert_eq!(again[0].id, listed[0].id, "the id does not change");
    // Back to where it came from, as a replay without --to does.
    let to = h.get_str(DEAD_LETTER_FROM).expect("a source").to_owned();
    broker
        .publisher()
        .publish(to.as_str().into(), Message::new("doomed"))
        .await
        .expect("replayed");
    assert_eq!(tools.remove(&address, &[listed[0].id.clone()]).await, Ok(1));
    let back = next(&mut sub, 10).await;
    assert_eq!(&back.payload()[..], b"doomed");
    back.settle(Settlement::Accept).await.expect("accepted");
    broker.close().await;
}
