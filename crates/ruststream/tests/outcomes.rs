//! Each outcome, end to end on the memory broker.

mod support;

use std::time::Duration;

use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, Outcome, ack, drop, retry, retry_after};
use ruststream_core::{RETRY_COUNT, Settlement, Verdict};
use support::{COPYING, settled_with};

async fn by_number(Attempt(attempt): Attempt, n: u32) -> Outcome {
    match n {
        0 => ack(),
        1 => drop(),
        2 if attempt < 3 => retry(),
        3 if attempt < 3 => retry_after(Duration::from_secs(10)),
        _ => ack(),
    }
}

#[tokio::test(start_paused = true)]
async fn ack_and_drop_settle_once() {
    let app = TestApp::start(|b| App::new(b).mount("n", by_number)).await;
    app.publish("n", &0).await;
    app.publish("n", &1).await;
    app.settled().await;
    let records = app.settlements();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].verdict, Verdict::Ack);
    assert_eq!(settled_with(&records[0].plan), Some(Settlement::Accept));
    assert_eq!(records[1].verdict, Verdict::Drop);
    assert_eq!(settled_with(&records[1].plan), Some(Settlement::Reject));
    assert!(app.broker().is_idle());
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn retry_on_a_counting_broker_is_the_brokers_requeue() {
    let app = TestApp::start(|b| App::new(b).mount("n", by_number)).await;
    app.publish("n", &2).await;
    app.settled().await;
    let attempts: Vec<_> = app
        .settlements()
        .iter()
        .map(|r| (r.attempt, r.verdict))
        .collect();
    assert_eq!(
        attempts,
        [(1, Verdict::Retry), (2, Verdict::Retry), (3, Verdict::Ack)]
    );
    assert!(
        app.settlements()[..2]
            .iter()
            .all(|r| settled_with(&r.plan) == Some(Settlement::Requeue) && r.plan.copy.is_none())
    );
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn retry_on_a_non_counting_broker_copies_with_the_retry_count() {
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(Mount::new("n").max_attempts(5), by_number)
    })
    .await;
    app.publish("n", &2).await;
    app.settled().await;
    let records = app.settlements();
    let attempts: Vec<_> = records.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    let first = records[0].plan.copy.as_ref().expect("a copy");
    assert_eq!(first.retry_count, Some(1));
    assert_eq!(settled_with(&records[0].plan), Some(Settlement::Remove));
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn retry_after_waits_in_the_process_when_the_broker_cannot_delay() {
    let app = TestApp::start_with(COPYING, |b| App::new(b).mount("n", by_number)).await;
    let started = tokio::time::Instant::now();
    app.publish("n", &3).await;
    app.settled().await;
    assert!(
        started.elapsed() >= Duration::from_secs(20),
        "two delays of 10 s"
    );
    let attempts: Vec<_> = app.settlements().iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn at_the_cap_the_delivery_goes_to_the_dead_letter_as_it_arrived() {
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(
            Mount::new("n").max_attempts(2).dead_letter("n.dead"),
            |_: u32| async { retry() },
        )
    })
    .await;
    app.publish("n", &7).await;
    app.settled().await;
    let dead = app.messages("n.dead");
    assert_eq!(dead.len(), 1);
    // As it arrived (the payload), the retry count moved into the dead-letter attempt:
    // the copy that made attempt 2 carried retry count 1.
    assert_eq!(dead[0].headers.get_str(RETRY_COUNT), None);
    assert_eq!(
        dead[0]
            .headers
            .get_str(ruststream_core::DEAD_LETTER_ATTEMPT),
        Some("2")
    );
    assert_eq!(&dead[0].payload[..], b"7");
    app.stop().await.expect("clean stop");
}
