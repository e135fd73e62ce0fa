//! Publishing from a handler with the `Publisher` extractor.

use ruststream::core::{CONTENT_TYPE, CORRELATION_ID};
use ruststream::{Headers, Publisher, ack, codec::Codec, publisher::SendError};

use super::{Numbered, sent};
use crate::Harness;
use crate::inbox::inbox;
use crate::recorder::acking;
use crate::service::Service;

/// A handler publishes to another address with the `Publisher` extractor; a second
/// subscription gets the value with the codec's `content-type`, the correlation id the
/// handler passed on and its own header.
pub async fn publish_from_handler(h: &impl Harness) {
    let (address, onward) = (h.fresh_address(), h.fresh_address());
    let to = onward.clone();
    let forward = move |publisher: Publisher, headers: Headers, item: Numbered| {
        let to = to.clone();
        async move {
            let mut message = publisher
                .message(to, &Numbered { n: item.n + 1 })
                .header("x-forwarded-by", "conformance");
            if let Some(id) = headers.get(CORRELATION_ID) {
                message = message.correlation_id(id.clone());
            }
            message.send().await?;
            Ok::<_, SendError>(ack())
        }
    };
    let (outbox, mut seen) = inbox("forwarded message");
    let mut service = Service::start(h, |app| {
        app.mount(h.mount(address.clone()), forward)
            .mount(h.mount(onward), acking(outbox))
    })
    .await;
    let publisher = service.publisher();
    let message = publisher
        .message(address.clone(), &Numbered { n: 41 })
        .correlation_id("corr-forward");
    sent(h, &address, message.send()).await;

    let got = seen.next().await;
    let value: Numbered = match Codec::Json.decode(&got.payload) {
        Ok(value) => value,
        Err(error) => panic!("{}: forwarded payload: {error}: {got:?}", h.name()),
    };
    assert_eq!(value, Numbered { n: 42 }, "{}: forwarded value", h.name());
    let headers = &got.headers;
    assert_eq!(
        headers.get_str(CONTENT_TYPE),
        Some("application/json"),
        "{}: {headers:?}",
        h.name()
    );
    assert_eq!(
        headers.get_str(CORRELATION_ID),
        Some("corr-forward"),
        "{}: {headers:?}",
        h.name()
    );
    assert_eq!(
        headers.get_str("x-forwarded-by"),
        Some("conformance"),
        "{}: {headers:?}",
        h.name()
    );
    // An ack settles where the form settles; where it does not (settled on receipt),
    // it is `AckError::Unsupported` (SPEC §2).
    let record = service.settled.next().await;
    assert_eq!(
        record.ok,
        h.capabilities().settles,
        "{}: the forwarder's settlement: {record:?}",
        h.name()
    );
    seen.nothing_for(h.quiet()).await;
    service.stop_ok().await;
}
