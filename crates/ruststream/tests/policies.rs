//! Failure policies end to end: payloads that do not decode, transport-level defects,
//! panicking handlers, and handlers returning `Err`.

mod support;

use std::time::Duration;

use ruststream::core::Message;
use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{
    App, Attempt, Context, Mount, Outcome, Policy, RunError, ack,
    extract::{ExtractError, FromDelivery},
    retry,
    settled::Cause,
};
use ruststream_core::{Broker, Capabilities, Settlement, Verdict};
use support::{Calls, DEFECT, Faulty, json_message, settle, settled_with, wait_until, within};

const D: Duration = Duration::from_secs(2);

/// A handler that counts its calls and acks; it takes a number, so `"not json"` does not
/// decode for it.
fn counting(calls: &Calls) -> impl Fn(Attempt, u32) -> std::future::Ready<Outcome> + Clone + use<> {
    let calls = calls.clone();
    move |Attempt(attempt), n| {
        calls.record(attempt, &Default::default(), n.to_string().as_bytes());
        std::future::ready(ack())
    }
}

fn not_json() -> Message {
    Message::new("not json").with_header("content-type", "application/json")
}

fn is_decode(cause: &Cause) -> bool {
    matches!(cause, Cause::Decode(_))
}

/// The verdicts, causes and attempts of every settlement so far.
fn records(app: &TestApp) -> Vec<(Verdict, bool, u32)> {
    app.settlements()
        .iter()
        .map(|r| (r.verdict, is_decode(&r.cause), r.attempt))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn decode_error_drops_by_default_and_the_loop_goes_on() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").max_attempts(3).dead_letter("q.dead"),
            counting(&calls),
        )
    })
    .await;
    app.publish_message("q", not_json()).await;
    app.publish("q", &5).await;
    settle(&app).await;
    assert_eq!(
        records(&app),
        [(Verdict::Drop, true, 1), (Verdict::Ack, false, 1)]
    );
    assert_eq!(
        settled_with(&app.settlements()[0].plan),
        Some(Settlement::Reject)
    );
    assert_eq!(calls.len(), 1, "the handler ran for the good message only");
    // Dropped: not retried, not dead-lettered, gone.
    assert!(app.messages("q.dead").is_empty());
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn decode_error_skip_acks() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_decode_error(Policy::Skip),
            counting(&calls),
        )
    })
    .await;
    app.publish_message("q", not_json()).await;
    settle(&app).await;
    assert_eq!(records(&app), [(Verdict::Ack, true, 1)]);
    assert_eq!(
        settled_with(&app.settlements()[0].plan),
        Some(Settlement::Accept)
    );
    assert_eq!(calls.len(), 0);
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn decode_error_retry_goes_to_the_cap_then_the_dead_letter() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q")
                .on_decode_error(Policy::Retry)
                .max_attempts(3)
                .dead_letter("q.dead"),
            counting(&calls),
        )
    })
    .await;
    let started = tokio::time::Instant::now();
    app.publish_message("q", not_json()).await;
    settle(&app).await;
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(
        records(&app),
        [
            (Verdict::Retry, true, 1),
            (Verdict::Retry, true, 2),
            (Verdict::Retry, true, 3)
        ]
    );
    assert_eq!(calls.len(), 0);
    let dead = app.messages("q.dead");
    assert_eq!(dead.len(), 1);
    // As it arrived, with why: the decode failure, at attempt 3.
    assert_eq!(
        dead[0].payload,
        not_json().payload,
        "dead-lettered as it arrived"
    );
    let said = |name| dead[0].headers.get_str(name);
    assert_eq!(said(ruststream_core::DEAD_LETTER_REASON), Some("decode"));
    assert_eq!(said(ruststream_core::DEAD_LETTER_ATTEMPT), Some("3"));
    assert!(said(ruststream_core::DEAD_LETTER_ERROR).is_some_and(|e| e.contains("json")));
    for (name, value) in not_json().headers.iter() {
        assert_eq!(
            dead[0].headers.get(name.as_str()),
            Some(value),
            "{name:?} kept"
        );
    }
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn decode_error_retry_after_waits_between_attempts() {
    let calls = Calls::default();
    let app = TestApp::start_with(Capabilities::SETTLES, |b| {
        App::new(b).mount(
            Mount::new("q")
                .on_decode_error(Policy::RetryAfter(D))
                .max_attempts(2)
                .dead_letter("q.dead"),
            counting(&calls),
        )
    })
    .await;
    let started = tokio::time::Instant::now();
    app.publish_message("q", not_json()).await;
    settle(&app).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= D && elapsed < D + Duration::from_millis(100),
        "{elapsed:?}"
    );
    assert_eq!(
        records(&app),
        [
            (Verdict::RetryAfter(D), true, 1),
            (Verdict::RetryAfter(D), true, 2)
        ]
    );
    let dead = app.messages("q.dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].payload, "not json");
    // The copy that made attempt 2 carried retry count 1; the dead letter says attempt 2.
    assert_eq!(dead[0].headers.get_str(ruststream_core::RETRY_COUNT), None);
    assert_eq!(
        dead[0]
            .headers
            .get_str(ruststream_core::DEAD_LETTER_ATTEMPT),
        Some("2")
    );
    app.stop().await.expect("clean stop");
}

