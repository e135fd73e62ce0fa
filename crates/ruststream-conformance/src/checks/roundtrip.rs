//! Payload bytes and headers arrive as they were published.

use ruststream::Publisher;
use ruststream_core::{CONTENT_TYPE, CORRELATION_ID, HeaderValue, Message};

use super::sent;
use crate::Harness;
use crate::inbox::within;
use crate::service::Service;

/// A message published from another connection reaches the handler with its payload
/// bytes (not UTF-8), `content-type`, `correlation-id`, a custom header and, where the
/// form carries bytes, a header value that is not UTF-8.
pub async fn roundtrip(h: &impl Harness) {
    let address = h.fresh_address();
    let (mut service, mut seen) = Service::sink(h, &address).await;

    let payload: &[u8] = &[0x00, 0x9f, 0xff, b'{', 0x80, b'\n', 0xc3];
    let binary: &[u8] = &[0xff, 0x00, 0xfe, 0x80];
    let mut message = Message::new(payload.to_vec())
        .with_header(CONTENT_TYPE, "application/octet-stream")
        .with_header(CORRELATION_ID, "corr-roundtrip-1")
        .with_header("x-conformance", "custom value ✓");
    if h.binary_headers() {
        message = message.with_header("x-binary", HeaderValue::from(binary.to_vec()));
    }
    let producer = h.broker().await;
    let publisher = Publisher::new(producer.publisher());
    sent(
        h,
        &address,
        publisher.publish_message(address.clone(), message),
    )
    .await;

    let got = seen.next().await;
    assert_eq!(got.payload.as_ref(), payload, "{}: payload bytes", h.name());
    let headers = &got.headers;
    assert_eq!(
        headers.get_str(CONTENT_TYPE),
        Some("application/octet-stream"),
        "{}: content-type in {headers:?}",
        h.name()
    );
    assert_eq!(
        headers.get_str(CORRELATION_ID),
        Some("corr-roundtrip-1"),
        "{}: correlation-id in {headers:?}",
        h.name()
    );
    assert_eq!(
        headers.get_str("x-conformance"),
        Some("custom value ✓"),
        "{}: custom header in {headers:?}",
        h.name()
    );
    if h.binary_headers() {
        assert_eq!(
            headers.get("x-binary").map(HeaderValue::as_bytes),
            Some(binary),
            "{}: binary header in {headers:?}",
            h.name()
        );
    }
    assert_eq!(
        got.attempt,
        1,
        "{}: a first delivery is attempt 1",
        h.name()
    );
    within("closing the producer", producer.close()).await;
    service.stop_ok().await;
}
