//! Failure policies: payloads that do not decode, handlers that panic.

use ruststream::core::CONTENT_TYPE;
use ruststream::{Attempt, Policy, RunError, ack, core::Verdict, settled::Cause};
use ruststream_core::Message;

use super::{Numbered, publish, sent, settles};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::{Seen, recorder};
use crate::service::Service;

/// The payload the panicking handlers panic on.
const BOOM: &[u8] = b"boom";

/// Panics on [`BOOM`], acknowledges anything else.
async fn panic_on_boom(seen: Seen) -> ruststream::Outcome {
    if seen.is(BOOM) {
        panic!("deliberate panic of a conformance check");
    }
    ack()
}

/// A payload that does not decode is dropped by the default policy and the next one is
/// handled; the dropped one does not come back to a later service.
pub async fn decode_failure_drops(h: &impl Harness) {
    let address = h.fresh_address();
    let (outbox, mut handled) = inbox("decoded delivery");
    let handler = move |Attempt(attempt): Attempt, item: Numbered| {
        let outbox = outbox.clone();
        async move {
            let _ = outbox.send((item, attempt));
            ack()
        }
    };
    let mut service = Service::start(h, |app| app.mount(h.mount(address.clone()), handler)).await;
    let bad = Message::new("this is not json").with_header(CONTENT_TYPE, "application/json");
    publish(h, &service, &address, bad).await;
    let publisher = service.publisher();
    sent(
        h,
        &address,
        publisher.publish(address.clone(), &Numbered { n: 2 }),
    )
    .await;

    let (item, attempt) = handled.next().await;
    assert_eq!((item.n, attempt), (2, 1), "{}: the loop went on", h.name());
    // Two settlements, in the order the broker confirmed them (not always the order of
    // the deliveries: settlements may be under way side by side).
    let settled = [service.settled.next().await, service.settled.next().await];
    assert!(
        settled
            .iter()
            .any(|r| matches!(r.cause, Cause::Decode(_)) && r.verdict == Verdict::Drop),
        "{}: the decode failure policy: {settled:?}",
        h.name()
    );
    handled.nothing_for(h.quiet()).await;
    service.stop_ok().await;

    if settles(h, "decode_failure_drops (not redelivered)") {
        let (mut later, mut seen) = Service::sink(h, &address).await;
        seen.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    }
}

/// A handler that panics under `Policy::Skip` has its delivery acknowledged and the
/// next one is handled; the acknowledged one does not come back to a later service.
pub async fn panic_skip_acks(h: &impl Harness) {
    let address = h.fresh_address();
    let (outbox, mut seen) = inbox("delivery");
    let mount = h.mount(address.clone()).on_panic(Policy::Skip);
    let mut service =
        Service::start(h, |app| app.mount(mount, recorder(outbox, panic_on_boom))).await;
    publish(h, &service, &address, Message::new(BOOM)).await;
    publish(h, &service, &address, Message::new("fine")).await;

    // Both handled, in whatever order the broker hands them over (a Kafka topic of
    // several partitions keeps no order between them).
    let handled = [seen.next().await, seen.next().await];
    assert!(
        handled.iter().any(|s| s.is(BOOM)) && handled.iter().any(|s| s.is(b"fine")),
        "{}: the loop went on: {handled:?}",
        h.name()
    );
    // Two settlements, in the order the broker confirmed them (not always the order of
    // the deliveries: settlements may be under way side by side).
    let settled = [service.settled.next().await, service.settled.next().await];
    assert!(
        settled
            .iter()
            .any(|r| matches!(r.cause, Cause::Panic(_)) && r.verdict == Verdict::Ack),
        "{}: the panic policy: {settled:?}",
        h.name()
    );
    seen.nothing_for(h.quiet()).await;
    service.stop_ok().await;

    if settles(h, "panic_skip_acks (not redelivered)") {
        let (mut later, mut again) = Service::sink(h, &address).await;
        again.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    }
}

/// A panic under the default `fail_fast` stops the service, `stop` returns
/// `RunError::FailFast`, and the delivery, left unsettled, comes back to a new service.
pub async fn fail_fast_redelivers(h: &impl Harness) {
    let address = h.fresh_address();
    let (outbox, mut seen) = inbox("delivery");
    let mut service = Service::start(h, |app| {
        app.mount(h.mount(address.clone()), recorder(outbox, panic_on_boom))
    })
    .await;
    publish(h, &service, &address, Message::new(BOOM)).await;
    let boom = seen.next().await;
    assert!(boom.is(BOOM), "{}: {boom:?}", h.name());
    service.stopping().await;
    match service.stop().await {
        Err(RunError::FailFast(_)) => {}
        other => panic!("{}: stop returned {other:?}, not FailFast", h.name()),
    }
    service.settled.nothing_for(std::time::Duration::ZERO).await;

    if settles(h, "fail_fast_redelivers (redelivery)") {
        let (mut later, mut again) = Service::sink(h, &address).await;
        let back = again.next().await;
        assert!(back.is(BOOM), "{}: {back:?}", h.name());
        again.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    }
}
