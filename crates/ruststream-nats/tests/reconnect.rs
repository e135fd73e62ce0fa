//! Reconnection against a `nats-server` of the test's own (another port, its own store),
//! killed and started again: the subscription detaches and reports the loss, settling a
//! delivery of the lost connection is an error (not a fake success), a publish during
//! the outage hands the message back, and after the restart the same subscription
//! attaches again and receives, the unsettled delivery included.

mod support;

use std::time::Duration;

use ruststream_core::{Broker, Message, Settlement};
use ruststream_nats::{JetStream, NatsBroker};
use support::server::Server;
use support::{next, subscribe, try_next, unique};

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_after_a_server_restart() {
    let mut server = Server::start();
    let broker = NatsBroker::connect(&server.url())
        .await
        .expect("connect to own server");
    let subject = unique("reconnect");
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    let publisher = broker.publisher();
    publisher
        .publish(subject.as_str().into(), Message::new("before"))
        .await
        .expect("publish");
    let held = next(&mut sub, WAIT).await;
    assert_eq!(held.payload().as_ref(), b"before");
    let attached = sub.attached.clone();

    server.kill();
    let lost_at = std::time::Instant::now();
    // The loss is reported on the subscription and readiness drops.
    let report = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut sub.deliveries))
        .await
        .expect("a report within the wait");
    match report {
        Some(Err(report)) => assert!(report.0.contains("connection lost"), "{report}"),
        other => panic!("expected a report of the loss, got {other:?}"),
    }
    assert!(!attached.is_attached(), "detached while the server is down");
    // A settlement the server cannot confirm is an error.
    let settled = held.settle(Settlement::Accept).await;
    assert!(settled.is_err(), "settled during the outage: {settled:?}");
    // A publish during the outage hands the message back.
    match publisher
        .publish(subject.as_str().into(), Message::new("lost?"))
        .await
    {
        Err(error) => assert_eq!(error.message.payload.as_ref(), b"lost?"),
        Ok(()) => panic!("a publish during the outage reported success"),
    }

    server.run();
    // Readiness comes back as the reader reads again; what it receives meanwhile is kept.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !attached.is_attached() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "attached again within {WAIT:?}"
        );
        if let Some(delivery) = try_next(&mut sub, Duration::from_millis(100)).await {
            seen.push(String::from_utf8_lossy(delivery.payload()).into_owned());
            delivery
                .settle(Settlement::Accept)
                .await
                .expect("settled after the restart");
        }
    }
    eprintln!("attached again {:?} after the kill", lost_at.elapsed());
    assert_eq!(attached.reconnects(), 1);
    // A new message is received; the delivery whose settlement failed comes back after
    // the consumer's ack_wait (30 s by default).
    let deadline = tokio::time::Instant::now() + WAIT;
    while let Err(error) = publisher
        .publish(subject.as_str().into(), Message::new("after"))
        .await
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "publish after the restart: {error}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    while seen.len() < 2 {
        let Some(delivery) = try_next(&mut sub, Duration::from_secs(45)).await else {
            panic!("after the restart got only {seen:?}");
        };
        seen.push(String::from_utf8_lossy(delivery.payload()).into_owned());
        delivery
            .settle(Settlement::Accept)
            .await
            .expect("settled after the restart");
    }
    seen.sort();
    assert_eq!(seen, ["after", "before"], "nothing lost, nothing twice");
    assert!(try_next(&mut sub, Duration::from_secs(1)).await.is_none());
    broker.close().await;
}

/// A server SIGKILLed right after it delivered comes back from its store with the
/// consumer's sequence behind (its state had not reached the disk), and delivers the
/// same messages again under consumer sequences it had already used. Deliveries held
/// from before the kill and those after it must each settle their own message: keyed by
/// consumer sequence, an old delivery's settlement took a new one's acknowledgement
/// subject, acknowledged a message its handler never saw, and the new delivery's own
/// settlement then failed (the soak harness lost messages this way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_before_and_after_a_restart_settle_their_own_messages() {
    const N: usize = 20;
    let mut server = Server::start();
    let broker = NatsBroker::connect(&server.url())
        .await
        .expect("connect to own server");
    let subject = unique("rewind");
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    let publisher = broker.publisher();
    for i in 0..N {
        publisher
            .publish(subject.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("publish");
    }
    let mut before = Vec::new();
    while before.len() < N {
        before.push(next(&mut sub, WAIT).await);
    }
    server.kill();
    // The loss is reported on the subscription.
    let report = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut sub.deliveries))
        .await
        .expect("a report within the wait");
    assert!(matches!(report, Some(Err(_))), "{report:?}");
    server.run();
    // What the restarted server delivers again at once: the messages whose delivery it
    // forgot, under consumer sequences it hands out anew.
    let mut after = Vec::new();
    while let Some(delivery) = try_next(&mut sub, Duration::from_secs(5)).await {
        after.push(delivery);
    }
    eprintln!("{} delivered again after the restart", after.len());
    assert!(
        !after.is_empty(),
        "the restarted server delivered nothing again: it kept its consumer's sequence, \
         so this run shows nothing"
    );
    // The old deliveries first (each acknowledges its own message, through the
    // acknowledgement subject it came with), then the new ones.
    for delivery in before.into_iter().chain(after) {
        let payload = String::from_utf8_lossy(delivery.payload()).into_owned();
        delivery
            .settle(Settlement::Accept)
            .await
            .unwrap_or_else(|e| panic!("{payload}: settling failed: {e}"));
    }
    assert!(
        try_next(&mut sub, Duration::from_secs(2)).await.is_none(),
        "every message acknowledged"
    );
    broker.close().await;
}

