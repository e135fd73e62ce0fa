//! Settlements the broker does not take: the failure reaches the `after_settle` hook (and
//! is logged), and the loop goes on with the next deliveries.

mod support;

use std::sync::{Arc, Mutex, PoisonError};

use ruststream::memory::MemoryBroker;
use ruststream::testing::TestApp;
use ruststream::{App, Mount, Outcome, Settled, ack, retry, settled::SettleError};
use ruststream_core::{AckError, Address, Broker, Capabilities, PublishErrorKind};
use support::{Calls, Faulty, REFUSAL, queue, wait_until, within};

/// What the `after_settle` hook saw: each settlement's failure, if any, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Kind>>>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Ok,
    Refused(String),
    Unsupported,
    CopyRefused(String),
    Other(String),
}

impl Seen {
    fn hook(&self) -> impl Fn(&Settled) + Send + Sync + 'static + use<> {
        let seen = self.0.clone();
        move |settled: &Settled| {
            let kind = match settled.error() {
                None => Kind::Ok,
                Some(SettleError::Ack(AckError::Refused(why))) => Kind::Refused(why.clone()),
                Some(SettleError::Ack(AckError::Unsupported)) => Kind::Unsupported,
                Some(SettleError::Copy(error)) => match &error.kind {
                    PublishErrorKind::Refused(_) => Kind::CopyRefused(error.address.clone()),
                    other => Kind::Other(other.to_string()),
                },
                Some(other) => Kind::Other(other.to_string()),
            };
            assert_eq!(settled.is_ok(), kind == Kind::Ok);
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(kind);
        }
    }

    fn all(&self) -> Vec<Kind> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn handler(calls: &Calls) -> impl Fn(u32) -> std::future::Ready<Outcome> + Clone + use<> {
    let calls = calls.clone();
    move |n: u32| {
        calls.record(1, &Default::default(), n.to_string().as_bytes());
        std::future::ready(if n == 0 { retry() } else { ack() })
    }
}

fn payloads(calls: &Calls) -> Vec<String> {
    calls
        .all()
        .iter()
        .map(|c| String::from_utf8_lossy(&c.payload).into_owned())
        .collect()
}

/// A broker that refuses one settlement: the refusal reaches the hook, the next deliveries
/// are handled and settled, and the refused delivery stays with the broker, unsettled,
/// until the consumer goes away.
#[tokio::test(start_paused = true)]
async fn a_refused_settlement_is_reported_and_the_loop_goes_on() {
    let calls = Calls::default();
    let seen = Seen::default();
    let app = TestApp::try_start(MemoryBroker::new(), |b| {
        App::new(Faulty::new(b).refuse_settlement_if(|d| &d.payload()[..] == b"2"))
            .mount("q", handler(&calls))
            .after_settle(seen.hook())
    })
    .await
    .expect("starts");
    for n in 1..=4 {
        app.publish("q", &n).await;
    }
    wait_until("four settlements", || seen.all().len() == 4).await;
    assert_eq!(payloads(&calls), ["1", "2", "3", "4"]);
    assert_eq!(
        seen.all(),
        [
            Kind::Ok,
            Kind::Refused(REFUSAL.to_owned()),
            Kind::Ok,
            Kind::Ok
        ]
    );
    let ok: Vec<_> = app.settlements().iter().map(|r| r.ok).collect();
    assert_eq!(ok, [true, false, true, true]);
    let q = queue(app.broker(), "q");
    assert_eq!(
        (q.ready, q.unsettled),
        (0, 1),
        "only the refused one is held"
    );
    assert!(!app.is_stopping());
    let broker = app.broker().clone();
    within("stop", app.stop()).await.expect("clean stop");
    assert_eq!(
        broker.messages("q").len(),
        1,
        "the refused delivery came back"
    );
    assert_eq!(&broker.messages("q")[0].payload[..], b"2");
}

