//! Dead letters the runtime publishes say why: where the message was received, the
//! attempt it was spent at, the reason, the failure's text, when and by which service;
//! and a dead-letter handler sees it as attempt 1.

mod support;

use std::time::Duration;

use ruststream::testing::TestApp;
use ruststream::{App, Attempt, Mount, Policy, retry};
use ruststream_core::{
    DEAD_LETTER_AT, DEAD_LETTER_ATTEMPT, DEAD_LETTER_ERROR, DEAD_LETTER_FROM, DEAD_LETTER_REASON,
    DEAD_LETTER_SERVICE, Message, RETRY_COUNT,
};
use support::{COPYING, Calls, wait_until};

fn header(message: &Message, name: &str) -> Option<String> {
    message.headers.get_str(name).map(str::to_owned)
}

#[tokio::test(start_paused = true)]
async fn a_spent_retry_says_why_and_is_attempt_one_where_it_lands() {
    let dead = Calls::default();
    let app = TestApp::start_with(COPYING, |b| {
        let dead = dead.clone();
        App::new(b)
            .name("orders-service")
            .mount(
                Mount::new("orders")
                    .max_attempts(3)
                    .dead_letter("orders.dead"),
                |_: u32| async { retry() },
            )
            .mount("orders.dead", move |Attempt(a): Attempt, n: u32| {
                dead.record(a, &Default::default(), n.to_string().as_bytes());
                async {}
            })
    })
    .await;
    app.publish("orders", &7).await;
    wait_until("the dead letter handled", || dead.len() == 1).await;
    assert_eq!(
        dead.attempts(),
        [1],
        "a dead letter is attempt 1 where it is read"
    );
    app.stop().await.expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn every_reason_is_named() {
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b)
            .name("orders-service")
            .mount(
                Mount::new("retried").max_attempts(2).dead_letter("dead"),
                |_: u32| async { retry() },
            )
            .mount(
                Mount::new("undecodable")
                    .dead_letter("dead")
                    .on_decode_error(Policy::Retry),
                |_: u32| async {},
            )
            .mount(
                Mount::new("panicking")
                    .dead_letter("dead")
                    .on_panic(Policy::Retry),
                |n: u32| async move {
                    if n > 0 {
                        panic!("boom: {}", "x".repeat(1000));
                    }
                },
            )
            .mount(
                Mount::new("slow")
                    .dead_letter("dead")
                    .timeout(Duration::from_secs(1)),
                |_: u32| async { std::future::pending::<()>().await },
            )
    })
    .await;
    app.publish("retried", &1).await;
    app.publish("undecodable", "not a number").await;
    app.publish("panicking", &3).await;
    app.publish("slow", &4).await;
    wait_until("four dead letters", || app.messages("dead").len() == 4).await;
    let dead = app.messages("dead");
    let by = |from: &str| {
        dead.iter()
            .find(|m| header(m, DEAD_LETTER_FROM).as_deref() == Some(from))
            .unwrap_or_else(|| panic!("no dead letter from {from}: {dead:?}"))
            .clone()
    };
    let retried = by("retried");
    assert_eq!(
        header(&retried, DEAD_LETTER_REASON).as_deref(),
        Some("retry")
    );
    assert_eq!(header(&retried, DEAD_LETTER_ATTEMPT).as_deref(), Some("2"));
    assert_eq!(header(&retried, DEAD_LETTER_ERROR), None);
    assert_eq!(
        header(&retried, RETRY_COUNT),
        None,
        "the count moved into the attempt"
    );
    assert_eq!(&retried.payload[..], b"1", "the payload as it arrived");
    let undecodable = by("undecodable");
    assert_eq!(
        header(&undecodable, DEAD_LETTER_REASON).as_deref(),
        Some("decode")
    );
    assert!(header(&undecodable, DEAD_LETTER_ERROR).is_some_and(|e| !e.is_empty()));
    assert_eq!(&undecodable.payload[..], b"\"not a number\"");
    let panicking = by("panicking");
    assert_eq!(
        header(&panicking, DEAD_LETTER_REASON).as_deref(),
        Some("panic")
    );
    let error = header(&panicking, DEAD_LETTER_ERROR).expect("the panic's text");
    assert!(
        error.starts_with("boom: xxx") && error.len() <= 256,
        "{}",
        error.len()
    );
    let slow = by("slow");
    assert_eq!(
        header(&slow, DEAD_LETTER_REASON).as_deref(),
        Some("timeout")
    );
    for message in &dead {
        assert_eq!(
            header(message, DEAD_LETTER_SERVICE).as_deref(),
            Some("orders-service")
        );
        let at: u128 = header(message, DEAD_LETTER_AT)
            .and_then(|t| t.parse().ok())
            .expect("a time in milliseconds");
        assert!(at > 1_600_000_000_000, "{at}");
    }
    app.stop().await.expect("clean stop");
}

/// `retry().because(why)`: the last attempt's reason is the dead letter's error.
#[tokio::test(start_paused = true)]
async fn the_reason_of_the_last_retry_is_the_dead_letters_error() {
    let app = TestApp::start_with(COPYING, |b| {
        App::new(b).mount(
            Mount::new("pay").max_attempts(2).dead_letter("pay.dead"),
            |Attempt(a): Attempt, _: u32| async move {
                retry().because(format!("gateway timed out (attempt {a})"))
            },
        )
    })
    .await;
    app.publish("pay", &1).await;
    wait_until("the dead letter", || app.messages("pay.dead").len() == 1).await;
    let dead = &app.messages("pay.dead")[0];
    assert_eq!(header(dead, DEAD_LETTER_REASON).as_deref(), Some("retry"));
    assert_eq!(
        header(dead, DEAD_LETTER_ERROR).as_deref(),
        Some("gateway timed out (attempt 2)")
    );
    app.stop().await.expect("clean stop");
}
