//! Message headers as Kafka record headers, and back.

use rdkafka::message::{BorrowedHeaders, Header, Headers as _, OwnedHeaders};
use ruststream_core::Headers;

/// The record headers of `headers`, one per header, in order.
pub(crate) fn to_kafka(headers: &Headers) -> Option<OwnedHeaders> {
    if headers.is_empty() {
        return None;
    }
    let mut out = OwnedHeaders::new_with_capacity(headers.len());
    for (name, value) in headers.iter() {
        out = out.insert(Header {
            key: name.as_str(),
            value: Some(value.as_bytes()),
        });
    }
    Some(out)
}

/// The headers of a record; a header without a value (Kafka's null) reads as empty.
/// `Err` with the reason where a header name is not UTF-8 (rdkafka cannot read it).
pub(crate) fn from_kafka(record: Option<&BorrowedHeaders>) -> Result<Headers, &'static str> {
    let mut headers = Headers::new();
    let Some(record) = record else {
        return Ok(headers);
    };
    // rdkafka's header iterator panics on a name that is not UTF-8; read it where that
    // panic is caught, so that such a record is delivered with a defect instead.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        record
            .iter()
            .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
            .collect::<Vec<_>>()
    }));
    for (name, value) in read.map_err(|_| "a header name is not utf-8")? {
        headers.append(name, value);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use rdkafka::message::Headers as _;
    use ruststream_core::Headers;

    use super::to_kafka;

    #[test]
    fn every_header_is_a_record_header_in_order() {
        let mut headers = Headers::new();
        headers.insert("a", "1");
        headers.append("b", vec![0xff_u8]);
        let record = to_kafka(&headers).expect("headers");
        assert_eq!(record.count(), 2);
        assert_eq!(
            (record.get(0).key, record.get(0).value),
            ("a", Some(&b"1"[..]))
        );
        assert_eq!(record.get(1).value, Some(&[0xff_u8][..]));
        assert!(to_kafka(&Headers::new()).is_none());
    }
}