#[derive(serde::Deserialize)]
struct Job {
    n: u64,
}

/// Plain acknowledgements (the default) across a server SIGKILL: a service with default
/// options handling 400 messages, the server killed after 100 were handled and started
/// again. Every message is handled at least once: an acknowledgement the server did not
/// get (in the client's buffer, or unread by the killed server) brings its message
/// again, a duplicate, never a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_acknowledgements_lose_nothing_across_a_server_kill() {
    use std::collections::HashSet;

    use ruststream::{App, Mount, ack};
    const N: u64 = 400;
    let mut server = Server::start();
    let broker = NatsBroker::connect(&server.url())
        .await
        .expect("connect to own server");
    let subject = unique("plainkill");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let handler = move |job: Job| {
        let _ = tx.send(job.n);
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            ack()
        }
    };
    let running = App::new(broker.clone())
        .mount(Mount::new(subject.as_str()), handler)
        .start()
        .await
        .expect("the service starts");
    let publisher = broker.publisher();
    for n in 0..N {
        publisher
            .publish(
                subject.as_str().into(),
                Message::new(format!("{{\"n\":{n}}}")),
            )
            .await
            .expect("publish");
    }
    let (mut handled, mut seen) = (0, HashSet::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while seen.len() < N as usize {
        let Ok(Some(n)) = tokio::time::timeout_at(deadline, rx.recv()).await else {
            let missing: Vec<u64> = (0..N).filter(|n| !seen.contains(n)).collect();
            panic!("lost across the kill: {missing:?}");
        };
        handled += 1;
        seen.insert(n);
        if handled == 100 {
            server.kill();
            tokio::time::sleep(Duration::from_millis(500)).await;
            server.run();
        }
    }
    eprintln!("{N} messages, {} handled ({} twice)", handled, handled - N);
    running.stop().await.expect("stops");
}

/// A network that drops everything (the connection stays open, nothing crosses) is
/// noticed by the pull requests' idle heartbeats, long before the client's own pings
/// (async-nats's defaults, which the adapter keeps: a ping every 60 s, the connection
/// given up at the third unanswered, two to three minutes): the subscription reports it
/// after the consumer-info check's request timeout (async-nats's 10 s), and once the
/// network is back it receives again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_network_is_reported_by_missed_heartbeats() {
    use ruststream_conformance::proxy::Proxy;

    let proxy = Proxy::to_url(&support::url()).await;
    let broker = NatsBroker::connect(&proxy.through(&support::url()))
        .await
        .expect("connect through the proxy");
    let subject = unique("stall");
    let mut sub = subscribe::<JetStream>(&broker, &subject, None).await;
    let publisher = support::broker().await.publisher();
    publisher
        .publish(subject.as_str().into(), Message::new("before"))
        .await
        .expect("publish");
    next(&mut sub, WAIT)
        .await
        .settle(Settlement::Accept)
        .await
        .expect("settled");

    proxy.stall();
    let stalled_at = std::time::Instant::now();
    let report = tokio::time::timeout(
        Duration::from_secs(30),
        futures_util::StreamExt::next(&mut sub.deliveries),
    )
    .await
    .expect("a report within 30 s");
    match report {
        Some(Err(report)) => assert!(report.0.contains("missed idle heartbeats"), "{report}"),
        other => panic!("expected a report of missed heartbeats, got {other:?}"),
    }
    eprintln!("reported after {:?}", stalled_at.elapsed());

    proxy.resume();
    publisher
        .publish(subject.as_str().into(), Message::new("after"))
        .await
        .expect("publish");
    let after = next(&mut sub, Duration::from_secs(30)).await;
    assert_eq!(after.payload().as_ref(), b"after");
    after.settle(Settlement::Accept).await.expect("settled");
}
