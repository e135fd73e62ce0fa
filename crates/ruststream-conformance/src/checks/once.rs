//! The inbox on the form: a message delivered twice is handled once.

use ruststream::{ack, core::Verdict};
use ruststream_core::{MESSAGE_ID, Message};
use ruststream_inbox::Inbox as HandledOnce;
use ruststream_inbox::sqlx;

use super::publish;
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::recorder;
use crate::service::Service;

/// A message published twice with one `message-id` (a producer that retried a publish,
/// an outbox relay that crashed after publishing) reaches a mount with the
/// [inbox](ruststream_inbox) twice: the handler runs once, both deliveries are
/// acknowledged (on a form that settles), and neither comes back. Needs PostgreSQL for the inbox
/// (`RUSTSTREAM_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`).
pub async fn delivered_twice_handled_once(h: &impl Harness) {
    let address = h.fresh_address();
    let (pool, table) = (
        crate::postgres::pool().await,
        crate::postgres::unique("conformance_inbox"),
    );
    let handled_once = HandledOnce::with_table(pool.clone(), &table)
        .await
        .unwrap_or_else(|e| panic!("{}: the inbox table: {e}", h.name()));
    let (outbox, mut seen) = inbox("delivery");
    let mount = h.mount(address.clone()).layer(handled_once.clone());
    let mut service = Service::start(h, |app| {
        app.mount(mount, recorder(outbox, |_| async { ack() }))
    })
    .await;
    let payload = b"{\"order\":7}";
    for _ in 0..2 {
        let message = Message::new(&payload[..]).with_header(MESSAGE_ID, "conformance-once");
        publish(h, &service, &address, message).await;
    }
    let first = seen.next().await;
    assert!(first.is(payload), "{}: {first:?}", h.name());
    // The copy is never delivered where the broker keeps one message per id.
    let deliveries = if h.drops_repeated_publishes() {
        crate::report::not_applicable(
            h.name(),
            "delivered_twice_handled_once (the copy)",
            "the broker stores a publish with a message-id it has stored once only",
        );
        1
    } else {
        2
    };
    // A form that does not settle answers `ack()` with `Unsupported` (SPEC §2).
    let settles = h.capabilities().settles;
    for n in 1..=deliveries {
        let settled = service.settled.next().await;
        assert!(
            settled.verdict == Verdict::Ack && (settled.ok || !settles),
            "{}: delivery {n} of {deliveries} settled as {settled:?}",
            h.name()
        );
    }
    seen.nothing_for(h.quiet()).await;
    assert_eq!(
        handled_once.duplicates(),
        deliveries as u64 - 1,
        "{}: the copy acknowledged by the inbox",
        h.name()
    );
    service.stop_ok().await;
    let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
        .execute(&pool)
        .await;
}
