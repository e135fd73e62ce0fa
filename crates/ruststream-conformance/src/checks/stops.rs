//! What a graceful stop must not cost: an attempt of a message it never handled, or a
//! delayed retry waiting when it came.

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream::{ack, core::Verdict, retry_after};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::{Seen, acking, recorder};
use crate::service::Service;

/// How many messages wait while the services stop.
const WAITING: usize = 24;

/// How many services are stopped before the last one handles the rest.
const STOPS: usize = 3;

/// How long each delivery is handled: long enough for the stop to find deliveries the
/// broker has handed over and the handler has not started.
const HANDLING: Duration = Duration::from_millis(40);

/// The delay [`stop_during_delay`] asks.
const DELAY: Duration = Duration::from_secs(2);

/// Messages wait while three services in a row (`max_attempts(3)` and a dead letter) are
/// stopped gracefully mid-stream, each after handling at least one; a fourth handles the
/// rest. Every message is handled once, each at attempt 1, and none is dead-lettered: a
/// stop hands back what it did not handle without counting it (a broker that counted
/// deliveries handed over and never handled would, after a few deploys, dead-letter
/// messages no handler saw fail).
pub async fn stop_spends_no_attempt(h: &impl Harness) {
    if !settles(h, "stop_spends_no_attempt") {
        return;
    }
    let (address, dead) = (h.fresh_address(), h.fresh_address());
    let (outbox, mut seen) = inbox("delivery");
    let (dead_outbox, mut dead_letters) = inbox("dead letter");
    let handler = recorder(outbox, |_| async {
        tokio::time::sleep(HANDLING).await;
        ack()
    });
    let mut handled: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
    for stop in 0..=STOPS {
        let mut service = Service::start(h, |app| {
            let mount = h
                .mount(address.clone())
                .max_attempts(3)
                .dead_letter(dead.clone());
            let app = app.mount(mount, handler.clone());
            if stop == 0 {
                app.mount(h.mount(dead.clone()), acking(dead_outbox.clone()))
            } else {
                app
            }
        })
        .await;
        if stop == 0 {
            for n in 0..WAITING {
                publish(h, &service, &address, Message::new(format!("waiting {n}"))).await;
            }
        }
        if stop < STOPS {
            // A service that drained may have handled every message already.
            if handled.len() < WAITING {
                note(&mut handled, seen.next().await);
            }
            service.stop_ok().await;
            // What the stop handled started before it returned.
            while let Some(more) = seen.try_next(Duration::ZERO).await {
                note(&mut handled, more);
            }
        } else {
            while handled.len() < WAITING {
                note(&mut handled, seen.next().await);
            }
            seen.nothing_for(h.quiet()).await;
            service.stop_ok().await;
        }
    }
    let spent: Vec<_> = handled
        .iter()
        .filter(|(_, attempts)| attempts.as_slice() != [1])
        .map(|(payload, attempts)| (String::from_utf8_lossy(payload).into_owned(), attempts))
        .collect();
    assert!(
        spent.is_empty(),
        "{}: after {STOPS} graceful stops, messages handled more than once or past \
         attempt 1 (payload, attempts): {spent:?}",
        h.name()
    );
    dead_letters.nothing_for(Duration::ZERO).await;
}

/// Notes the attempt a handler saw a message at, under its payload.
fn note(handled: &mut BTreeMap<Vec<u8>, Vec<u32>>, seen: Seen) {
    handled
        .entry(seen.payload.to_vec())
        .or_default()
        .push(seen.attempt);
}

/// A service is stopped gracefully while a `retry_after(2 s)` of its delivery waits; the
/// next service on the address gets the message as attempt 2 (no sooner than asked on a
/// form with delayed redelivery of its own; a form whose copies wait in the process
/// publishes them at the stop), once. Not applicable to a form that does not settle.
pub async fn stop_during_delay(h: &impl Harness) {
    // A form that does not settle has nothing waiting at the broker: the copy a stop
    // publishes reaches only the subscribers of that moment.
    if !settles(h, "stop_during_delay") {
        return;
    }
    let address = h.fresh_address();
    let (outbox, mut attempts) = inbox("attempt");
    let handler = recorder(outbox, |seen| async move {
        if seen.attempt == 1 {
            retry_after(DELAY)
        } else {
            ack()
        }
    });
    let mut first_service = Service::start(h, |app| {
        app.mount(h.mount(address.clone()), handler.clone())
    })
    .await;
    publish(h, &first_service, &address, Message::new("delayed")).await;
    let first = attempts.next().await;
    assert!(
        first.is(b"delayed") && first.attempt == 1,
        "{}: {first:?}",
        h.name()
    );
    let settled = first_service.settled.next().await;
    assert_eq!(
        settled.verdict,
        Verdict::RetryAfter(DELAY),
        "{}: {settled:?}",
        h.name()
    );
    first_service.stop_ok().await;
    attempts.nothing_for(Duration::ZERO).await;

    let mut next_service =
        Service::start(h, |app| app.mount(h.mount(address.clone()), handler)).await;
    let again = attempts
        .next_within(DELAY * 4 + Duration::from_secs(10))
        .await;
    assert!(
        again.is(b"delayed") && again.attempt == 2,
        "{}: after the stop the next service got {again:?}, not the delayed retry as \
         attempt 2",
        h.name()
    );
    // The form's own delay keeps the time; a copy waiting in the process (no delay of
    // the form's own, or one past its bound) is published at the stop.
    let caps = h.capabilities();
    if caps.delays_for(DELAY) {
        let waited = again.at.duration_since(first.at);
        assert!(
            waited >= DELAY,
            "{}: the delayed retry came back after {waited:?}, before the {DELAY:?} asked",
            h.name()
        );
    }
    attempts.nothing_for(h.quiet()).await;
    next_service.stop_ok().await;
}
