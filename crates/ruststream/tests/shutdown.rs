//! Graceful shutdown with work in flight: what finishes in the grace period is settled, what
//! does not stays unsettled for the broker, nothing new is taken, and retry copies waiting in
//! the process are not lost.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, Outcome, Settled, ack, retry_after};
use ruststream_core::{Capabilities, Verdict};
use support::{Gauge, queue, settle, wait_until, within};
use tokio::time::Instant;

/// Sets a mount's concurrency.
type Concurrency = fn(Mount) -> Mount;

/// A handler that takes `work` and counts the calls that finished.
fn slow(
    started: &Gauge,
    finished: &Arc<AtomicUsize>,
    work: Duration,
) -> impl Fn(u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>> + Clone + use<>
{
    let (started, finished) = (started.clone(), finished.clone());
    move |_: u32| {
        let (started, finished) = (started.clone(), finished.clone());
        Box::pin(async move {
            let _running = started.enter();
            tokio::time::sleep(work).await;
            finished.fetch_add(1, Ordering::SeqCst);
            ack()
        })
    }
}

#[tokio::test(start_paused = true)]
async fn an_in_flight_handler_finishes_and_is_acked_within_the_grace_period() {
    let (gauge, finished) = (Gauge::default(), Arc::new(AtomicUsize::new(0)));
    let settled: Arc<Mutex<Vec<(Verdict, bool)>>> = Arc::default();
    let sink = settled.clone();
    let app = TestApp::start(|b| {
        App::new(b)
            .shutdown_timeout(Duration::from_secs(10))
            .mount("q", slow(&gauge, &finished, Duration::from_secs(3)))
            .after_settle(move |s: &Settled| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((s.verdict(), s.is_ok()));
            })
    })
    .await;
    app.publish("q", &1).await;
    wait_until("the handler runs", || gauge.now() == 1).await;
    assert_eq!(queue(app.broker(), "q").unsettled, 1);
    let broker = app.broker().clone();
    let asked = Instant::now();
    within("stop", app.stop()).await.expect("clean stop");
    let took = asked.elapsed();
    // The handler had been running for a moment when the stop was asked.
    assert!(
        took > Duration::from_millis(2900) && took <= Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 1, "the handler finished");
    assert_eq!(
        *settled.lock().unwrap_or_else(PoisonError::into_inner),
        [(Verdict::Ack, true)]
    );
    // Settled (acked) before the broker closed: nothing waits, nothing is out.
    let q = queue(&broker, "q");
    assert_eq!((q.ready, q.unsettled), (0, 0));
    assert!(broker.is_idle());
}