/// `fail_fast` on a decode error: the service stops, the handler never runs, the delivery is
/// not settled (back in the queue after the stop) and `stop` reports the failure.
#[tokio::test(start_paused = true)]
async fn decode_error_fail_fast_stops_and_leaves_the_delivery_unsettled() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_decode_error(Policy::FailFast),
            counting(&calls),
        )
    })
    .await;
    app.publish_message("q", not_json()).await;
    app.publish("q", &5).await;
    wait_until("the app stops", || app.is_stopping()).await;
    assert!(app.settlements().is_empty(), "nothing was settled");
    let broker = app.broker().clone();
    let result = within("stop", app.stop()).await;
    match result {
        Err(RunError::FailFast(reason)) => {
            assert!(reason.contains("did not decode"), "{reason}");
        }
        other => panic!("expected a fail_fast error, got {other:?}"),
    }
    assert_eq!(calls.len(), 0, "the next message was not taken either");
    // Both are back: the failed one first, unsettled, then the one never taken.
    assert_eq!(broker.ready("q"), 2);
    let waiting = broker.messages("q");
    assert_eq!(waiting[0], not_json());
    assert_eq!(&waiting[1].payload[..], b"5");
}

/// A transport-level defect (`Delivery::with_defect`) cannot be made through the memory
/// broker's publish; here it is injected by a wrapper broker around it. The handler is not
/// called, even though the payload would decode; the decode policy decides, with the
/// defect as the cause. (The non-JSON payloads above cover the same policy through the
/// codec.)
#[tokio::test(start_paused = true)]
async fn transport_defect_goes_through_the_decode_policy() {
    let calls = Calls::default();
    let app = TestApp::try_start(MemoryBroker::new(), |b| {
        App::new(Faulty::new(b).defect_if(|d| d.headers().get_str("x-test").is_some()))
            .mount(Mount::new("q"), counting(&calls))
            .mount(
                Mount::new("skip").on_decode_error(Policy::Skip),
                counting(&calls),
            )
    })
    .await
    .expect("starts");
    app.publish_message("q", json_message("5")).await;
    app.publish_message("skip", json_message("6")).await;
    app.publish("q", &7).await;
    settle(&app).await;
    let mut seen: Vec<_> = app
        .settlements()
        .iter()
        .map(|r| (r.address.to_string(), r.verdict, r.cause.clone()))
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let defect = Cause::Decode(DEFECT.to_owned());
    assert_eq!(
        seen,
        [
            ("q".to_owned(), Verdict::Drop, defect.clone()),
            ("q".to_owned(), Verdict::Ack, Cause::Handler),
            ("skip".to_owned(), Verdict::Ack, defect),
        ]
    );
    assert_eq!(
        calls.attempts(),
        [1],
        "only the sound delivery reached a handler"
    );
    assert_eq!(calls.all()[0].payload, b"7");
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

/// Panics on the payload 13 (on the first attempt only when `once`), acks otherwise.
fn panicking(calls: &Calls, once: bool) -> impl Fn(Attempt, u32) -> PanicFuture + Clone + use<> {
    let calls = calls.clone();
    move |Attempt(attempt), n| {
        calls.record(attempt, &Default::default(), n.to_string().as_bytes());
        PanicFuture(n == 13 && (attempt == 1 || !once))
    }
}

/// A handler future that panics when polled, if asked to.
struct PanicFuture(bool);

impl std::future::Future for PanicFuture {
    type Output = Outcome;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Outcome> {
        assert!(!self.0, "boom");
        std::task::Poll::Ready(ack())
    }
}

fn panics(app: &TestApp) -> Vec<(Verdict, u32)> {
    app.settlements()
        .iter()
        .filter(|r| matches!(&r.cause, Cause::Panic(m) if m == "boom"))
        .map(|r| (r.verdict, r.attempt))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn panic_fails_fast_by_default() {
    let calls = Calls::default();
    let app = TestApp::start(|b| App::new(b).mount("q", panicking(&calls, false))).await;
    app.publish("q", &13).await;
    app.publish("q", &1).await;
    wait_until("the app stops", || app.is_stopping()).await;
    let broker = app.broker().clone();
    match within("stop", app.stop()).await {
        Err(RunError::FailFast(reason)) => assert!(reason.contains("panicked: boom"), "{reason}"),
        other => panic!("expected a fail_fast error, got {other:?}"),
    }
    assert_eq!(calls.len(), 1, "nothing after the panic was handled");
    assert_eq!(
        broker.ready("q"),
        2,
        "the panicking delivery is back, unsettled"
    );
    assert_eq!(&broker.messages("q")[0].payload[..], b"13");
}

#[tokio::test(start_paused = true)]
async fn panic_skip_acks_and_goes_on() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_panic(Policy::Skip),
            panicking(&calls, false),
        )
    })
    .await;
    app.publish("q", &13).await;
    app.publish("q", &1).await;
    settle(&app).await;
    assert_eq!(panics(&app), [(Verdict::Ack, 1)]);
    assert_eq!(calls.len(), 2, "the next message was handled");
    assert_eq!(app.settlements().len(), 2);
    assert!(app.settlements().iter().all(|r| r.ok));
    assert!(app.broker().is_idle());
    assert!(!app.is_stopping());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn panic_drop_rejects() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_panic(Policy::Drop).max_attempts(5),
            panicking(&calls, false),
        )
    })
    .await;
    app.publish("q", &13).await;
    settle(&app).await;
    assert_eq!(panics(&app), [(Verdict::Drop, 1)]);
    assert_eq!(
        settled_with(&app.settlements()[0].plan),
        Some(Settlement::Reject)
    );
    assert_eq!(calls.len(), 1, "not retried");
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn panic_retry_redelivers() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_panic(Policy::Retry),
            panicking(&calls, true),
        )
    })
    .await;
    app.publish("q", &13).await;
    settle(&app).await;
    assert_eq!(calls.attempts(), [1, 2]);
    assert_eq!(panics(&app), [(Verdict::Retry, 1)]);
    assert_eq!(app.settlements()[1].verdict, Verdict::Ack);
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn panic_retry_after_redelivers_after_the_delay() {
    let calls = Calls::default();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_panic(Policy::RetryAfter(D)),
            panicking(&calls, true),
        )
    })
    .await;
    app.publish("q", &13).await;
    settle(&app).await;
    let all = calls.all();
    assert_eq!(calls.attempts(), [1, 2]);
    let gap = all[1].at - all[0].at;
    assert!(gap >= D && gap < D + Duration::from_millis(50), "{gap:?}");
    assert_eq!(panics(&app), [(Verdict::RetryAfter(D), 1)]);
    app.stop().await.expect("clean stop");
}

