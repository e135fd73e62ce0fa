//! Key order through retries, where the form keeps it: a retried message is handled
//! again before the later messages of its key, and other keys do not wait for it.

use std::time::Duration;

use ruststream::{ack, retry, retry_after};
use ruststream_core::Message;

use super::publish;
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::recorder;
use crate::service::Service;

/// The delay of the first retry: long enough that another key's messages, published
/// right after, are handled within it.
const DELAY: Duration = Duration::from_millis(800);

/// `a1`, `b1`, `a2` (keys `a`, `b`, `a`), with `a1` retried after a delay and then at
/// once before it is acknowledged: key `a` is handled `a1` ×3 then `a2`; `b1` is handled
/// while `a1` waits, not after it.
pub async fn key_order_through_retries(h: &impl Harness) {
    let Some(key) = h.key_header() else {
        crate::report::not_applicable(
            h.name(),
            "key_order_through_retries",
            "the form keeps no key order",
        );
        return;
    };
    let address = h.fresh_address();
    let (outbox, mut seen) = inbox("handling");
    let mount = h.mount(address.clone()).max_attempts(5);
    let mut service = Service::start(h, |app| {
        app.mount(
            mount,
            recorder(outbox, |seen| async move {
                match (seen.payload.as_ref(), seen.attempt) {
                    (b"a1", 1) => retry_after(DELAY),
                    (b"a1", 2) => retry(),
                    _ => ack(),
                }
            }),
        )
    })
    .await;
    for (k, body) in [("a", "a1"), ("b", "b1"), ("a", "a2")] {
        let message = Message::new(body).with_header(key, k);
        publish(h, &service, &address, message).await;
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        let one = seen.next().await;
        got.push((
            String::from_utf8_lossy(&one.payload).into_owned(),
            one.attempt,
        ));
    }
    let of_a: Vec<_> = got.iter().filter(|(b, _)| b.starts_with('a')).collect();
    let expected = [("a1", 1), ("a1", 2), ("a1", 3), ("a2", 1)];
    assert!(
        of_a.iter().map(|(b, n)| (b.as_str(), *n)).eq(expected),
        "{}: key a out of order: {got:?}",
        h.name()
    );
    let at = |body: &str, attempt| {
        got.iter()
            .position(|seen| seen.0 == body && seen.1 == attempt)
            .unwrap_or_else(|| panic!("{}: {body} {attempt} not handled: {got:?}", h.name()))
    };
    assert!(
        at("b1", 1) < at("a1", 2),
        "{}: key b waited for key a's retry: {got:?}",
        h.name()
    );
    seen.nothing_for(h.quiet()).await;
    service.stop_ok().await;
}
