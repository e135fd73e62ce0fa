//! Deliveries the runtime cannot finish with are given back (`released`) and their
//! credit comes back: more failed dead-letter copies than the link credit do not stop
//! the subscription. Default options. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ruststream::{App, Mount, Outcome, retry};
use ruststream_amqp::{DEFAULT_CREDIT, QueueType, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.classic("stuck");
}

#[tokio::test]
async fn failed_copies_give_their_deliveries_back_and_the_credit_with_them() {
    let queue = name(topology, "stuck");
    // The dead letter reaches no queue yet: every copy to it fails. (A dead letter that
    // names a missing queue is refused at start-up; one through an exchange is not.)
    let dead = unique("dead-later");
    let dead_letter = format!("/exchanges/amq.direct/{dead}");
    let n = DEFAULT_CREDIT as usize + 44;
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let handler = move |_n: u32| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            let out: Outcome = retry();
            out
        }
    };
    let app = App::new(broker().await)
        .mount(
            Mount::new(queue.as_str())
                .max_attempts(1)
                .dead_letter(dead_letter.as_str()),
            handler,
        )
        .start()
        .await
        .expect("start");
    let other = broker().await;
    let publisher = other.publisher();
    for i in 0..n {
        publisher
            .publish(
                queue.as_str().into(),
                ruststream_core::Message::new(i.to_string()),
            )
            .await
            .expect("publish");
    }
    // Every delivery of the first window fails its copy and is handed back.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while calls.load(Ordering::SeqCst) < DEFAULT_CREDIT + 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the subscription stopped after {} deliveries (credit held by abandoned ones)",
            calls.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Now the dead letter reaches a queue: every message gets there, none is lost.
    let definitions = format!(
        r#"{{"queues": [{{"name": "{dead}", "vhost": "/", "durable": true,
             "auto_delete": false, "arguments": {{"x-queue-type": "classic"}}}}],
           "bindings": [{{"source": "amq.direct", "vhost": "/", "destination": "{dead}",
             "destination_type": "queue", "routing_key": "{dead}", "arguments": {{}}}}]}}"#
    );
    rabbitmq4(
        &["ctl", "-q", "import_definitions", "--format", "json"],
        Some(definitions),
    );
    let mut dead_sub = subscribe(
        &other,
        spec(
            &dead,
            SubscribeOptions::new().declare(QueueType::Classic),
            Declaration::default(),
        ),
    )
    .await;
    let mut got = std::collections::HashSet::new();
    while got.len() < n {
        let d = next(&mut dead_sub, 30).await;
        got.insert(String::from_utf8_lossy(d.payload()).into_owned());
        d.settle(Settlement::Accept).await.expect("accept");
    }
    assert_eq!(got.len(), n, "every message reached the dead letter");
    app.stop().await.expect("stop");
    drop(dead_sub);
    other.close().await;
    rabbitmq4(&["ctl", "-q", "delete_queue", &dead], None);
}
