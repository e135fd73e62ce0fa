//! Dead-letter copies that cannot be published are owed: the runtime holds their
//! deliveries unsettled (their credit with them) and tries the copies again, without
//! running the handler again; once the dead letter is reachable every message gets
//! there, each handled once. Default options. Needs RabbitMQ 4 (`scripts/rabbitmq4.sh`).

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
async fn failed_copies_are_owed_and_every_message_reaches_the_dead_letter_once_handled() {
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
    // The first window's copies fail: the deliveries are held, with their credit, and
    // their handlers do not run again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while calls.load(Ordering::SeqCst) < DEFAULT_CREDIT {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} deliveries within 20 s",
            calls.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        DEFAULT_CREDIT,
        "a held delivery's handler ran again, or more came than the credit"
    );
    assert!(!app.readiness().is_ready(), "ready while copies fail");
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
    assert_eq!(
        calls.load(Ordering::SeqCst) as usize,
        n,
        "each handled once"
    );
    app.stop().await.expect("stop");
    drop(dead_sub);
    other.close().await;
    rabbitmq4(&["ctl", "-q", "delete_queue", &dead], None);
}
