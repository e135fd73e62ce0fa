//! The stream entry format: the body in field `_payload`, each header in a field
//! `h:<name>`; other fields are ignored.

use bytes::Bytes;
use fred::types::Value;
use ruststream_core::{HeaderValue, Headers, Message};

/// The field holding the body.
pub(crate) const PAYLOAD: &str = "_payload";
/// The prefix of a header field.
pub(crate) const HEADER_PREFIX: &str = "h:";

/// A stream entry read back: the message, or why it could not be read (with what could).
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) message: Message,
    pub(crate) defect: Option<&'static str>,
}

/// The field-value pairs of `message`, `_payload` first, as `XADD` arguments.
pub(crate) fn fields(message: &Message) -> Vec<Value> {
    let mut out = Vec::with_capacity(2 + 2 * message.headers.len());
    out.push(Value::from_static_str(PAYLOAD));
    out.push(Value::Bytes(message.payload.clone()));
    for (name, value) in message.headers.iter() {
        let mut field = String::with_capacity(HEADER_PREFIX.len() + name.as_str().len());
        field.push_str(HEADER_PREFIX);
        field.push_str(name.as_str());
        out.push(Value::from(field));
        out.push(Value::Bytes(value.to_bytes()));
    }
    out
}

/// Reads an entry from its flat field-value list.
pub(crate) fn decode(pairs: Vec<(Bytes, Bytes)>) -> Decoded {
    let mut payload = None;
    let mut headers = Headers::new();
    let mut defect = None;
    for (field, value) in pairs {
        if field.as_ref() == PAYLOAD.as_bytes() {
            payload = Some(value);
        } else if let Some(name) = field.strip_prefix(HEADER_PREFIX.as_bytes()) {
            match std::str::from_utf8(name) {
                Ok(name) => headers.append(name.to_owned(), HeaderValue::from(value)),
                Err(_) => defect = Some("header name is not utf-8"),
            }
        }
    }
    let payload = payload.unwrap_or_else(|| {
        defect = Some("stream entry has no _payload field");
        Bytes::new()
    });
    Decoded {
        message: Message { payload, headers },
        defect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(values: Vec<Value>) -> Vec<(Bytes, Bytes)> {
        values
            .chunks(2)
            .map(|c| {
                (
                    c[0].as_bytes()
                        .map(Bytes::copy_from_slice)
                        .unwrap_or_default(),
                    c[1].as_bytes()
                        .map(Bytes::copy_from_slice)
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        let m = Message::new(&b"body"[..]).with_header("content-type", "application/json");
        let d = decode(pairs(fields(&m)));
        assert_eq!(d.defect, None);
        assert_eq!(d.message.payload, m.payload);
        assert_eq!(
            d.message.headers.get_str("content-type"),
            Some("application/json")
        );
        assert_eq!(d.message.headers.len(), 1);
    }

    #[test]
    fn other_fields_are_ignored() {
        let d = decode(vec![
            (Bytes::from_static(b"x"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"_payload"), Bytes::from_static(b"p")),
        ]);
        assert_eq!(d.defect, None);
        assert!(d.message.headers.is_empty());
        assert_eq!(&d.message.payload[..], b"p");
    }

    #[test]
    fn missing_payload_and_bad_names_are_defects() {
        let d = decode(vec![(Bytes::from_static(b"h:a"), Bytes::from_static(b"1"))]);
        assert_eq!(d.defect, Some("stream entry has no _payload field"));
        assert_eq!(d.message.headers.get_str("a"), Some("1"));
        let d = decode(vec![
            (Bytes::from_static(b"_payload"), Bytes::new()),
            (Bytes::from_static(b"h:\xff"), Bytes::new()),
        ]);
        assert_eq!(d.defect, Some("header name is not utf-8"));
    }
}
