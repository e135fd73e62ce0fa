//! `ack` and `drop` take the delivery out for good.

use ruststream::{core::Verdict, drop};
use ruststream_core::Message;

use super::{publish, settles};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::recorder;
use crate::service::Service;

/// A delivery the handler acknowledges is gone: a second service started on the address
/// afterwards gets nothing.
pub async fn ack_removes(h: &impl Harness) {
    if !settles(h, "ack_removes") {
        return;
    }
    let address = h.fresh_address();
    let (mut first, mut seen) = Service::sink(h, &address).await;
    publish(h, &first, &address, Message::new("acked")).await;
    let got = seen.next().await;
    assert!(got.is(b"acked"), "{}: got {got:?}", h.name());
    let record = first.settled.next().await;
    assert_eq!(record.verdict, Verdict::Ack);
    assert!(
        record.ok,
        "{}: the broker refused the ack: {record:?}",
        h.name()
    );
    first.stop_ok().await;

    let (mut second, mut again) = Service::sink(h, &address).await;
    again.nothing_for(h.quiet()).await;
    second.stop_ok().await;
}

/// A delivery the handler drops is not redelivered to the subscription (whatever the
/// broker's dead-letter policy then does with it).
pub async fn drop_not_redelivered(h: &impl Harness) {
    if !settles(h, "drop_not_redelivered") {
        return;
    }
    let address = h.fresh_address();
    let (outbox, mut seen) = inbox("delivery");
    let mut service = Service::start(h, |app| {
        app.mount(
            h.mount(address.clone()),
            recorder(outbox, |_| async { drop() }),
        )
    })
    .await;
    publish(h, &service, &address, Message::new("dropped")).await;
    let got = seen.next().await;
    assert!(got.is(b"dropped"), "{}: got {got:?}", h.name());
    let record = service.settled.next().await;
    assert_eq!(record.verdict, Verdict::Drop);
    assert!(
        record.ok,
        "{}: the broker refused the drop: {record:?}",
        h.name()
    );
    seen.nothing_for(h.quiet()).await;
    service.stop_ok().await;
}
