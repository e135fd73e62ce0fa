//! The stream entry format: the body in field `_payload`, each header in a field
//! `h:<name>`.
//!
//! Fields of another kind (no `h:` prefix, or a header name that is not UTF-8) have no
//! place in a message; they travel in one header, [`STREAM_FIELDS`], holding each such field
//! and its value as they arrived, and an entry written from a message that carries it
//! gets them back as fields. A copy or a dead letter of an entry written by another
//! program so keeps every field it had.

use bytes::Bytes;
use fred::types::Value;
use ruststream_core::{HeaderValue, Headers, Message};

/// The field holding the body.
pub(crate) const PAYLOAD: &str = "_payload";
/// The prefix of a header field.
pub(crate) const HEADER_PREFIX: &str = "h:";

/// The header holding the fields of an entry that are neither `_payload` nor a UTF-8
/// `h:` header: for each, a big-endian `u32` length and the field, then the same for its
/// value.
pub const STREAM_FIELDS: &str = "x-ruststream-stream-fields";

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
        if name.as_str() == STREAM_FIELDS
            && let Some(pairs) = unpack(value.as_bytes())
        {
            for (field, value) in pairs {
                out.push(Value::Bytes(Bytes::copy_from_slice(field)));
                out.push(Value::Bytes(Bytes::copy_from_slice(value)));
            }
            continue;
        }
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
    let mut other: Option<Vec<u8>> = None;
    for (field, value) in pairs {
        if field.as_ref() == PAYLOAD.as_bytes() {
            payload = Some(value);
            continue;
        }
        if let Some(name) = field.strip_prefix(HEADER_PREFIX.as_bytes()) {
            match std::str::from_utf8(name) {
                Ok(name) => {
                    headers.append(name.to_owned(), HeaderValue::from(value));
                    continue;
                }
                Err(_) => defect = Some("header name is not utf-8"),
            }
        }
        let packed = other.get_or_insert_with(Vec::new);
        pack(packed, &field);
        pack(packed, &value);
    }
    if let Some(packed) = other {
        headers.insert(STREAM_FIELDS, HeaderValue::from(packed));
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

fn pack(out: &mut Vec<u8>, bytes: &[u8]) {
    // Redis caps a value at 512 MiB: every length fits.
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The field-value pairs packed in a [`STREAM_FIELDS`] header; `None` if it is not such a list.
fn unpack(mut bytes: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (field, rest) = chunk(bytes)?;
        let (value, rest) = chunk(rest)?;
        out.push((field, value));
        bytes = rest;
    }
    Some(out)
}

/// A length-prefixed chunk at the start of `bytes`, and what follows it.
fn chunk(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<4>()?;
    let len = u32::from_be_bytes(*len) as usize;
    (len <= rest.len()).then(|| rest.split_at(len))
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
    fn other_fields_travel_in_one_header_and_come_back_as_fields() {
        let arrived = vec![
            (Bytes::from_static(b"x"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"_payload"), Bytes::from_static(b"p")),
            (
                Bytes::from_static(b"h:\xff\xfe"),
                Bytes::from_static(b"\x00v"),
            ),
            (Bytes::from_static(b"h:a"), Bytes::from_static(b"2")),
        ];
        let d = decode(arrived.clone());
        assert_eq!(d.defect, Some("header name is not utf-8"));
        assert_eq!(d.message.headers.get_str("a"), Some("2"));
        assert_eq!(d.message.headers.len(), 2, "a and the fields header");
        assert_eq!(&d.message.payload[..], b"p");
        // Written again (a copy, a dead letter): every field as it arrived.
        let mut written = pairs(fields(&d.message));
        written.sort();
        let mut expected = arrived;
        expected.sort();
        assert_eq!(written, expected);
    }

    #[test]
    fn a_fields_header_that_is_not_a_list_stays_a_header() {
        let m =
            Message::new(&b"p"[..]).with_header(STREAM_FIELDS, Bytes::from_static(b"\0\0\0\x09ab"));
        let written = pairs(fields(&m));
        assert_eq!(
            written[1],
            (
                Bytes::from_static(b"h:x-ruststream-stream-fields"),
                Bytes::from_static(b"\0\0\0\x09ab")
            )
        );
        assert_eq!(unpack(b""), Some(vec![]));
        assert_eq!(unpack(b"\0\0\0\x01a"), None, "a field without a value");
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
