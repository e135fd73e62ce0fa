//! Messages between ruststream's [`Headers`] and AMQP 0-9-1 properties.
//!
//! `content-type`, `correlation-id`, `reply-to` and `message-id` travel as the basic
//! properties of those names (where the value is UTF-8 of at most 255 bytes; otherwise
//! as a header); every other header is an entry of the `headers` table holding a byte
//! string (a header given several values: an array of them). Messages are published
//! persistent (`delivery-mode` 2), never with `x-delivery-count` (the broker's count). Received table entries that are numbers, booleans
//! or byte strings become headers as text or bytes; arrays give one value each; nested
//! tables (`x-death`) are left out.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use ruststream_core::{CONTENT_TYPE, CORRELATION_ID, HeaderValue, Headers, MESSAGE_ID, REPLY_TO};

/// The header quorum queues count deliveries in.
pub(crate) const DELIVERY_COUNT: &str = "x-delivery-count";

const PROPERTIES: [&str; 4] = [CONTENT_TYPE, CORRELATION_ID, REPLY_TO, MESSAGE_ID];

/// The properties a message is published with; `Err` says which header cannot go.
pub(crate) fn properties(headers: &Headers) -> Result<BasicProperties, String> {
    let mut properties = BasicProperties::default().with_delivery_mode(2);
    let mut table = FieldTable::default();
    for (name, value) in headers.iter() {
        let name = name.as_str();
        if name == DELIVERY_COUNT {
            // The broker's to write: a message published with one could pass for
            // counted deliveries.
            continue;
        }
        if PROPERTIES.contains(&name)
            && let Some(text) = value.to_str().filter(|t| t.len() <= 255)
        {
            let text = ShortString::from(text);
            properties = match name {
                CONTENT_TYPE => properties.with_content_type(text),
                CORRELATION_ID => properties.with_correlation_id(text),
                REPLY_TO => properties.with_reply_to(text),
                _ => properties.with_message_id(text),
            };
            continue;
        }
        let key = ShortString::try_new(name)
            .map_err(|_| format!("header name {name:?} is longer than 255 bytes"))?;
        let bytes = AMQPValue::LongString(LongString::from(value.as_bytes().to_vec()));
        let entry = match table.inner().get(name) {
            Some(AMQPValue::FieldArray(earlier)) => {
                let mut values = earlier.clone();
                values.push(bytes);
                AMQPValue::FieldArray(values)
            }
            Some(earlier) => {
                let mut values = FieldArray::default();
                values.push(earlier.clone());
                values.push(bytes);
                AMQPValue::FieldArray(values)
            }
            None => bytes,
        };
        table.insert(key, entry);
    }
    if !table.inner().is_empty() {
        properties = properties.with_headers(table);
    }
    Ok(properties)
}

/// The headers of a received message, and the queue's delivery count if it has one.
pub(crate) fn headers(properties: &BasicProperties) -> (Headers, Option<i64>) {
    let mut headers = Headers::new();
    for (name, value) in [
        (CONTENT_TYPE, properties.content_type()),
        (CORRELATION_ID, properties.correlation_id()),
        (REPLY_TO, properties.reply_to()),
        (MESSAGE_ID, properties.message_id()),
    ] {
        if let Some(value) = value {
            headers.insert(name, value.as_str().to_owned());
        }
    }
    let mut count = None;
    if let Some(table) = properties.headers() {
        for (key, value) in table {
            let name = key.as_str().to_owned();
            if name == DELIVERY_COUNT {
                count = crate::queue::integer(value);
            }
            match value {
                AMQPValue::FieldArray(values) => {
                    for v in values.as_slice() {
                        if let Some(v) = scalar(v) {
                            headers.append(name.clone(), v);
                        }
                    }
                }
                other => {
                    if let Some(v) = scalar(other) {
                        headers.append(name, v);
                    }
                }
            }
        }
    }
    (headers, count)
}

fn scalar(value: &AMQPValue) -> Option<HeaderValue> {
    Some(match value {
        AMQPValue::LongString(s) => HeaderValue::from(s.as_bytes().to_vec()),
        AMQPValue::ShortString(s) => HeaderValue::from(s.as_str().to_owned()),
        AMQPValue::ByteArray(b) => HeaderValue::from(b.as_slice().to_vec()),
        AMQPValue::Boolean(b) => HeaderValue::from(b.to_string()),
        AMQPValue::Float(f) => HeaderValue::from(f.to_string()),
        AMQPValue::Double(f) => HeaderValue::from(f.to_string()),
        AMQPValue::Timestamp(t) => HeaderValue::from(t.to_string()),
        other => HeaderValue::from(crate::queue::integer(other)?.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_travel_as_properties_and_table_entries() {
        let mut sent = Headers::new();
        sent.insert(CONTENT_TYPE, "application/json");
        sent.insert(CORRELATION_ID, "c-1");
        sent.insert("x-binary", HeaderValue::from(vec![0xff, 0x00]));
        sent.append("x-many", "a");
        sent.append("x-many", "b");
        sent.insert(MESSAGE_ID, HeaderValue::from(vec![0xff]));
        let props = properties(&sent).expect("ok");
        assert_eq!(
            props.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(props.delivery_mode(), &Some(2));
        let (got, count) = headers(&props);
        assert_eq!(count, None);
        assert_eq!(got.get_str(CONTENT_TYPE), Some("application/json"));
        assert_eq!(got.get_str(CORRELATION_ID), Some("c-1"));
        assert_eq!(
            got.get("x-binary").map(HeaderValue::as_bytes),
            Some(&[0xff, 0][..])
        );
        assert_eq!(
            got.get(MESSAGE_ID).map(HeaderValue::as_bytes),
            Some(&[0xff][..])
        );
        let many: Vec<_> = got.iter().filter(|(n, _)| n.as_str() == "x-many").collect();
        assert_eq!(many.len(), 2);
    }

    #[test]
    fn reads_the_delivery_count_and_refuses_long_names() {
        let mut table = FieldTable::default();
        table.insert(DELIVERY_COUNT.into(), AMQPValue::LongLongInt(2));
        let (got, count) = headers(&BasicProperties::default().with_headers(table));
        assert_eq!(count, Some(2));
        assert_eq!(got.get_str(DELIVERY_COUNT), Some("2"));
        let mut long = Headers::new();
        long.insert("x".repeat(256), "v");
        assert!(
            properties(&long)
                .expect_err("too long")
                .contains("255 bytes")
        );
    }
}
