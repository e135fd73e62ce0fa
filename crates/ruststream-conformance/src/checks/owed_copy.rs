//! A copy that cannot be published is owed: the runtime tries it again with back-off
//! while the original stays unsettled, and the handler does not run again.

use std::time::Duration;

use ruststream::{ack, retry};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::{WAIT, inbox};
use crate::recorder::recorder;
use crate::service::Service;

/// Spent deliveries whose dead letter cannot be published.
const POISON: usize = 3;

/// How long the check watches for a handler that runs again.
const QUIET: Duration = Duration::from_secs(3);

/// A dead letter that cannot be published (a queue that does not exist): each spent
/// delivery's handler runs **once**, its copy is tried again in the background while the
/// original stays unsettled, the service is not ready and says which copies fail, and a
/// later message still gets through. At the stop the originals are given back: a second
/// service sees every one of them (none lost).
pub async fn failed_copy_is_owed(h: &impl Harness) {
    const CHECK: &str = "failed_copy_is_owed";
    if !settles(h, CHECK) {
        return;
    }
    let Some(unpublishable) = h.unpublishable_address() else {
        crate::report::not_applicable(
            h.name(),
            CHECK,
            "the broker takes a publish to any address (no unpublishable address)",
        );
        return;
    };
    let address = h.fresh_address();
    let (outbox, mut seen) = inbox("delivery");
    let mount = h
        .mount(address.clone())
        .max_attempts(1)
        .dead_letter(unpublishable.clone());
    let handler = recorder(outbox, |seen| async move {
        if seen.is(b"good") { ack() } else { retry() }
    });
    let mut service = Service::start(h, |app| app.mount(mount, handler)).await;
    for _ in 0..POISON {
        publish(h, &service, &address, Message::new("poison")).await;
    }
    publish(h, &service, &address, Message::new("good")).await;

    let (mut poison, mut good) = (0usize, 0usize);
    while poison < POISON || good == 0 {
        let next = seen.next().await;
        if next.is(b"good") {
            good += 1;
        } else {
            poison += 1;
        }
    }
    // The handler does not run again while the copies are owed.
    seen.nothing_for(QUIET).await;
    assert_eq!(
        (poison, good),
        (POISON, 1),
        "{}: each delivery handled once",
        h.name()
    );
    let readiness = service.readiness();
    assert!(
        !readiness.is_ready(),
        "{}: ready with copies failing",
        h.name()
    );
    let failing: usize = readiness
        .failing_copies()
        .iter()
        .filter(|(from, to, _)| *from == address && *to == unpublishable)
        .map(|(_, _, n)| n)
        .sum();
    assert_eq!(failing, POISON, "{}: the failing copies", h.name());
    service.stop_ok().await;

    // Given back at the stop: a second service (without the broken dead letter) sees
    // every spent delivery again.
    let (outbox, mut again) = inbox("delivery after the stop");
    let mut after = Service::start(h, |app| {
        app.mount(
            h.mount(address.clone()),
            recorder(outbox, |_| async { ack() }),
        )
    })
    .await;
    let mut back = 0;
    while back < POISON {
        let next = again.next_within(WAIT).await;
        assert!(next.is(b"poison"), "{}: {next:?}", h.name());
        back += 1;
    }
    after.stop_ok().await;
}