/// A handler still running when the grace period ends is abandoned: it never finishes, its
/// delivery is not settled and is back in the queue once `stop` returns — whatever the
/// concurrency.
#[tokio::test(start_paused = true)]
async fn handlers_past_the_grace_period_are_abandoned_and_their_deliveries_return() {
    let modes: [(&str, Concurrency, usize); 3] = [
        ("sequential", |m| m, 1),
        ("workers(2)", |m| m.workers(2), 2),
        ("lanes(2)", |m| m.lanes(2, |d| u64::from(d.payload()[0])), 2),
    ];
    let mut wrong = Vec::new();
    for (name, concurrency, running) in modes {
        let (gauge, finished) = (Gauge::default(), Arc::new(AtomicUsize::new(0)));
        let app = TestApp::start(|b| {
            App::new(b).shutdown_timeout(Duration::from_secs(1)).mount(
                concurrency(Mount::new("q")),
                slow(&gauge, &finished, Duration::from_secs(3600)),
            )
        })
        .await;
        for n in 1..=4 {
            app.publish("q", &n).await;
        }
        wait_until("the handlers run", || gauge.now() == running).await;
        let broker = app.broker().clone();
        let asked = Instant::now();
        if let Err(error) = within("stop", app.stop()).await {
            wrong.push(format!("{name}: stop: {error}"));
        }
        let took = asked.elapsed();
        // Right after `stop`: every delivery is back, none out, none lost.
        let q = queue(&broker, "q");
        if (q.ready, q.unsettled) != (4, 0) {
            wrong.push(format!(
                "{name}: after stop {} ready, {} unsettled; expected 4, 0",
                q.ready, q.unsettled
            ));
        }
        if took < Duration::from_secs(1) || took > Duration::from_millis(1100) {
            wrong.push(format!("{name}: stop took {took:?}"));
        }
        // The abandoned handlers never complete.
        tokio::time::sleep(Duration::from_secs(7200)).await;
        if finished.load(Ordering::SeqCst) != 0 || gauge.now() != 0 {
            wrong.push(format!(
                "{name}: {} abandoned handlers finished, {} still running",
                finished.load(Ordering::SeqCst),
                gauge.now()
            ));
        }
        let order: Vec<_> = broker
            .messages("q")
            .iter()
            .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
            .collect();
        if order != ["1", "2", "3", "4"] {
            wrong.push(format!("{name}: back in the order {order:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Once a stop is asked, no delivery is taken: not the ones waiting, not one published
/// while the in-flight handler finishes.
#[tokio::test(start_paused = true)]
async fn no_new_deliveries_are_taken_after_stop_begins() {
    for (name, workers) in [("sequential", 1), ("workers(2)", 2)] {
        let (gauge, finished) = (Gauge::default(), Arc::new(AtomicUsize::new(0)));
        let app = TestApp::start(|b| {
            let mount = Mount::new("q");
            let mount = if workers > 1 {
                mount.workers(workers)
            } else {
                mount
            };
            App::new(b)
                .shutdown_timeout(Duration::from_secs(30))
                .mount(mount, slow(&gauge, &finished, Duration::from_secs(5)))
        })
        .await;
        for n in 1..=5 {
            app.publish("q", &n).await;
        }
        wait_until("the handlers run", || gauge.now() == workers).await;
        let broker = app.broker().clone();
        let publisher = app.publisher().clone();
        let stopping = tokio::spawn(app.stop());
        tokio::time::sleep(Duration::from_secs(1)).await;
        publisher.publish("q", &6).await.expect("still open");
        within("stop", stopping)
            .await
            .expect("stop ran")
            .expect("clean stop");
        assert_eq!(
            gauge.started(),
            workers,
            "{name}: handled only the in-flight"
        );
        assert_eq!(finished.load(Ordering::SeqCst), workers, "{name}");
        let q = queue(&broker, "q");
        assert_eq!(
            (q.ready, q.unsettled),
            (6 - workers, 0),
            "{name}: the rest wait"
        );
    }
}

/// A `retry_after` copy waiting in the process is published at once when the service stops
/// gracefully, rather than lost.
#[tokio::test(start_paused = true)]
async fn waiting_retry_copies_are_published_on_a_graceful_stop() {
    let app = TestApp::start_with(Capabilities::SETTLES, |b| {
        App::new(b).mount("q", |Attempt(a): Attempt, _: u32| async move {
            if a == 1 {
                retry_after(Duration::from_secs(3600))
            } else {
                ack()
            }
        })
    })
    .await;
    app.publish_message("q", support::json_message("7")).await;
    wait_until("the first attempt settled", || app.settlements().len() == 1).await;
    assert_eq!(
        app.settlements()[0].verdict,
        Verdict::RetryAfter(Duration::from_secs(3600))
    );
    assert_eq!(app.broker().ready("q"), 0, "the copy waits in the process");
    let broker = app.broker().clone();
    let asked = Instant::now();
    within("stop", app.stop()).await.expect("clean stop");
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "did not wait the delay"
    );
    let waiting = broker.messages("q");
    assert_eq!(waiting.len(), 1, "the copy was published");
    assert_eq!(&waiting[0].payload[..], b"7");
    assert_eq!(
        waiting[0].headers.get_str(ruststream_core::RETRY_COUNT),
        Some("1")
    );
    assert_eq!(waiting[0].headers.get_str("x-test"), Some("as-published"));
}

/// A delivery held in the process before its requeue (a broker that dead-letters itself but
/// cannot delay) is not lost on a graceful stop: it is back in the queue.
#[tokio::test(start_paused = true)]
async fn a_held_delivery_is_back_in_the_queue_after_a_graceful_stop() {
    let self_dl = Capabilities {
        settles: true,
        requeues: true,
        counts: true,
        delays: None,
        dead_letters: true,
        moves: false,
    };
    let app = TestApp::try_start(MemoryBroker::with_capabilities(self_dl), |b| {
        App::new(b).mount(Mount::new("q").max_attempts(3), |_: u32| async {
            retry_after(Duration::from_secs(3600))
        })
    })
    .await
    .expect("starts");
    app.publish("q", &7).await;
    wait_until("the first attempt settled", || app.settlements().len() == 1).await;
    assert_eq!(queue(app.broker(), "q").unsettled, 1, "held, unsettled");
    let broker = app.broker().clone();
    let asked = Instant::now();
    within("stop", app.stop()).await.expect("clean stop");
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "did not wait the delay"
    );
    let q = queue(&broker, "q");
    assert_eq!((q.ready, q.unsettled), (1, 0));
    assert_eq!(&broker.messages("q")[0].payload[..], b"7");
}

/// Stopping with nothing in flight is quick and clean, and a settled app leaves nothing.
#[tokio::test(start_paused = true)]
async fn an_idle_app_stops_at_once() {
    let app = TestApp::start(|b| App::new(b).mount("q", |_: u32| async {})).await;
    app.publish("q", &1).await;
    settle(&app).await;
    let asked = Instant::now();
    let broker = app.broker().clone();
    app.stop().await.expect("clean stop");
    assert!(asked.elapsed() < Duration::from_millis(10));
    assert!(broker.is_idle());
}

/// The same as above on a multi-threaded runtime (real clock), many times over: when `stop`
/// returns, the abandoned deliveries must be back and the abandoned handlers gone.
///
/// Every handling loop is a task of the service itself, so `stop` aborts and awaits them
/// all before it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_handler_tasks_are_gone_when_stop_returns_on_a_multi_threaded_runtime() {
    let modes: [(&str, Concurrency); 2] = [
        ("workers(2)", |m| m.workers(2)),
        ("lanes(2)", |m| m.lanes(2, |d| u64::from(d.payload()[0]))),
    ];
    let mut wrong = Vec::new();
    for (name, concurrency) in modes {
        for round in 0..40 {
            let (gauge, finished) = (Gauge::default(), Arc::new(AtomicUsize::new(0)));
            let app = TestApp::start(|b| {
                App::new(b)
                    .shutdown_timeout(Duration::from_millis(2))
                    .mount(
                        concurrency(Mount::new("q")),
                        slow(&gauge, &finished, Duration::from_secs(3600)),
                    )
            })
            .await;
            for n in 1..=4 {
                app.publish("q", &n).await;
            }
            wait_until("the handlers run", || gauge.now() == 2).await;
            let broker = app.broker().clone();
            app.stop().await.expect("clean stop");
            let (q, running) = (queue(&broker, "q"), gauge.now());
            if (q.ready, q.unsettled, running) != (4, 0, 0) {
                wrong.push(format!(
                    "{name}, round {round}: right after stop {} ready, {} unsettled, {running} handlers alive",
                    q.ready, q.unsettled
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
