//! Dead letters RabbitMQ moved itself (a quorum queue the adapter declared by default,
//! at its delivery limit) read as the runtime's in the dead-letter tools: where from,
//! why and how often (from RabbitMQ's `x-death` and `x-first-death-*` headers), and a
//! replay without `--to` goes back to the queue it came from.

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream::core::replayed;
use ruststream_core::{
    Address, Broker, DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON, Message, Settlement,
    SubscribeSpec, Waiting,
};
use support::{Rabbit, broker, unique, waiting};

async fn broker_moved_dead_letters_read_as_the_runtimes(rabbit: Rabbit) {
    let (queue, dead) = (unique("moved"), unique("moved-dead"));
    let broker = broker(rabbit).await;
    // Default options: the queue is declared, and dead-letters itself at the cap.
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.declaration.max_attempts = NonZeroU32::new(2);
    spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
    let mut sub = broker.subscribe(spec).await.expect("subscribes");
    assert!(sub.capabilities.dead_letters);
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("doomed"))
        .await
        .expect("sent");
    for _ in 0..2 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .expect("a delivery")
            .expect("open")
            .expect("ok");
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
    assert_eq!(moved, 1, "RabbitMQ moved it");

    let tools = broker.inspect().expect("Inspect");
    let address = Address::from(dead.as_str());
    let listed: Vec<Waiting> = tools.browse(&address, 10).await.expect("browse");
    assert_eq!(listed.len(), 1);
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
    // The same id a second time (browsing changed nothing).
    let again = tools.browse(&address, 10).await.expect("browse");
    assert_eq!(again[0].id, listed[0].id);

    // Replay as the command line does without --to: to the header's address.
    let to = h.get_str(DEAD_LETTER_FROM).expect("a source").to_owned();
    let copy = replayed(&listed[0].message, 1);
    assert_eq!(copy.headers.get_str("x-first-death-queue"), None);
    broker
        .publisher()
        .publish(to.as_str().into(), copy)
        .await
        .expect("replayed");
    assert_eq!(tools.remove(&address, &[listed[0].id.clone()]).await, Ok(1));
    let back = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("back in its queue")
        .expect("open")
        .expect("ok");
    assert_eq!(&back.payload()[..], b"doomed");
    assert_eq!(back.broker_attempt(), Some(1), "a fresh attempt");
    back.settle(Settlement::Accept).await.expect("acked");
    assert_eq!(waiting(rabbit, &dead).await, 0);
    drop(sub);
    broker.close().await;
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

#[tokio::test]
async fn broker_moved_dead_letters_read_as_the_runtimes_v3() {
    broker_moved_dead_letters_read_as_the_runtimes(Rabbit::V3).await;
}

#[tokio::test]
async fn broker_moved_dead_letters_read_as_the_runtimes_v4() {
    broker_moved_dead_letters_read_as_the_runtimes(Rabbit::V4).await;
}

/// A service with default options on a queue the adapter declares (it dead-letters
/// itself): a spent retry is rejected and RabbitMQ moves it; the service logs it as
/// dead-lettered by the broker, naming the dead letter, and counts it.
async fn a_broker_dead_letter_is_logged_and_counted(rabbit: Rabbit) {
    let logs = ruststream_conformance::logs::logs();
    let (queue, dead) = (unique("counted"), unique("counted-dead"));
    let metrics = ruststream::observe::Metrics::new();
    let running = ruststream::App::new(broker(rabbit).await)
        .metrics(&metrics)
        .mount(
            ruststream::Mount::new(queue.as_str())
                .max_attempts(2)
                .dead_letter(dead.as_str()),
            |_: String| async { ruststream::retry() },
        )
        .start()
        .await
        .expect("starts");
    running
        .publisher()
        .publish(queue.as_str(), &"doomed")
        .await
        .expect("sent");
    let moved = support::until(Duration::from_secs(20), || {
        logs.line_with(&["dead-lettered by the broker", &queue])
            .is_some()
    })
    .await;
    assert!(moved, "no log line: {}", logs.text());
    let line = logs
        .line_with(&["dead-lettered by the broker", &queue])
        .expect("the line");
    assert!(line.contains(&format!("dead_letter=\"{dead}\"")), "{line}");
    let mut arrived = 0;
    for _ in 0..100 {
        arrived = waiting(rabbit, &dead).await;
        if arrived == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(arrived, 1, "RabbitMQ moved it");
    let text = metrics.render();
    let series =
        format!("ruststream_broker_dead_letters_total{{messaging_destination_name=\"{queue}\"}} 1");
    assert!(text.contains(&series), "{text}");
    running.stop().await.expect("stops");
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

#[tokio::test]
async fn a_broker_dead_letter_is_logged_and_counted_v3() {
    a_broker_dead_letter_is_logged_and_counted(Rabbit::V3).await;
}

#[tokio::test]
async fn a_broker_dead_letter_is_logged_and_counted_v4() {
    a_broker_dead_letter_is_logged_and_counted(Rabbit::V4).await;
}