/// An extractor that panics: the panic happens before the handler's future exists.
struct Explodes;

impl FromDelivery for Explodes {
    fn from_delivery(_: &Context<'_>) -> Result<Self, ExtractError> {
        panic!("boom");
    }
}

#[tokio::test(start_paused = true)]
async fn panic_while_making_arguments_goes_through_the_panic_policy() {
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_panic(Policy::Skip),
            |_: Explodes, _: u32| async { retry() },
        )
    })
    .await;
    app.publish("q", &1).await;
    settle(&app).await;
    assert_eq!(panics(&app), [(Verdict::Ack, 1)]);
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

/// An extractor that refuses: the decode policy decides, as for a payload.
struct Refuses;

impl FromDelivery for Refuses {
    fn from_delivery(_: &Context<'_>) -> Result<Self, ExtractError> {
        Err(ExtractError::Other("no tenant".into()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusing_extractor_goes_through_the_decode_policy() {
    let app = TestApp::start(|b| {
        App::new(b).mount(
            Mount::new("q").on_decode_error(Policy::Skip),
            |_: Refuses, _: u32| async { retry() },
        )
    })
    .await;
    app.publish("q", &1).await;
    settle(&app).await;
    let seen: Vec<_> = app
        .settlements()
        .iter()
        .map(|r| (r.verdict, r.cause.clone()))
        .collect();
    assert_eq!(seen, [(Verdict::Ack, Cause::Decode("no tenant".into()))]);
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn err_result_drops_and_does_not_retry() {
    let calls = Calls::default();
    let log = calls.clone();
    let app = TestApp::start(|b| {
        App::new(b).mount(
            // A cap and a dead letter are declared: a retry would show.
            Mount::new("q").max_attempts(3).dead_letter("q.dead"),
            move |Attempt(a): Attempt, n: u32| {
                log.record(a, &Default::default(), b"");
                async move {
                    if n == 0 {
                        Err(format!("bad order {n}"))
                    } else {
                        Ok(())
                    }
                }
            },
        )
    })
    .await;
    app.publish("q", &0).await;
    app.publish("q", &1).await;
    settle(&app).await;
    assert_eq!(calls.attempts(), [1, 1], "each handled once");
    let seen: Vec<_> = app
        .settlements()
        .iter()
        .map(|r| (r.verdict, r.cause.clone(), settled_with(&r.plan)))
        .collect();
    assert_eq!(
        seen,
        [
            (Verdict::Drop, Cause::Handler, Some(Settlement::Reject)),
            (Verdict::Ack, Cause::Handler, Some(Settlement::Accept)),
        ]
    );
    assert!(app.messages("q.dead").is_empty());
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn err_outcome_result_settles_with_that_outcome() {
    let calls = Calls::default();
    let log = calls.clone();
    let app = TestApp::start(|b| {
        App::new(b).mount("q", move |Attempt(a): Attempt, _: u32| {
            log.record(a, &Default::default(), b"");
            async move {
                if a < 2 {
                    return Err(retry());
                }
                Ok::<(), Outcome>(())
            }
        })
    })
    .await;
    app.publish("q", &0).await;
    settle(&app).await;
    assert_eq!(calls.attempts(), [1, 2]);
    let verdicts: Vec<_> = app.settlements().iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [Verdict::Retry, Verdict::Ack]);
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

/// A poison message under the default `fail_fast` and a cap: each restart runs the
/// handler once more until the broker's count passes `max_attempts`; then the delivery
/// is dead-lettered before the handler runs, so the crash loop ends after `max_attempts`
/// stops.
#[tokio::test(start_paused = true)]
async fn a_delivery_counted_past_the_cap_is_dead_lettered_without_running_the_handler() {
    let calls = Calls::default();
    let broker = MemoryBroker::new();
    let publisher = ruststream::Publisher::new(broker.publisher());
    publisher.publish("q", &13).await.expect("publish");
    let mut stops = 0;
    for _ in 0..5 {
        let app = App::new(broker.clone()).mount(
            Mount::new("q").max_attempts(3).dead_letter("q.dead"),
            panicking(&calls, false),
        );
        let running = within("start", app.start()).await.expect("start");
        wait_until("handled or dead-lettered", || {
            running.is_stopping() || broker.ready("q.dead") == 1
        })
        .await;
        let stopped = running.is_stopping();
        let result = within("stop", running.stop()).await;
        if !stopped {
            assert!(result.is_ok(), "{result:?}");
            break;
        }
        stops += 1;
        assert!(matches!(result, Err(RunError::FailFast(_))), "{result:?}");
    }
    assert_eq!(stops, 3, "the service stopped once per attempt");
    assert_eq!(
        calls.attempts(),
        [1, 2, 3],
        "the handler ran max_attempts times"
    );
    assert_eq!(broker.ready("q"), 0);
    let dead = broker.messages("q.dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0]
            .headers
            .get_str(ruststream_core::DEAD_LETTER_ATTEMPT),
        Some("4")
    );
}

/// Without a cap there is nothing to meet: the handler runs on every delivery.
#[tokio::test(start_paused = true)]
async fn without_a_cap_a_redelivered_poison_message_runs_the_handler_again() {
    let calls = Calls::default();
    let broker = MemoryBroker::new();
    let publisher = ruststream::Publisher::new(broker.publisher());
    publisher.publish("q", &13).await.expect("publish");
    for _ in 0..4 {
        let app = App::new(broker.clone()).mount("q", panicking(&calls, false));
        let running = within("start", app.start()).await.expect("start");
        wait_until("stopping", || running.is_stopping()).await;
        let _ = within("stop", running.stop()).await;
    }
    assert_eq!(calls.attempts(), [1, 2, 3, 4]);
}
