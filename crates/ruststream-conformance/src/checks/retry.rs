//! Retries: the attempt cap and the dead letter, and delayed redelivery.

use std::time::Duration;

use ruststream::{ack, retry, retry_after};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::{Inbox, inbox};
use crate::recorder::{Seen, acking, recorder};
use crate::service::Service;

/// The delay asked with `retry_after`.
const DELAY: Duration = Duration::from_millis(500);

/// How much later than asked a delayed redelivery may come.
const SLACK: Duration = Duration::from_secs(5);

/// A handler that always retries under `max_attempts(3)` and a dead letter sees attempts
/// 1, 2 and 3; then the dead letter gets the message as it arrived, and nothing more
/// comes back.
pub async fn retry_attempts_then_dead_letter(h: &impl Harness) {
    if !settles(h, "retry_attempts_then_dead_letter") {
        return;
    }
    let (address, dead) = (h.fresh_address(), h.fresh_address());
    let (outbox, mut attempts) = inbox("attempt");
    let (dead_outbox, mut dead_letters) = inbox("dead letter");
    let mount = h
        .mount(address.clone())
        .max_attempts(3)
        .dead_letter(dead.clone());
    let mut service = Service::start(h, |app| {
        app.mount(mount, recorder(outbox, |_| async { retry() }))
            .mount(h.mount(dead), acking(dead_outbox))
    })
    .await;
    let payload = b"{\"order\":7}";
    let message = Message::new(&payload[..]).with_header("x-conformance", "retried");
    publish(h, &service, &address, message).await;

    for expected in 1..=3 {
        let got = attempts.next().await;
        assert!(got.is(payload), "{}: attempt {expected}: {got:?}", h.name());
        assert_eq!(got.attempt, expected, "{}: attempt number", h.name());
    }
    let dead = dead_letters.next().await;
    assert!(
        dead.is(payload),
        "{}: dead letter payload: {dead:?}",
        h.name()
    );
    assert_eq!(
        dead.headers.get_str("x-conformance"),
        Some("retried"),
        "{}: dead letter headers",
        h.name()
    );
    attempts.nothing_for(h.quiet()).await;
    dead_letters.nothing_for(Duration::ZERO).await;
    service.stop_ok().await;
}

/// `retry_after(d)` brings the delivery back no sooner than `d` and not much later: on
/// every form, one that does not settle included (its retry is the runtime's copy,
/// SPEC §2's at-most-once table).
pub async fn retry_after_delays(h: &impl Harness) {
    let (first, second, mut attempts, mut service) = delayed_once(h, DELAY, SLACK).await;
    let waited = second.at.duration_since(first.at);
    assert!(
        waited >= DELAY,
        "{}: redelivered after {waited:?}, before the {DELAY:?} asked",
        h.name()
    );
    assert!(
        waited <= DELAY + SLACK,
        "{}: redelivered after {waited:?}, over {SLACK:?} later than asked",
        h.name()
    );
    attempts.nothing_for(h.quiet()).await;
    service.stop_ok().await;
}

/// A `retry_after` longer than the longest delay the form's own delayed redelivery
/// honours ([`Capabilities::max_delay`](ruststream_core::Capabilities::max_delay)) is
/// still honoured: the delivery comes back no sooner than asked (the runtime's copy, not
/// the form's shorter mechanism), as attempt 2.
pub async fn retry_after_beyond_native_bound(h: &impl Harness) {
    const CHECK: &str = "retry_after_beyond_native_bound";
    if !settles(h, CHECK) {
        return;
    }
    let caps = h.capabilities();
    let Some(bound) = caps.max_delay() else {
        crate::report::not_applicable(
            h.name(),
            CHECK,
            "the form has no delayed redelivery of its own with a bound",
        );
        return;
    };
    if bound > LONGEST_BOUND {
        crate::report::not_applicable(
            h.name(),
            CHECK,
            "the form's bound is too long to wait past in a test",
        );
        return;
    }
    let delay = bound * 2 + Duration::from_millis(500);
    let (first, second, mut attempts, mut service) = delayed_once(h, delay, SLACK).await;
    let waited = second.at.duration_since(first.at);
    assert!(
        waited >= delay,
        "{}: redelivered after {waited:?}, before the {delay:?} asked (the form's bound is {bound:?})",
        h.name()
    );
    attempts.nothing_for(h.quiet()).await;
    service.stop_ok().await;
}

/// The longest bound [`retry_after_beyond_native_bound`] waits past (a RabbitMQ delay
/// queue's is days).
const LONGEST_BOUND: Duration = Duration::from_secs(30);

/// Starts a service whose handler answers attempt 1 with `retry_after(delay)` and acks
/// after; publishes one message; returns its first two attempts (the second within
/// `delay + slack`), the attempts still to come and the service.
async fn delayed_once(
    h: &impl Harness,
    delay: Duration,
    slack: Duration,
) -> (Seen, Seen, Inbox<Seen>, Service) {
    let address = h.fresh_address();
    let (outbox, mut attempts) = inbox("attempt");
    let handler = recorder(outbox, move |seen| async move {
        if seen.attempt == 1 {
            retry_after(delay)
        } else {
            ack()
        }
    });
    let service = Service::start(h, |app| app.mount(h.mount(address.clone()), handler)).await;
    publish(h, &service, &address, Message::new("later")).await;
    let first = attempts.next().await;
    assert!(first.is(b"later"), "{}: {first:?}", h.name());
    let second = attempts.next_within(delay + slack).await;
    assert!(second.is(b"later"), "{}: {second:?}", h.name());
    assert_eq!(
        second.attempt,
        2,
        "{}: the redelivery is attempt 2",
        h.name()
    );
    (first, second, attempts, service)
}
