//! What the runtime relies on when a settlement cannot be carried out: a delivery given
//! back unsettled (`Acker::abandon`) comes back, and the subscription keeps receiving.

use ruststream::{ack, retry};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::{WAIT, inbox};
use crate::recorder::recorder;
use crate::service::Service;

/// More failed copies than any prefetch or credit: 300 (AMQP's default credit is 256,
/// a sequential Redis mount reads 65).
const POISON: usize = 300;

/// A dead letter that cannot be published leaves each spent delivery unsettled; the
/// runtime gives it back. With more of them than the subscription's credit or prefetch,
/// the subscription must still receive: the spent ones come back (none is lost, none is
/// stuck holding credit), past the first 300.
///
/// A message published after them is not required to get through: a broker that puts a
/// given-back delivery back at the head of its queue (RabbitMQ's classic queues) keeps
/// serving the spent ones first for as long as their dead letter cannot be published.
/// The check says whether it did.
pub async fn failed_copy_gives_back(h: &impl Harness) {
    const CHECK: &str = "failed_copy_gives_back";
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
        .dead_letter(unpublishable);
    let handler = recorder(outbox, |seen| async move {
        if seen.is(b"good") { ack() } else { retry() }
    });
    let mut service = Service::start(h, |app| app.mount(mount, handler)).await;
    for _ in 0..POISON {
        publish(h, &service, &address, Message::new("poison")).await;
    }
    publish(h, &service, &address, Message::new("good")).await;

    // Everything is seen once, the good message included, within a bound that does not
    // grow with a stalled link: the poison comes back again and again meanwhile.
    let deadline = tokio::time::Instant::now() + WAIT * 3;
    let (mut poison, mut good, mut again) = (0usize, 0usize, 0usize);
    while again == 0 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(next) = seen.try_next(left).await else {
            panic!(
                "{}: after {POISON} failed copies the subscription stalled: {poison} poison \
                 deliveries, good {good}, back again {again}",
                h.name()
            );
        };
        if next.is(b"good") {
            good += 1;
        } else {
            poison += 1;
            if poison > POISON {
                again += 1;
            }
        }
    }
    // Give the good message a moment more to show, for the report.
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    while good == 0 {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        match seen.try_next(left).await {
            Some(next) if next.is(b"good") => good += 1,
            Some(_) => {}
            None => break,
        }
    }
    eprintln!(
        "{}: {CHECK}: {poison} spent deliveries seen ({again} back again); a later message {}",
        h.name(),
        if good > 0 {
            "got through"
        } else {
            "waited behind them"
        }
    );
    service.stop_ok().await;
}
