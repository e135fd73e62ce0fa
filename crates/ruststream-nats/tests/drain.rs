//! A clean stop spends no attempt: a JetStream subscription accepts the drain of a
//! graceful stop, sends no further pull request once it is requested, and ends its
//! stream after yielding every message it had received and those its outstanding pull
//! request still brought, so that they are handled and acknowledged instead of given
//! back (a `-NAK`, or a message left unacknowledged, is counted by JetStream).
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures_util::StreamExt;
use ruststream_core::{Broker, Drain, Message, Settlement, SubscribeSpec, Subscription};
use support::{broker, next, publish, try_next, unique};

const WAIT: Duration = Duration::from_secs(10);

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

async fn subscribe(broker: &ruststream_nats::NatsBroker, subject: &str) -> (Subscription, Drain) {
    let mut spec = SubscribeSpec::new(subject);
    spec.in_flight = 8;
    let drain = spec.drain.clone();
    let subscription = broker.subscribe(spec).await.expect("subscribe");
    assert!(drain.is_accepted(), "the JetStream form drains");
    (subscription, drain)
}

async fn consumer_info(subject: &str) -> jetstream::consumer::Info {
    let js = jetstream::new(support::client().await);
    let stream = js
        .get_stream(subject.replace('.', "_"))
        .await
        .expect("the stream");
    stream
        .consumer_info(format!("ruststream-{}", subject.replace('.', "_")))
        .await
        .expect("the consumer")
}

/// The consumer's info once it has no acknowledgement pending (a plain acknowledgement
/// reaches the server after its settlement resolved), within the wait.
async fn settled_info(subject: &str) -> jetstream::consumer::Info {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let info = consumer_info(subject).await;
        if info.num_ack_pending == 0 || tokio::time::Instant::now() >= deadline {
            return info;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Five messages prefetched, one of them taken: the drain is requested, the stream
/// yields the other four (attempt 1) and ends within the pull request's lifetime; all
/// five acknowledged, the consumer counts no redelivery and has no pull request
/// waiting. A message published meanwhile comes, at attempt 1, to the next
/// subscription; so do those published after the stream ended.
#[tokio::test]
async fn a_drained_subscription_ends_after_what_it_received() {
    let subject = unique("drain");
    let _cleanup = Cleanup(subject.clone());
    let broker = broker().await;
    let (mut sub, drain) = subscribe(&broker, &subject).await;
    for n in 0..5 {
        publish(&broker, &subject, Message::new(format!("m{n}"))).await;
    }
    let first = next(&mut sub, WAIT).await;
    // The others reach the client meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    drain.request();
    first.settle(Settlement::Accept).await.expect("acked");
    let mut drained = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, sub.deliveries.next()).await {
            Ok(Some(Ok(delivery))) => {
                assert_eq!(delivery.broker_attempt(), Some(1), "{delivery:?}");
                drained.push(String::from_utf8_lossy(delivery.payload()).into_owned());
                delivery.settle(Settlement::Accept).await.expect("acked");
            }
            Ok(Some(Err(report))) => panic!("a report while draining: {report}"),
            Ok(None) => break,
            Err(_) => panic!("the stream did not end within {WAIT:?}; drained {drained:?}"),
        }
    }
    let took = asked.elapsed();
    assert_eq!(drained, ["m1", "m2", "m3", "m4"], "everything received");
    assert!(took < Duration::from_secs(4), "ended after {took:?}");
    let info = settled_info(&subject).await;
    assert_eq!(info.num_redelivered, 0, "{info:?}");
    assert_eq!(info.num_ack_pending, 0, "{info:?}");
    assert_eq!(
        info.num_waiting, 0,
        "no pull request left waiting: {info:?}"
    );
    drop(sub);

    publish(&broker, &subject, Message::new("later")).await;
    let (mut again, _drain) = subscribe(&broker, &subject).await;
    let later = next(&mut again, WAIT).await;
    assert_eq!(later.payload().as_ref(), b"later");
    assert_eq!(later.broker_attempt(), Some(1));
    later.settle(Settlement::Accept).await.expect("acked");
    assert!(
        try_next(&mut again, Duration::from_secs(1)).await.is_none(),
        "nothing given back"
    );
    assert_eq!(consumer_info(&subject).await.num_redelivered, 0);
}

