//! A mount's handler time limit: a handler that runs longer is cancelled and its delivery
//! settled with the timeout policy, on every concurrency.

mod support;

use std::time::Duration;

use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, Outcome, Policy, ack, core::Verdict, settled::Cause};
use support::{COPYING, Calls, wait_until};

/// Hangs on attempt 1 (forever), acks after.
fn hangs_once(
    calls: &Calls,
) -> impl Fn(Attempt, u32) -> std::pin::Pin<Box<dyn Future<Output = Outcome> + Send>> + Clone + use<>
{
    let calls = calls.clone();
    move |Attempt(attempt): Attempt, n: u32| {
        calls.record(attempt, &Default::default(), n.to_string().as_bytes());
        Box::pin(async move {
            if attempt == 1 {
                std::future::pending::<()>().await;
            }
            ack()
        })
    }
}

async fn cancelled_then_retried(mount: Mount) {
    let calls = Calls::default();
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(mount.timeout(Duration::from_secs(2)), hangs_once(&calls))
    })
    .await;
    app.publish("q", &1).await;
    app.publish("q", &2).await;
    wait_until("both retried and handled", || calls.len() == 4).await;
    app.settled().await;
    let records = app.settlements();
    let timeouts = records
        .iter()
        .filter(|r| r.cause == Cause::Timeout(Duration::from_secs(2)))
        .count();
    assert_eq!(timeouts, 2, "{records:?}");
    assert!(
        records
            .iter()
            .filter(|r| r.cause == Cause::Handler)
            .all(|r| r.verdict == Verdict::Ack && r.attempt == 2),
        "{records:?}"
    );
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn a_hung_handler_is_cancelled_and_retried() {
    cancelled_then_retried(Mount::new("q")).await;
}

#[tokio::test(start_paused = true)]
async fn a_hung_handler_is_cancelled_and_retried_with_workers() {
    cancelled_then_retried(Mount::new("q").workers(2)).await;
}

#[tokio::test(start_paused = true)]
async fn a_hung_handler_is_cancelled_and_retried_with_lanes() {
    cancelled_then_retried(Mount::new("q").lanes(2, |d| d.payload().len() as u64)).await;
}

/// The policy says what a timeout counts as: here a drop, and nothing is retried.
#[tokio::test(start_paused = true)]
async fn the_timeout_policy_decides() {
    let calls = Calls::default();
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(
            Mount::new("q")
                .timeout(Duration::from_millis(500))
                .on_timeout(Policy::Drop),
            hangs_once(&calls),
        )
    })
    .await;
    app.publish("q", &1).await;
    wait_until("a settlement", || !app.settlements().is_empty()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(calls.len(), 1);
    let records = app.settlements();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].verdict, Verdict::Drop);
    assert_eq!(records[0].cause, Cause::Timeout(Duration::from_millis(500)));
    app.stop().await.expect("clean stop");
}

/// A handler within its limit is not disturbed, and no limit means none.
#[tokio::test(start_paused = true)]
async fn a_handler_within_its_limit_runs_to_the_end() {
    let calls = Calls::default();
    let slow = {
        let calls = calls.clone();
        move |n: u32| {
            let calls = calls.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(900)).await;
                calls.record(1, &Default::default(), n.to_string().as_bytes());
            }
        }
    };
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(Mount::new("q").timeout(Duration::from_secs(1)), slow)
    })
    .await;
    for n in 0..3 {
        app.publish("q", &n).await;
    }
    wait_until("three handled", || calls.len() == 3).await;
    app.settled().await;
    assert!(
        app.settlements().iter().all(|r| r.cause == Cause::Handler),
        "{:?}",
        app.settlements()
    );
    app.stop().await.expect("clean stop");
}
