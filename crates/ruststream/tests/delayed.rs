//! Retry copies the runtime publishes after a delay: owed once the original is settled,
//! so a failed publish is tried again until it is out, and bounded in number and bytes.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, Outcome, ack, mount::DelayedLimit, retry_after};
use ruststream_core::Capabilities;
use support::{Calls, Faulty, wait_until};

/// Retries after `delay` on attempt 1, acks after.
fn retry_once(
    calls: &Calls,
    delay: Duration,
) -> impl Fn(Attempt, u32) -> std::future::Ready<Outcome> + Clone + use<> {
    let calls = calls.clone();
    move |Attempt(attempt): Attempt, n: u32| {
        calls.record(attempt, &Default::default(), n.to_string().as_bytes());
        std::future::ready(if attempt == 1 {
            retry_after(delay)
        } else {
            ack()
        })
    }
}

/// The app `build` makes on a settle-only memory broker whose publishes fail while the
/// returned switch is on.
async fn with_outage(build: impl FnOnce(App) -> App) -> (TestApp, Arc<AtomicBool>) {
    let mut outage = None;
    let app = TestApp::try_start(
        MemoryBroker::with_capabilities(Capabilities::SETTLES),
        |b| {
            let faulty = Faulty::new(b);
            outage = Some(faulty.outage());
            build(App::new(faulty))
        },
    )
    .await
    .expect("starts");
    (app, outage.expect("set"))
}

/// A broker outage when the delay is over: the copy is tried again until the broker is
/// back, then handled; nothing is lost.
#[tokio::test(start_paused = true)]
async fn a_delayed_copy_survives_a_publish_outage() {
    let calls = Calls::default();
    let (app, outage) =
        with_outage(|app| app.mount("q", retry_once(&calls, Duration::from_millis(100)))).await;
    app.publish("q", &7).await;
    wait_until("the first attempt", || calls.len() == 1).await;
    outage.store(true, Ordering::Release);
    // Well past the delay and several failed tries.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(calls.len(), 1, "not published during the outage");
    assert_eq!(app.deferred(), 1, "the copy still waits");
    outage.store(false, Ordering::Release);
    wait_until("the copy handled", || calls.len() == 2).await;
    assert_eq!(calls.attempts(), [1, 2]);
    app.stop().await.expect("clean stop");
}

/// The original's settlement fails after the broker carried it out (the reply lost
/// with the connection): the copy is owed all the same, since the original may be gone
/// for good. Here it is: the copy is the only way the message comes back.
#[tokio::test(start_paused = true)]
async fn a_delayed_copy_goes_out_when_the_originals_settlement_reply_is_lost() {
    let calls = Calls::default();
    let app = TestApp::try_start(
        MemoryBroker::with_capabilities(Capabilities::SETTLES),
        |b| {
            App::new(Faulty::new(b).lose_settlement_reply_if(|d| {
                d.headers().get(ruststream::core::RETRY_COUNT).is_none()
            }))
            .mount("q", retry_once(&calls, Duration::from_millis(100)))
        },
    )
    .await
    .expect("starts");
    app.publish("q", &7).await;
    wait_until("the copy handled", || calls.len() == 2).await;
    assert_eq!(calls.attempts(), [1, 2]);
    app.stop().await.expect("clean stop");
}

/// At the bound, the service takes no more deliveries until a copy is out: on the
/// default sequential loop, with workers and with lanes.
#[tokio::test(start_paused = true)]
async fn delayed_copies_are_bounded() {
    bounded(Mount::new("q")).await;
}

#[tokio::test(start_paused = true)]
async fn delayed_copies_are_bounded_with_workers() {
    bounded(Mount::new("q").workers(4)).await;
}

#[tokio::test(start_paused = true)]
async fn delayed_copies_are_bounded_with_lanes() {
    bounded(Mount::new("q").lanes(3, |d| d.payload().len() as u64)).await;
}

async fn bounded(mount: Mount) {
    let calls = Calls::default();
    let app = TestApp::start_with(Capabilities::SETTLES, |b| {
        App::new(b)
            .delayed_limit(DelayedLimit::default().copies(2))
            .mount(mount, retry_once(&calls, Duration::from_secs(10)))
    })
    .await;
    for n in 0..5 {
        app.publish("q", &n).await;
    }
    wait_until("two first attempts", || calls.len() == 2).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(calls.len(), 2, "no delivery handled while two copies wait");
    // Lanes have taken more into their hands (held, not handled) before they stop.
    assert!(app.broker().ready("q") >= 1, "{}", app.broker().ready("q"));
    // The delay ends: the copies go out, and the rest is taken.
    wait_until("every message handled twice", || calls.len() == 10).await;
    app.stop().await.expect("clean stop");
}

/// A graceful stop publishes waiting copies early; one that still cannot be published
/// when the grace period is over is given up (and logged) rather than hanging the stop.
#[tokio::test(start_paused = true)]
async fn a_stop_gives_up_a_copy_only_after_the_grace_period() {
    let calls = Calls::default();
    let (app, outage) = with_outage(|app| {
        app.shutdown_timeout(Duration::from_secs(2))
            .mount("q", retry_once(&calls, Duration::from_secs(3600)))
    })
    .await;
    app.publish("q", &1).await;
    wait_until("the first attempt", || calls.len() == 1).await;
    outage.store(true, Ordering::Release);
    let broker = app.broker().clone();
    let started = tokio::time::Instant::now();
    app.stop().await.expect("clean stop");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "tried through the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(60), "then gave up: {took:?}");
    assert!(broker.messages("q").is_empty());
}

/// A graceful stop publishes a waiting copy at once when the broker takes it.
#[tokio::test(start_paused = true)]
async fn a_stop_publishes_waiting_copies_early() {
    let calls = Calls::default();
    let app = TestApp::start_with(Capabilities::SETTLES, |b| {
        App::new(b).mount("q", retry_once(&calls, Duration::from_secs(3600)))
    })
    .await;
    app.publish("q", &1).await;
    wait_until("the first attempt", || calls.len() == 1).await;
    let broker = app.broker().clone();
    app.stop().await.expect("clean stop");
    assert_eq!(
        broker.messages("q").len(),
        1,
        "the copy went out on the stop"
    );
}