/// A drain requested while nothing is received ends the stream too, after the pull
/// request's lifetime at most; a message published after it is not taken by it.
#[tokio::test]
async fn an_idle_subscription_drains_within_a_pull_request_lifetime() {
    let subject = unique("drainidle");
    let _cleanup = Cleanup(subject.clone());
    let broker = broker().await;
    let (mut sub, drain) = subscribe(&broker, &subject).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = Instant::now();
    drain.request();
    match tokio::time::timeout(WAIT, sub.deliveries.next()).await {
        Ok(None) => {}
        other => panic!("expected the end of the stream, got {other:?}"),
    }
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(4), "ended after {took:?}");
    publish(&broker, &subject, Message::new("after")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let info = consumer_info(&subject).await;
    assert_eq!(
        info.num_ack_pending, 0,
        "nothing delivered after the drain: {info:?}"
    );
    assert_eq!(info.num_pending, 1, "{info:?}");
}

#[derive(serde::Deserialize)]
struct Job {
    n: u64,
}

/// Three graceful stops (`Running::stop`) of a service with default options while
/// messages are prefetched (a sequential handler of 1 ms, 1,200 messages waiting, a stop
/// after five handled in the run: the client holds up to `max_ack_pending`, 260): every
/// message is handled once, at attempt 1. Before, each stop gave the prefetched ones
/// back (`-NAK`) and JetStream counted them: the next run saw them at attempt 2.
#[tokio::test]
async fn three_graceful_stops_spend_no_attempt() {
    three_graceful_stops(None).await;
}

/// The same with `workers(8)`.
#[tokio::test]
async fn three_graceful_stops_with_workers_spend_no_attempt() {
    three_graceful_stops(Some(8)).await;
}

async fn three_graceful_stops(workers: Option<usize>) {
    use ruststream::{App, Attempt, Mount, ack};
    const N: u64 = 1200;
    let subject = unique("drainapp");
    let _cleanup = Cleanup(subject.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, u32)>();
    let mut seen: Vec<(u64, u32)> = Vec::new();
    for run in 0..4 {
        let broker = broker().await;
        let tx = tx.clone();
        let handler = move |Attempt(attempt): Attempt, job: Job| {
            let _ = tx.send((job.n, attempt));
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ack()
            }
        };
        let mut mount = Mount::new(subject.as_str())
            .max_attempts(5)
            .dead_letter(format!("{subject}.dead").as_str());
        if let Some(workers) = workers {
            mount = mount.workers(workers);
        }
        let running = App::new(broker.clone())
            .mount(mount, handler)
            .start()
            .await
            .expect("the service starts");
        if run == 0 {
            let publisher = broker.publisher();
            let sends = (0..N).map(|n| {
                let message = Message::new(format!("{{\"n\":{n}}}"));
                publisher.publish(subject.as_str().into(), message)
            });
            for sent in futures_util::future::join_all(sends).await {
                sent.expect("published");
            }
        }
        let before = seen.len();
        let deadline = tokio::time::Instant::now() + WAIT * 3;
        // Stopped after five handled in this run (the last run: after all of them).
        while seen.len() < if run < 3 { before + 5 } else { N as usize } {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(job)) => seen.push(job),
                _ => panic!("run {run}: saw only {seen:?}"),
            }
        }
        running.stop().await.expect("a graceful stop");
        while let Ok(job) = rx.try_recv() {
            seen.push(job);
        }
        eprintln!("run {run}: {} handled so far", seen.len());
    }
    let again: Vec<_> = seen.iter().filter(|(_, attempt)| *attempt != 1).collect();
    assert!(again.is_empty(), "handled at a later attempt: {again:?}");
    let mut numbers: Vec<u64> = seen.iter().map(|(n, _)| *n).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (0..N).collect::<Vec<_>>(), "each once");
    let info = consumer_info(&subject).await;
    assert_eq!(info.num_redelivered, 0, "{info:?}");
}
