//! `and_after`, the app's hooks and a layer's visit: when they run, how often, what they
//! see, in which order.

mod support;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ruststream::layer::{Layer, Middleware, Subscribed, Visit};
use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Delivery, Mount, Outcome, Settled, ack, retry, settled::Cause};
use ruststream_core::{PublishErrorKind, Verdict};
use support::{Faulty, queue, settle, wait_until, within};

/// A shared list of events, in the order they happened.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    fn push(&self, event: impl Into<String>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.into());
    }

    fn all(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What `and_after` saw: the delivery, the settlement's result, and the broker's queue at
/// that moment.
#[derive(Debug, PartialEq, Eq)]
struct After {
    payload: u32,
    attempt: u32,
    verdict: Verdict,
    ok: bool,
    ready: usize,
    unsettled: usize,
}

#[tokio::test(start_paused = true)]
async fn and_after_runs_once_after_the_broker_settled() {
    let seen: Arc<Mutex<Vec<After>>> = Arc::default();
    let sink = seen.clone();
    let app = TestApp::start(move |broker| {
        let observed = broker.clone();
        App::new(broker).mount("q", move |Attempt(attempt): Attempt, n: u32| {
            let (sink, broker) = (sink.clone(), observed.clone());
            async move {
                let outcome = if n == 1 && attempt == 1 {
                    retry()
                } else {
                    ack()
                };
                outcome.and_after(move |settled: &Settled| {
                    let q = queue(&broker, "q");
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(After {
                            payload: n,
                            attempt: settled.attempt(),
                            verdict: settled.verdict(),
                            ok: settled.is_ok(),
                            ready: q.ready,
                            unsettled: q.unsettled,
                        });
                    async {}
                })
            }
        })
    })
    .await;
    app.publish("q", &1).await;
    settle(&app).await;
    app.publish("q", &2).await;
    settle(&app).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    assert_eq!(
        seen,
        [
            // The requeue already happened: the delivery is back, ready.
            After {
                payload: 1,
                attempt: 1,
                verdict: Verdict::Retry,
                ok: true,
                ready: 1,
                unsettled: 0
            },
            // The ack already happened: nothing left.
            After {
                payload: 1,
                attempt: 2,
                verdict: Verdict::Ack,
                ok: true,
                ready: 0,
                unsettled: 0
            },
            After {
                payload: 2,
                attempt: 1,
                verdict: Verdict::Ack,
                ok: true,
                ready: 0,
                unsettled: 0
            },
        ]
    );
    app.stop().await.expect("clean stop");
}

/// `and_after` runs when the broker refuses the settlement too, and says so.
#[tokio::test(start_paused = true)]
async fn and_after_sees_a_refused_settlement() {
    let seen: Arc<Mutex<Vec<(u32, bool, bool)>>> = Arc::default();
    let sink = seen.clone();
    let app = TestApp::try_start(MemoryBroker::new(), move |broker| {
        App::new(Faulty::new(broker).refuse_settlement_if(|d| &d.payload()[..] == b"1")).mount(
            "q",
            move |n: u32| {
                let sink = sink.clone();
                async move {
                    ack().and_after(move |settled: &Settled| {
                        sink.lock().unwrap_or_else(PoisonError::into_inner).push((
                            n,
                            settled.is_ok(),
                            settled.error().is_some(),
                        ));
                        async {}
                    })
                }
            },
        )
    })
    .await
    .expect("starts");
    app.publish("q", &1).await;
    app.publish("q", &2).await;
    wait_until("two settlements", || app.settlements().len() == 2).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    assert_eq!(seen, [(1, false, true), (2, true, false)]);
    within("stop", app.stop()).await.expect("clean stop");
}

/// The order of everything: `on_start` hooks (subscribed, in the order added), then per
/// delivery the handler, the `after_settle` hooks (in the order added), `and_after`; then the
/// `on_stop` hooks (handling stopped, every delivery settled), then the broker closes.
#[tokio::test(start_paused = true)]
async fn hooks_run_in_order() {
    let events = Events::default();
    let broker = MemoryBroker::new();
    let (e1, e2, e3, e4, e5, e6, e7) = (
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
    );
    let (at_start, at_stop) = (broker.clone(), broker.clone());
    let app = App::new(broker.clone())
        .mount("q", move |n: u32| {
            let events = e1.clone();
            events.push(format!("handle {n}"));
            async move {
                let outcome: Outcome = ack().and_after(move |s: &Settled| {
                    events.push(format!("and_after {n} ok={}", s.is_ok()));
                    async {}
                });
                outcome
            }
        })
        .on_start(move || {
            let q = queue(&at_start, "q");
            e2.push(format!("on_start 1 consumers={}", q.consumers));
        })
        .on_start(move || e3.push("on_start 2"))
        .after_settle(move |s: &Settled| e4.push(format!("after_settle 1 {:?}", s.verdict())))
        .after_settle(move |s: &Settled| e5.push(format!("after_settle 2 ok={}", s.is_ok())))
        .on_stop(move || {
            let q = queue(&at_stop, "q");
            e6.push(format!(
                "on_stop 1 consumers={} ready={} unsettled={}",
                q.consumers, q.ready, q.unsettled
            ));
        })
        .on_stop(move || e7.push("on_stop 2"));
    let publisher = app.publisher();
    let running = app.start().await.expect("starts");
    events.push("started");
    publisher.publish("q", &1).await.expect("published");
    publisher.publish("q", &2).await.expect("published");
    wait_until("both settled", || {
        events
            .all()
            .iter()
            .filter(|e| e.starts_with("and_after"))
            .count()
            == 2
    })
    .await;
    running.stop().await.expect("clean stop");
    assert_eq!(
        events.all(),
        [
            "on_start 1 consumers=1",
            "on_start 2",
            "started",
            "handle 1",
            "after_settle 1 Ack",
            "after_settle 2 ok=true",
            "and_after 1 ok=true",
            "handle 2",
            "after_settle 1 Ack",
            "after_settle 2 ok=true",
            "and_after 2 ok=true",
            "on_stop 1 consumers=0 ready=0 unsettled=0",
            "on_stop 2",
        ]
    );
    // The app's connection to the broker closed after the on_stop hooks.
    let closed = publisher
        .publish_message("q", ruststream_core::Message::new("late"))
        .await
        .expect_err("closed");
    assert!(matches!(closed.kind, PublishErrorKind::Closed));
}

/// `after_settle` runs for every settlement whoever decided it (a handler or a failure
/// policy), with what was decided.
#[tokio::test(start_paused = true)]
async fn after_settle_sees_every_settlement() {
    let events = Events::default();
    let sink = events.clone();
    let app = TestApp::start(move |b| {
        App::new(b)
            .mount(
                ruststream::Mount::new("q").max_attempts(2),
                |Attempt(a): Attempt, n: u32| async move {
                    if n == 0 && a < 5 { retry() } else { ack() }
                },
            )
            .after_settle(move |s: &Settled| {
                let cause = match s.cause() {
                    Cause::Handler => "handler",
                    Cause::Decode(_) => "decode",
                    Cause::Panic(_) => "panic",
                    _ => "other",
                };
                sink.push(format!(
                    "{} {} {:?} {cause} {}",
                    s.address(),
                    s.attempt(),
                    s.verdict(),
                    s.is_ok()
                ));
            })
    })
    .await;
    app.publish("q", &0).await;
    app.publish_message("q", ruststream_core::Message::new("not json"))
        .await;
    settle(&app).await;
    assert_eq!(
        events.all(),
        [
            "q 1 Retry handler true",
            "q 1 Drop decode true",
            // Requeued behind the other; at the cap without a dead letter: rejected.
            "q 2 Retry handler true",
        ]
    );
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

/// What a layer's visit and a hook learn of one settlement: its cause and how long the
/// handler ran.
type Timing = Arc<Mutex<Vec<(String, Option<Duration>)>>>;

/// Settles `0` before its handler; follows every delivery with one shared visit that
/// records what it is told.
#[derive(Clone)]
struct Timed(Arc<Told>);

struct Told(Timing);

impl Layer for Timed {
    fn layer(&self, _: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(self.clone())
    }
}

impl Middleware for Timed {
    fn visit(&self, _: &Delivery) -> Option<Arc<dyn Visit>> {
        Some(self.0.clone())
    }

    fn before(&self, delivery: &Delivery) -> Option<Outcome> {
        (delivery.payload().as_ref() == b"0").then(ack)
    }
}

impl Visit for Told {
    fn settled(&self, settled: &Settled) {
        record(&self.0, settled);
    }
}

fn record(into: &Timing, settled: &Settled) {
    let cause = match settled.cause() {
        Cause::Handler => "handler",
        Cause::Layer => "layer",
        Cause::Decode(_) => "decode",
        _ => "other",
    };
    into.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((cause.to_owned(), settled.elapsed()));
}

/// `Settled::elapsed` is how long the handler's future ran, told alike to a layer's
/// visit and to the hooks; `None` where the handler did not run (a middleware settled
/// the delivery, its payload did not decode). On the real clock: the handler of `50`
/// sleeps 50 ms.
#[tokio::test]
async fn settled_tells_how_long_the_handler_ran() {
    let (visited, hooked): (Timing, Timing) = Default::default();
    let hook = hooked.clone();
    let layer = Timed(Arc::new(Told(visited.clone())));
    let app = TestApp::start(move |broker| {
        App::new(broker)
            .after_settle(move |settled: &Settled| record(&hook, settled))
            .mount(Mount::new("q").layer(layer), |n: u32| async move {
                if n == 50 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                ack()
            })
    })
    .await;
    app.publish("q", &50).await;
    app.publish("q", &0).await;
    app.publish_message("q", ruststream_core::Message::new("not json"))
        .await;
    app.publish("q", &1).await;
    settle(&app).await;
    for seen in [&visited, &hooked] {
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let causes: Vec<_> = seen.iter().map(|(cause, _)| cause.as_str()).collect();
        assert_eq!(
            causes,
            ["handler", "layer", "decode", "handler"],
            "{seen:?}"
        );
        let slow = seen[0].1.expect("the handler ran");
        assert!(slow >= Duration::from_millis(50), "{slow:?}");
        assert_eq!(
            seen[1].1, None,
            "a middleware settled it before its handler"
        );
        assert_eq!(seen[2].1, None, "its payload did not decode");
        assert!(seen[3].1.is_some(), "the handler ran");
    }
    app.stop().await.expect("clean stop");
}