/// A form that cannot settle: every `ack` is `AckError::Unsupported`, reported, and the
/// next delivery is handled all the same.
#[tokio::test(start_paused = true)]
async fn unsupported_settlements_are_reported_and_the_loop_goes_on() {
    let calls = Calls::default();
    let seen = Seen::default();
    let app = TestApp::start_with(Capabilities::NONE, |b| {
        App::new(b)
            .mount("q", handler(&calls))
            .after_settle(seen.hook())
    })
    .await;
    for n in 1..=3 {
        app.publish("q", &n).await;
    }
    wait_until("three settlements", || seen.all().len() == 3).await;
    assert_eq!(payloads(&calls), ["1", "2", "3"]);
    assert_eq!(seen.all(), vec![Kind::Unsupported; 3]);
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

/// A form that counts but cannot requeue, with a cap declared: the counted `retry()` is
/// `AckError::Unsupported`; it is reported and the next delivery is handled.
#[tokio::test(start_paused = true)]
async fn a_retry_the_form_cannot_do_is_reported_and_the_loop_goes_on() {
    let calls = Calls::default();
    let seen = Seen::default();
    let counts_only = Capabilities {
        counts: true,
        ..Capabilities::SETTLES
    };
    let app = TestApp::start_with(counts_only, |b| {
        App::new(b)
            .mount(Mount::new("q").max_attempts(3), handler(&calls))
            .after_settle(seen.hook())
    })
    .await;
    app.publish("q", &0).await;
    app.publish("q", &1).await;
    wait_until("two settlements", || seen.all().len() == 2).await;
    assert_eq!(payloads(&calls), ["0", "1"]);
    assert_eq!(seen.all(), [Kind::Unsupported, Kind::Ok]);
    app.stop().await.expect("clean stop");
}

/// A dead-letter copy the broker refuses: the failure is reported, the original is not
/// removed (a duplicate later, never a loss), and the loop goes on.
#[tokio::test(start_paused = true)]
async fn a_refused_copy_leaves_the_original_and_the_loop_goes_on() {
    let calls = Calls::default();
    let seen = Seen::default();
    let app = TestApp::try_start(
        MemoryBroker::with_capabilities(Capabilities::SETTLES),
        |b| {
            App::new(Faulty::new(b).refuse_publish_to("q.dead"))
                .mount(
                    Mount::new("q").max_attempts(1).dead_letter("q.dead"),
                    handler(&calls),
                )
                .after_settle(seen.hook())
        },
    )
    .await
    .expect("starts");
    app.publish("q", &0).await;
    app.publish("q", &1).await;
    wait_until("two settlements", || seen.all().len() == 2).await;
    assert_eq!(payloads(&calls), ["0", "1"]);
    assert_eq!(
        seen.all(),
        [Kind::CopyRefused("q.dead".to_owned()), Kind::Ok]
    );
    assert!(app.messages("q.dead").is_empty());
    let q = queue(app.broker(), "q");
    assert_eq!((q.ready, q.unsettled), (0, 1), "the original is still held");
    let broker = app.broker().clone();
    app.stop().await.expect("clean stop");
    assert_eq!(broker.messages("q").len(), 1, "the original came back");
    assert_eq!(&broker.messages("q")[0].payload[..], b"0");
}

/// A dead letter that cannot be published (a dead-letter queue that does not exist, a
/// broker away) is owed: tried again with back-off while the original stays unsettled,
/// **without running the handler again**; the service is not ready meanwhile and says
/// why; once the copy is out, the original is settled and the service is ready again.
#[tokio::test(start_paused = true)]
async fn an_unpublishable_dead_letter_is_tried_again_without_running_the_handler() {
    let calls = Calls::default();
    let memory = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let faulty = Faulty::new(memory.clone());
    let outage = faulty.outage();
    let running = App::new(faulty)
        .mount(
            Mount::new("q").max_attempts(1).dead_letter("q.dead"),
            handler(&calls),
        )
        .start()
        .await
        .expect("starts");
    let readiness = running.readiness();
    outage.store(true, std::sync::atomic::Ordering::SeqCst);
    memory
        .publisher()
        .publish(Address::new("q"), ruststream_core::Message::new("0"))
        .await
        .expect("published");
    wait_until("the copy fails", || !readiness.is_ready()).await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    assert_eq!(payloads(&calls), ["0"], "the handler ran once");
    assert_eq!(
        readiness.failing_copies(),
        [(Address::new("q"), Address::new("q.dead"), 1)]
    );
    let q = queue(&memory, "q");
    assert_eq!((q.ready, q.unsettled), (0, 1), "the original is held");
    outage.store(false, std::sync::atomic::Ordering::SeqCst);
    wait_until("the copy is out", || readiness.is_ready()).await;
    wait_until("the original is settled", || {
        queue(&memory, "q").unsettled == 0
    })
    .await;
    assert_eq!(memory.messages("q.dead").len(), 1);
    assert_eq!(memory.ready("q"), 0);
    assert_eq!(payloads(&calls), ["0"]);
    within("stop", running.stop()).await.expect("clean stop");
}

/// A copy that stays unpublishable until a stop is handed back to the broker once the
/// stop's grace period is over: a duplicate later, never a loss.
#[tokio::test(start_paused = true)]
async fn an_owed_copy_still_failing_at_a_stop_hands_the_original_back() {
    let calls = Calls::default();
    let memory = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let running = App::new(Faulty::new(memory.clone()).refuse_publish_to("q.dead"))
        .shutdown_timeout(std::time::Duration::from_secs(2))
        .mount(
            Mount::new("q").max_attempts(1).dead_letter("q.dead"),
            handler(&calls),
        )
        .start()
        .await
        .expect("starts");
    memory
        .publisher()
        .publish(Address::new("q"), ruststream_core::Message::new("0"))
        .await
        .expect("published");
    let readiness = running.readiness();
    wait_until("the copy fails", || !readiness.is_ready()).await;
    within("stop", running.stop()).await.expect("clean stop");
    assert_eq!(payloads(&calls), ["0"]);
    assert_eq!(memory.ready("q"), 1, "the original came back");
    assert!(memory.messages("q.dead").is_empty());
}

/// A dead letter the broker will never take (too large once its headers are added): the
/// original is not lost, and it does not spin either. Each refusal of the same message
/// keeps it unsettled twice as long before it is handed back (1 s, 2 s, 4 s, … up to
/// 5 min), and the messages after it are handled meanwhile. Handed back after 1 s each
/// time, it ran 71 times in these 70 seconds.
#[tokio::test(start_paused = true)]
async fn a_copy_refused_for_good_is_handed_back_later_each_time() {
    let calls = Calls::default();
    let seen = Seen::default();
    let memory = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let running = App::new(Faulty::new(memory.clone()).too_large_for("q.dead"))
        .mount(
            Mount::new("q").max_attempts(1).dead_letter("q.dead"),
            handler(&calls),
        )
        .after_settle(seen.hook())
        .start()
        .await
        .expect("starts");
    let publisher = memory.publisher();
    for n in ["0", "1"] {
        publisher
            .publish(Address::new("q"), ruststream_core::Message::new(n))
            .await
            .expect("published");
    }
    wait_until("the first refusal and the next message", || {
        seen.all().len() == 2
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(70)).await;
    let runs = payloads(&calls).iter().filter(|p| *p == "0").count();
    // Handled at 0 s, then handed back after 1, 2, 4, 8, 16 and 32 s: at 1, 3, 7, 15, 31
    // and 63 s.
    assert_eq!(runs, 7, "{:?}", payloads(&calls));
    assert_eq!(payloads(&calls).iter().filter(|p| *p == "1").count(), 1);
    assert!(seen.all().contains(&Kind::Ok));
    assert!(memory.messages("q.dead").is_empty());
    let q = queue(&memory, "q");
    assert_eq!((q.ready, q.unsettled), (0, 1), "the original is still held");
    within("stop", running.stop()).await.expect("clean stop");
    assert_eq!(memory.ready("q"), 1, "the original came back");
}

/// A delayed retry copy published from the process (`retry_after` where the form has no
/// delays of its own) that the broker is known to refuse for good
/// ([`Publish::check`](ruststream_core::Publish::check): too large once the retry count
/// is added). Settling the original first would leave the copy as the only trace of the
/// message, and a copy that never goes out is lost at the next stop. So the original is
/// kept with the broker, handed back later each time as for an immediate copy refused,
/// and it is still there after the stop. Without the check it ran once, was settled, and
/// the stop gave its copy up.
#[tokio::test(start_paused = true)]
async fn a_delayed_copy_known_to_be_refused_keeps_its_original() {
    let calls = Calls::default();
    let seen = Seen::default();
    let memory = MemoryBroker::with_capabilities(Capabilities::SETTLES);
    let running = App::new(Faulty::new(memory.clone()).too_large_for("q"))
        .shutdown_timeout(std::time::Duration::from_secs(2))
        .mount(Mount::new("q"), {
            let calls = calls.clone();
            move |n: u32| {
                calls.record(1, &Default::default(), n.to_string().as_bytes());
                std::future::ready(ruststream::retry_after(std::time::Duration::from_secs(30)))
            }
        })
        .after_settle(seen.hook())
        .start()
        .await
        .expect("starts");
    memory
        .publisher()
        .publish(Address::new("q"), ruststream_core::Message::new("0"))
        .await
        .expect("published");
    wait_until("the refusal", || !seen.all().is_empty()).await;
    assert_eq!(
        seen.all()[0],
        Kind::Other("message too large (1 bytes, limit 0)".into())
    );
    let q = queue(&memory, "q");
    assert_eq!((q.ready, q.unsettled), (0, 1), "the original is held");
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    // Handled at 0 s, handed back after 1, 2 and 4 s: at 1, 3 and 7 s.
    assert_eq!(payloads(&calls), ["0"; 4]);
    within("stop", running.stop()).await.expect("clean stop");
    assert_eq!(memory.ready("q"), 1, "the original came back");
}
