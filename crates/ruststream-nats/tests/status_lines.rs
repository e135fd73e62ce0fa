//! A stored message whose header block begins with a status line (`NATS/1.0 409 …`, as
//! the server's own status messages do; any client can publish one with a raw `HPUB`)
//! is a stored message: it has an acknowledgement subject. It is handed over with a
//! defect, the decode-failure policy settles it, and the subscription goes on. Before,
//! async-nats's pull stream took it for the server's word: `409 Consumer Deleted` ended
//! the subscription for good, `100`, `404`, `408` and `503` were swallowed (or an
//! error) and the message came back after every `ack_wait`, never handled.
//!
//! A server that stores such a message without its header block (nats-server 2.15;
//! `support::keeps_status_lines` asks) makes it an ordinary message: then it is handed
//! over as one, without a defect and without headers, and handled like the rest.
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::Duration;

use async_nats::jetstream;
use ruststream::{App, Attempt, Mount, Policy, ack};
use ruststream_conformance::logs::logs;
use ruststream_core::{Message, Settlement};
use ruststream_nats::JetStream;
use serde::Deserialize;
use support::{broker, next, publish, raw_hpub, subscribe, try_next, unique};

/// The status lines the server itself sends on a pull inbox.
const STATUS_LINES: &[&[u8]] = &[
    b"NATS/1.0 100 Idle Heartbeat\r\n\r\n",
    b"NATS/1.0 404 No Messages\r\n\r\n",
    b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\n\r\n",
    b"NATS/1.0 409 Consumer Deleted\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
];

const WAIT: Duration = Duration::from_secs(10);

/// Streams this binary made are named after its subjects.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

fn code(line: &[u8]) -> String {
    String::from_utf8_lossy(&line[9..12]).into_owned()
}

/// On the subscription: the hostile message comes once, with a defect naming the
/// status line and its stream sequence; the three good ones behind it come; settled,
/// nothing comes again, and a message published after them comes too.
#[tokio::test]
async fn a_stored_status_line_is_a_delivery_with_a_defect() {
    let broker = broker().await;
    let kept = support::keeps_status_lines().await;
    for line in STATUS_LINES {
        let code = code(line);
        let subject = unique(&format!("status{code}"));
        let _cleanup = Cleanup(subject.clone());
        let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
        raw_hpub(&subject, line, b"hostile");
        for n in 0..3 {
            publish(&broker, &subject, Message::new(format!("good {n}"))).await;
        }
        let (mut good, mut defects, mut ordinary) = (0, Vec::new(), 0);
        while good + defects.len() + ordinary < 4 {
            let Some(delivery) = try_next(&mut sub, WAIT).await else {
                panic!("{code}: only {good} good and {defects:?} within {WAIT:?}");
            };
            match delivery.defect() {
                Some(defect) => {
                    assert_eq!(delivery.payload().as_ref(), b"hostile", "{code}");
                    defects.push(defect.to_owned());
                    delivery.settle(Settlement::Reject).await.expect("dropped");
                }
                None if delivery.payload().as_ref() == b"hostile" => {
                    assert!(!kept, "{code}: kept by the server, yet no defect");
                    // Stored without its status line (the headers after it, if any,
                    // are kept: `408`'s `Nats-Pending-Messages`).
                    ordinary += 1;
                    delivery.settle(Settlement::Accept).await.expect("acked");
                }
                None => {
                    assert!(delivery.payload().starts_with(b"good"), "{code}");
                    good += 1;
                    delivery.settle(Settlement::Accept).await.expect("acked");
                }
            }
        }
        if kept {
            assert_eq!(defects.len(), 1, "{code}: {defects:?}");
            assert!(
                defects[0].contains(&format!("NATS/1.0 {code}"))
                    && defects[0].contains("message 1"),
                "{code}: {defects:?}"
            );
        } else {
            assert_eq!((defects.len(), ordinary), (0, 1), "{code}: {defects:?}");
        }
        publish(&broker, &subject, Message::new("after")).await;
        let after = next(&mut sub, WAIT).await;
        assert_eq!(after.payload().as_ref(), b"after", "{code}: still running");
        after.settle(Settlement::Accept).await.expect("acked");
        assert!(
            try_next(&mut sub, Duration::from_secs(1)).await.is_none(),
            "{code}: nothing again"
        );
    }
}

#[derive(Deserialize)]
struct Job {
    n: u64,
}

/// What a service's handler saw: the job's number and its attempt.
type Seen = tokio::sync::mpsc::UnboundedReceiver<(u64, u32)>;

async fn service(
    broker: &ruststream_nats::NatsBroker,
    mount: Mount,
) -> (ruststream::Running, Seen) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |Attempt(attempt): Attempt, job: Job| {
        let _ = tx.send((job.n, attempt));
        async move { ack() }
    };
    let running = App::new(broker.clone())
        .mount(mount, handler)
        .start()
        .await
        .expect("the service starts");
    (running, rx)
}

