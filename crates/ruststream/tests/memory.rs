//! The memory broker as a broker: queues with competing consumers, topics with fan-out,
//! unsettled deliveries that come back when their consumer goes away.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, ack, retry};
use ruststream_core::{Broker, Capabilities, Settlement, SubscribeSpec};
use support::{Calls, Gauge, queue, settle, wait_until, within};

fn numbers(calls: &Calls) -> Vec<u32> {
    calls
        .all()
        .iter()
        .map(|c| {
            String::from_utf8_lossy(&c.payload)
                .parse()
                .expect("a number")
        })
        .collect()
}

/// A handler that logs `(attempt, n)` and takes 10 ms.
fn logging(
    calls: &Calls,
) -> impl Fn(Attempt, u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
+ Clone
+ use<> {
    let calls = calls.clone();
    move |Attempt(attempt), n| {
        calls.record(attempt, &Default::default(), n.to_string().as_bytes());
        Box::pin(tokio::time::sleep(Duration::from_millis(10)))
    }
}

/// Two services on one queue compete: each message is handled once, by one of them.
#[tokio::test(start_paused = true)]
async fn competing_consumers_handle_each_message_once() {
    let broker = MemoryBroker::new();
    let (a_calls, b_calls) = (Calls::default(), Calls::default());
    let a = TestApp::try_start(broker.clone(), |b| {
        App::new(b).mount("q", logging(&a_calls))
    })
    .await
    .expect("starts");
    let b = TestApp::try_start(broker.clone(), |b| {
        App::new(b).mount("q", logging(&b_calls))
    })
    .await
    .expect("starts");
    assert_eq!(queue(&broker, "q").consumers, 2);
    for n in 0..20 {
        a.publish("q", &n).await;
    }
    settle(&a).await;
    settle(&b).await;
    let (from_a, from_b) = (numbers(&a_calls), numbers(&b_calls));
    assert!(
        !from_a.is_empty() && !from_b.is_empty(),
        "{from_a:?} {from_b:?}"
    );
    let mut all: Vec<_> = from_a.iter().chain(&from_b).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..20).collect::<Vec<_>>(), "each exactly once");
    assert!(
        a_calls
            .all()
            .iter()
            .chain(&b_calls.all())
            .all(|c| c.attempt == 1)
    );
    assert!(broker.is_idle());
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

