//! Graceful stop: what is in flight finishes and is settled; the rest waits.

use std::time::Duration;

use ruststream::{ack, core::Verdict, settled::Cause};
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
/// service, unless the subscription drains ([`Harness::drains`]) and the broker had
/// already handed it over: then the stopping service handles and settles it.
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
    // A subscription that drains hands the stopping service what the broker had already
    // handed over: the message published before the stop, if it had arrived, is handled
    // and settled there, and the later service does not get it again.
    let drained = if h.drains() {
        // The stop returned: whatever the stopping service handled has started.
        starts.try_next(Duration::ZERO).await.inspect(|seen| {
            assert!(
                seen.is(b"waiting") && seen.attempt == 1,
                "{}: the stop handled {seen:?}",
                h.name()
            );
        })
    } else {
        None
    };
    if drained.is_some() {
        let done = finishes.next().await;
        assert!(done.is(b"waiting"), "{}: {done:?}", h.name());
        let record = service.settled.next().await;
        assert_eq!(
            (record.verdict, record.ok),
            (Verdict::Ack, true),
            "{}: the drained delivery's settlement: {record:?}",
            h.name()
        );
    }
    starts.nothing_for(Duration::ZERO).await;

    if drained.is_some() && settles(h, "graceful_stop (nothing comes back)") {
        let (mut later, mut seen) = Service::sink(h, &address).await;
        seen.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    } else if settles(h, "graceful_stop (what comes back)") {
        let (mut later, mut seen) = Service::sink(h, &address).await;
        let next = seen.next().await;
        assert!(
            next.is(b"waiting"),
            "{}: the later service got {next:?}, not the message left waiting",
            h.name()
        );
        seen.nothing_for(h.quiet()).await;
        later.stop_ok().await;
    }
}