async fn until(rx: &mut Seen, n: u64) -> Vec<(u64, u32)> {
    ruststream_conformance::logs::until(rx, Duration::from_secs(20), |seen| seen.0 == n).await
}

/// The messages of the stream that holds `subject`.
async fn stored(subject: &str) -> u64 {
    let js = jetstream::new(support::client().await);
    let mut stream = js
        .get_stream(subject.replace('.', "_"))
        .await
        .expect("the stream");
    stream.info().await.expect("info").state.messages
}

/// A service with default options and a dead letter: the three good jobs behind the
/// hostile one are handled, the hostile one never reaches the handler (the default
/// decode policy drops it, logged with its stream sequence) and nothing is left
/// unacknowledged; a job published after is handled too.
#[tokio::test]
async fn a_service_goes_on_past_a_stored_status_line() {
    let lines = logs();
    let kept = support::keeps_status_lines().await;
    for line in STATUS_LINES {
        // A stopped service closes its broker.
        let broker = broker().await;
        let code = code(line);
        let subject = unique(&format!("svc{code}"));
        let dead = format!("{subject}.dead");
        let _cleanup = Cleanup(subject.clone());
        drop(subscribe::<JetStream>(&broker, &dead, None).await);
        let mount = Mount::new(subject.as_str())
            .max_attempts(5)
            .dead_letter(dead.as_str());
        let (running, mut rx) = service(&broker, mount).await;
        raw_hpub(&subject, line, b"{\"n\":99}");
        for n in 1..=3 {
            publish(&broker, &subject, Message::new(format!("{{\"n\":{n}}}"))).await;
        }
        let mut seen = until(&mut rx, 3).await;
        publish(&broker, &subject, Message::new("{\"n\":4}")).await;
        seen.extend(until(&mut rx, 4).await);
        if kept {
            assert_eq!(seen, [(1, 1), (2, 1), (3, 1), (4, 1)], "{code}: handled");
        } else {
            // Stored as an ordinary message: the handler has it too.
            assert_eq!(
                seen,
                [(99, 1), (1, 1), (2, 1), (3, 1), (4, 1)],
                "{code}: handled"
            );
        }
        let consumer = format!("ruststream-{}", subject.replace('.', "_"));
        let js = jetstream::new(support::client().await);
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let stream = js
                .get_stream(subject.replace('.', "_"))
                .await
                .expect("stream");
            let info = stream.consumer_info(&consumer).await.expect("consumer");
            if info.num_ack_pending == 0 && info.num_pending == 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{code}: left unacknowledged: {info:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let logged = lines.line_with(&["status line", &subject.replace('.', "_"), "seq=1"]);
        assert_eq!(
            logged.is_some(),
            kept,
            "{code}: logged with its stream sequence"
        );
        assert_eq!(stored(&dead).await, 0, "{code}: dropped, not dead-lettered");
        assert!(
            tokio::time::timeout(Duration::from_secs(1), rx.recv())
                .await
                .is_err(),
            "{code}: nothing more handled"
        );
        running.stop().await.expect("stops");
    }
}

/// The same with `on_decode_error(Policy::Retry)` and `max_attempts(2)`: the hostile
/// message is retried once (attempt 2 also has the defect) and then dead-lettered.
#[tokio::test]
async fn on_decode_error_retry_dead_letters_a_stored_status_line() {
    let broker = broker().await;
    let kept = support::keeps_status_lines().await;
    let subject = unique("svcretry");
    let dead = format!("{subject}.dead");
    let _cleanup = Cleanup(subject.clone());
    drop(subscribe::<JetStream>(&broker, &dead, None).await);
    let mount = Mount::new(subject.as_str())
        .max_attempts(2)
        .dead_letter(dead.as_str())
        .on_decode_error(Policy::Retry);
    let (running, mut rx) = service(&broker, mount).await;
    raw_hpub(
        &subject,
        b"NATS/1.0 409 Consumer Deleted\r\n\r\n",
        b"{\"n\":99}",
    );
    for n in 1..=3 {
        publish(&broker, &subject, Message::new(format!("{{\"n\":{n}}}"))).await;
    }
    let seen = until(&mut rx, 3).await;
    if !kept {
        // Stored as an ordinary message: handled, nothing to dead-letter.
        assert_eq!(seen, [(99, 1), (1, 1), (2, 1), (3, 1)]);
        assert_eq!(stored(&dead).await, 0);
        running.stop().await.expect("stops");
        return;
    }
    assert_eq!(seen, [(1, 1), (2, 1), (3, 1)]);
    let deadline = tokio::time::Instant::now() + WAIT;
    while stored(&dead).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never dead-lettered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored(&dead).await, 1);
    running.stop().await.expect("stops");
}