/// A topic: every subscription gets its own copy of each message published after it
/// subscribed; nobody gets what was published before.
#[tokio::test(start_paused = true)]
async fn every_topic_subscription_gets_a_copy() {
    let broker = MemoryBroker::new().topic("t");
    let publisher = ruststream::Publisher::new(broker.publisher());
    publisher.publish("t", &99).await.expect("published");
    let (one, two, three) = (Calls::default(), Calls::default(), Calls::default());
    let a = TestApp::try_start(broker.clone(), |b| {
        App::new(b)
            .mount("t", logging(&one))
            .mount("t", logging(&two))
    })
    .await
    .expect("starts");
    let b = TestApp::try_start(broker.clone(), |b| App::new(b).mount("t", logging(&three)))
        .await
        .expect("starts");
    for n in 0..3 {
        a.publish("t", &n).await;
    }
    settle(&a).await;
    settle(&b).await;
    for calls in [&one, &two, &three] {
        assert_eq!(numbers(calls), [0, 1, 2]);
    }
    assert!(broker.is_idle(), "{:?}", broker.snapshot());
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

/// On a topic, the broker's own requeue goes back to the one subscription; a retry copy
/// published by the runtime goes to the topic's address, so every subscription gets it
/// (SPEC §2: "on a topic address every subscription gets it").
#[tokio::test(start_paused = true)]
async fn a_retry_on_a_topic_requeues_to_one_subscription_and_copies_to_all() {
    for (caps, copies) in [(MemoryBroker::FULL, false), (Capabilities::SETTLES, true)] {
        let broker = MemoryBroker::with_capabilities(caps).topic("t");
        let (retrying, other) = (Calls::default(), Calls::default());
        let log = retrying.clone();
        let app = TestApp::try_start(broker, |b| {
            App::new(b)
                .mount(
                    Mount::new("t").max_attempts(2),
                    move |Attempt(a): Attempt, n: u32| {
                        log.record(a, &Default::default(), n.to_string().as_bytes());
                        async move { if a == 1 { retry() } else { ack() } }
                    },
                )
                .mount("t", logging(&other))
        })
        .await
        .expect("starts");
        app.publish("t", &5).await;
        settle(&app).await;
        assert_eq!(retrying.attempts(), [1, 2], "{caps:?}");
        let expected: &[u32] = if copies { &[1, 2] } else { &[1] };
        assert_eq!(other.attempts(), expected, "{caps:?}");
        app.stop().await.expect("clean stop");
    }
}

/// A delivery dropped unsettled (its consumer gave up on it or went away) is handed back
/// to its place in the queue, counted: the next consumer gets it as attempt 2. A delivery
/// still held settles normally after its subscription ended.
#[tokio::test(start_paused = true)]
async fn an_unsettled_delivery_returns_when_its_consumer_goes_away() {
    let broker = MemoryBroker::new();
    let publisher = ruststream::Publisher::new(broker.publisher());
    publisher.publish("q", &1).await.expect("published");
    publisher.publish("q", &2).await.expect("published");
    let mut subscription = broker
        .subscribe(SubscribeSpec::new("q"))
        .await
        .expect("subscribed");
    let first = subscription
        .deliveries
        .next()
        .await
        .expect("a delivery")
        .expect("no error");
    assert_eq!(first.redelivery_count(), 1);
    let q = queue(&broker, "q");
    assert_eq!((q.ready, q.unsettled, q.consumers), (1, 1, 1));
    let second = subscription
        .deliveries
        .next()
        .await
        .expect("a delivery")
        .expect("no error");
    drop(subscription);
    let q = queue(&broker, "q");
    assert_eq!((q.ready, q.unsettled, q.consumers), (0, 2, 0));
    second.settle(Settlement::Accept).await.expect("settles");
    drop(first);
    let q = queue(&broker, "q");
    assert_eq!((q.ready, q.unsettled, q.consumers), (1, 0, 0));
    publisher.publish("q", &3).await.expect("published");
    let calls = Calls::default();
    let app = TestApp::try_start(broker.clone(), |b| App::new(b).mount("q", logging(&calls)))
        .await
        .expect("starts");
    settle(&app).await;
    assert_eq!(numbers(&calls), [1, 3], "back at its place");
    assert_eq!(calls.attempts(), [2, 1], "counted");
    app.stop().await.expect("clean stop");
}

/// Starts a service on `broker` whose handler never finishes, publishes one message and
/// waits until the handler has it.
async fn stuck_service(broker: &MemoryBroker) -> TestApp {
    let stuck = Gauge::default();
    let g = stuck.clone();
    let app = TestApp::try_start(broker.clone(), |b| {
        App::new(b)
            .shutdown_timeout(Duration::from_secs(1))
            .mount("q", move |_: u32| {
                let g = g.clone();
                async move {
                    let _running = g.enter();
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    ack()
                }
            })
    })
    .await
    .expect("starts");
    app.publish("q", &1).await;
    wait_until("the stuck service handles it", || stuck.now() == 1).await;
    app
}

/// A service stopped mid-handler with a short grace period: its delivery goes back and
/// another service on the same broker gets it as attempt 2.
#[tokio::test(start_paused = true)]
async fn a_stopped_services_unsettled_delivery_goes_to_another_service() {
    let broker = MemoryBroker::new();
    let a = stuck_service(&broker).await;
    let calls = Calls::default();
    let b = TestApp::try_start(broker.clone(), |b| App::new(b).mount("q", logging(&calls)))
        .await
        .expect("starts");
    within("stop", a.stop()).await.expect("clean stop");
    wait_until("the other service handled it", || calls.len() == 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(numbers(&calls), [1]);
    assert_eq!(calls.attempts(), [2]);
    assert!(broker.is_idle(), "{:?}", broker.snapshot());
    b.stop().await.expect("clean stop");
}

/// Stopping one service leaves another on the same memory broker running: it goes on
/// consuming and publishing.
///
/// Each clone of a `MemoryBroker` is a connection of its own; a stopping service closes
/// only its own.
#[tokio::test(start_paused = true)]
async fn stopping_one_service_leaves_another_on_the_same_broker_running() {
    let broker = MemoryBroker::new();
    let a = stuck_service(&broker).await;
    let calls = Calls::default();
    let b = TestApp::try_start(broker.clone(), |b| App::new(b).mount("q", logging(&calls)))
        .await
        .expect("starts");
    within("stop", a.stop()).await.expect("clean stop");
    wait_until("the other service handled it", || calls.len() == 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!b.is_stopping());
    assert_eq!(queue(&broker, "q").consumers, 1, "B still consumes");
    let more = b.publisher().publish("q", &2).await;
    assert!(more.is_ok(), "B can still publish: {more:?}");
    settle(&b).await;
    assert_eq!(numbers(&calls), [1, 2]);
    assert_eq!(calls.attempts(), [2, 1]);
    b.stop().await.expect("clean stop");
}
