//! Graceful stop: what is in flight finishes and is settled; the rest waits.

use std::time::Duration;

use ruststream::{Cause, Verdict, ack};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::recorder;
use crate::service::Service;

/// How long the in-flight handler runs on after the stop is asked.
const HANDLING: Duration = Duration::from_millis(600);

/// A stop asked while a handler runs waits for it, settles its delivery (a later service
/// does not get it again) and takes nothing more: the next message goes to the later
/// service. A subscription that drains (`SubscribeSpec::drain`) may have received the
/// next message already: then the stopping service handles and settles it, at attempt
/// 1, and the later service gets nothing.
pub async fn graceful_stop(h: &impl Harness) {
    let address = h.fresh_address();
    let (started, mut starts) = inbox("handler start");
    let (finished, mut finishes) = inbox("handler end");
    let handler = recorder(started, move |seen| {
        let finished = finished.clone();
        async move {
            tokio::time::sleep(HANDLING).await;
            let _ = finished.send(seen);
            ack()
        }
    });
    let mut service = Service::start(h, |app| app.mount(h.mount(address.clone()), handler)).await;
    publish(h, &service, &address, Message::new("in flight")).await;
    let first = starts.next().await;
    assert!(first.is(b"in flight"), "{}: {first:?}", h.name());
    publish(h, &service, &address, Message::new("waiting")).await;

    service.stop_ok().await;
    let done = finishes.next().await;
    assert!(done.is(b"in flight"), "{}: {done:?}", h.name());
    // An ack settles where the form settles; where it does not (settled on receipt),
    // it is `AckError::Unsupported` (SPEC §2).
    let record = service.settled.next().await;
    assert_eq!(
        (record.verdict, record.cause.clone(), record.ok),
        (Verdict::Ack, Cause::Handler, h.capabilities().settles),
        "{}: the in-flight delivery's settlement: {record:?}",
        h.name()
    );
    // Handled within the stop only where the subscription drains what it received.
    let drained = starts.try_next(Duration::ZERO).await;
    if let Some(waiting) = &drained {
        assert!(
            waiting.is(b"waiting") && waiting.attempt == 1,
            "{}: the stop handled {waiting:?}",
            h.name()
        );
        let done = finishes.next().await;
        assert!(done.is(b"waiting"), "{}: {done:?}", h.name());
        let record = service.settled.next().await;
        assert_eq!(
            (record.verdict, record.ok),
            (Verdict::Ack, h.capabilities().settles),
            "{}: the drained delivery's settlement: {record:?}",
            h.name()
        );
    }
    starts.nothing_for(Duration::ZERO).await;

    if settles(h, "graceful_stop (what comes back)") {
        let (mut later, mut seen) = Service::sink(h, &address).await;
        if drained.is_none() {
            let next = seen.next().await;
            assert!(
                next.is(b"waiting"),
                "{}: the later service got {next:?}, not the message left waiting",
                h.name()
            );
        }
        seen.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    }
}
