//! Message headers as Kafka record headers, and back; the record key as the header
//! [`KEY`].

use rdkafka::message::{BorrowedHeaders, Header, Headers as _, OwnedHeaders};
use ruststream_core::Headers;

/// The header that is a record's key: a message published with it goes out with its
/// value as the key (and not as a record header), so records of one key land on one
/// partition, in order; a record read with a key carries it here. The runtime's copies
/// (retries, delayed retries, dead letters) keep their headers, so they keep the key.
///
/// ```no_run
/// # async fn demo(publisher: ruststream::Publisher) -> Result<(), ruststream::publisher::SendError> {
/// publisher
///     .message("orders", &"{\"id\":7}")
///     .header(ruststream_kafka::KEY, "customer-42")
///     .send()
///     .await
/// # }
/// ```
pub const KEY: &str = "kafka-key";

/// The key a message is published with: its [`KEY`] header.
pub(crate) fn key(headers: &Headers) -> Option<&[u8]> {
    headers.get(KEY).map(|value| value.as_bytes())
}

/// The record headers of `headers`, one per header, in order, less [`KEY`].
pub(crate) fn to_kafka(headers: &Headers) -> Option<OwnedHeaders> {
    if headers.is_empty() || (headers.len() == 1 && key(headers).is_some()) {
        return None;
    }
    let mut out = OwnedHeaders::new_with_capacity(headers.len());
    for (name, value) in headers.iter().filter(|(name, _)| name.as_str() != KEY) {
        out = out.insert(Header {
            key: name.as_str(),
            value: Some(value.as_bytes()),
        });
    }
    Some(out)
}

/// The headers of a record, and its key as [`KEY`] where it has one (a record header of
/// that name gives way to the key); a header without a value (Kafka's null) reads as
/// empty. `Err` with the reason where a header name is not UTF-8 (rdkafka cannot read
/// it).
pub(crate) fn from_kafka(
    record: Option<&BorrowedHeaders>,
    key: Option<&[u8]>,
) -> Result<Headers, &'static str> {
    let mut headers = Headers::new();
    if let Some(record) = record {
        read(record, &mut headers)?;
    }
    if let Some(key) = key {
        headers.insert(KEY, key.to_vec());
    }
    Ok(headers)
}

fn read(record: &BorrowedHeaders, headers: &mut Headers) -> Result<(), &'static str> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use rdkafka::message::Headers as _;
    use ruststream_core::Headers;

    use super::{KEY, key, to_kafka};

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

    #[test]
    fn the_key_header_is_the_key_and_no_record_header() {
        let mut headers = Headers::new();
        headers.insert(KEY, "k1");
        assert_eq!(key(&headers), Some(&b"k1"[..]));
        assert!(to_kafka(&headers).is_none(), "the key only");
        headers.insert("a", "1");
        let record = to_kafka(&headers).expect("headers");
        assert_eq!(record.count(), 1);
        assert_eq!(record.get(0).key, "a");
    }
}
