//! A stop counts a delivery once at most (issue 17, item 6): under `max_attempts(3)` with
//! a dead letter, service A's handler panics once (the default `fail_fast` stops it),
//! then service B always retries. A spent one attempt, so B sees attempts 2 and 3, then
//! the message is dead-lettered: three handler runs in all. Before, A's give-back went
//! out while its consumer still pulled, the server delivered the message into the
//! stopping service again and counted it, and B's first call already saw attempt 3.
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::Duration;

use ruststream::{App, Attempt, Mount, retry};
use ruststream_core::Message;
use support::{broker, publish, unique};

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

fn mount(subject: &str) -> Mount {
    Mount::new(subject)
        .max_attempts(3)
        .dead_letter(format!("{subject}.dead").as_str())
}

#[tokio::test]
async fn a_fail_fast_stop_counts_the_delivery_once() {
    let subject = unique("failfast");
    let _cleanup = Cleanup(subject.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(char, u32)>();

    let broker = broker().await;
    let a = tx.clone();
    let panics = move |Attempt(attempt): Attempt| {
        let _ = a.send(('a', attempt));
        async move {
            panic!("service A fails once");
            #[allow(unreachable_code)]
            retry()
        }
    };
    let running = App::new(broker.clone())
        .mount(mount(&subject), panics)
        .start()
        .await
        .expect("service A starts");
    publish(&broker, &subject, Message::new("order")).await;
    tokio::time::timeout(Duration::from_secs(10), running.stopping())
        .await
        .expect("fail_fast stops service A");
    assert!(running.stop().await.is_err(), "A's run ends with the panic");

    let broker = support::broker().await;
    let b = tx.clone();
    let retries = move |Attempt(attempt): Attempt| {
        let _ = b.send(('b', attempt));
        async move { retry() }
    };
    let running = App::new(broker.clone())
        .mount(mount(&subject), retries)
        .start()
        .await
        .expect("service B starts");
    let mut seen = Vec::new();
    while let Ok(Some(call)) = tokio::time::timeout(Duration::from_secs(40), rx.recv()).await {
        seen.push(call);
        if seen.len() >= 3 {
            // Anything more would be a fourth run.
            if let Ok(Some(more)) = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await {
                seen.push(more);
            }
            break;
        }
    }
    assert_eq!(
        seen,
        [('a', 1), ('b', 2), ('b', 3)],
        "each attempt counted once"
    );
    running.stop().await.expect("stops");
}
