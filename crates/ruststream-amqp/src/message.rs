//! Mapping between ruststream messages and AMQP 1.0 message sections.
//!
//! | ruststream | AMQP 1.0 |
//! |---|---|
//! | `content-type` | properties `content-type` (symbol) |
//! | `correlation-id` | properties `correlation-id` (string; binary when not UTF-8) |
//! | `reply-to` | properties `reply-to` |
//! | `message-id` | properties `message-id` (string; binary when not UTF-8) |
//! | any other header | application-properties: string, or binary when not UTF-8 |
//! | payload | one `data` section |
//!
//! On read, several `data` sections are joined, an `amqp-value` string or binary is taken
//! as the payload, and a message without a body section has an empty payload. Other
//! bodies (an `amqp-sequence`, an `amqp-value` of another type) and application
//! properties that have no text form (null, decimals, described values) make the
//! delivery defective: the runtime's decode-failure policy applies to it. Nothing of
//! them is dropped: the payload of such a body is its sections in their AMQP encoding
//! (descriptor included), and such a property's value is its AMQP encoding, so a dead
//! letter keeps them.

use bytes::{Bytes, BytesMut};
use fe2o3_amqp_types::messaging::{
    AmqpValue, ApplicationProperties, Body, Data, Header, Message as AmqpMessage, MessageId,
    Properties,
};
use fe2o3_amqp_types::primitives::{Binary, OrderedMap, SimpleValue, Symbol, Value};
use ruststream_core::{
    CONTENT_TYPE, CORRELATION_ID, HeaderName, HeaderValue, Headers, MESSAGE_ID, Message, REPLY_TO,
};

/// What a received AMQP message becomes.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) payload: Bytes,
    pub(crate) headers: Headers,
    /// The header section's `delivery-count`, when the message has a header section.
    pub(crate) delivery_count: Option<u32>,
    /// Why the message cannot be handed to a codec as it is.
    pub(crate) defect: Option<String>,
}

/// The AMQP message for `message`, with `durable` in a header section when asked.
pub(crate) fn encode(message: &Message, durable: bool) -> AmqpMessage<Data> {
    let mut properties = Properties::default();
    let mut has_properties = false;
    let mut app: OrderedMap<String, SimpleValue> = OrderedMap::new();
    for (name, value) in message.headers.iter() {
        let text = value.to_str();
        match (name.as_str(), text) {
            (CONTENT_TYPE, Some(t)) => {
                properties.content_type = Some(Symbol::from(t));
                has_properties = true;
            }
            (REPLY_TO, Some(t)) => {
                properties.reply_to = Some(t.to_owned());
                has_properties = true;
            }
            (MESSAGE_ID, _) => {
                properties.message_id = Some(message_id(value));
                has_properties = true;
            }
            (CORRELATION_ID, _) => {
                properties.correlation_id = Some(message_id(value));
                has_properties = true;
            }
            (other, Some(t)) => {
                app.insert(other.to_owned(), SimpleValue::String(t.to_owned()));
            }
            (other, None) => {
                app.insert(
                    other.to_owned(),
                    SimpleValue::Binary(value.as_bytes().to_vec().into()),
                );
            }
        }
    }
    AmqpMessage {
        header: durable.then(|| Header {
            durable: true,
            ..Header::default()
        }),
        delivery_annotations: None,
        message_annotations: None,
        properties: has_properties.then_some(properties),
        application_properties: (!app.is_empty()).then_some(ApplicationProperties(app)),
        body: Data(Binary::from(message.payload.to_vec())),
        footer: None,
    }
}

fn message_id(value: &HeaderValue) -> MessageId {
    match value.to_str() {
        Some(t) => MessageId::String(t.to_owned()),
        None => MessageId::Binary(Binary::from(value.as_bytes().to_vec())),
    }
}

/// The payload, headers and delivery-count of a received message. Never fails: what
/// cannot be read becomes a defect.
pub(crate) fn decode(message: AmqpMessage<Body<Value>>) -> Decoded {
    let mut defect = None;
    let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    if let Some(p) = message.properties {
        if let Some(id) = p.message_id {
            headers.push((MESSAGE_ID.into(), id_value(id)));
        }
        if let Some(id) = p.correlation_id {
            headers.push((CORRELATION_ID.into(), id_value(id)));
        }
        if let Some(ct) = p.content_type {
            headers.push((CONTENT_TYPE.into(), HeaderValue::from(ct.0)));
        }
        if let Some(r) = p.reply_to {
            headers.push((REPLY_TO.into(), HeaderValue::from(r)));
        }
    }
    if let Some(ApplicationProperties(map)) = message.application_properties {
        for (name, value) in map {
            match simple_text(value) {
                Ok(v) => headers.push((HeaderName::from(name), v)),
                Err((kind, encoded)) => {
                    defect.get_or_insert_with(|| {
                        format!("application property {name:?} is {kind}, not text")
                    });
                    headers.push((HeaderName::from(name), encoded));
                }
            }
        }
    }
    let payload = match message.body {
        Body::Data(batch) => {
            let mut parts: Vec<Data> = batch.into_iter().collect();
            if parts.len() == 1 {
                parts
                    .pop()
                    .map_or_else(Bytes::new, |d| Bytes::from(d.0.into_vec()))
            } else {
                let mut all = BytesMut::new();
                for d in parts {
                    all.extend_from_slice(&d.0);
                }
                all.freeze()
            }
        }
        Body::Value(AmqpValue(Value::String(s))) => Bytes::from(s),
        Body::Value(AmqpValue(Value::Binary(b))) => Bytes::from(b.into_vec()),
        Body::Value(AmqpValue(Value::Null)) | Body::Empty => Bytes::new(),
        Body::Value(AmqpValue(other)) => {
            defect.get_or_insert_with(|| format!("amqp-value body of type {}", value_kind(&other)));
            encoded(&AmqpValue(other))
        }
        Body::Sequence(sections) => {
            defect.get_or_insert_with(|| "amqp-sequence body".to_owned());
            let mut all = BytesMut::new();
            for section in sections {
                all.extend_from_slice(&encoded(&section));
            }
            all.freeze()
        }
    };
    Decoded {
        payload,
        headers: headers.into_iter().collect(),
        delivery_count: message.header.map(|h| h.delivery_count),
        defect,
    }
}

fn id_value(id: MessageId) -> HeaderValue {
    match id {
        MessageId::String(s) => HeaderValue::from(s),
        MessageId::Ulong(n) => HeaderValue::from(n.to_string()),
        MessageId::Uuid(u) => HeaderValue::from(uuid_text(u.as_ref())),
        MessageId::Binary(b) => HeaderValue::from(b.into_vec()),
    }
}

fn uuid_text(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if hex.len() != 32 {
        return hex;
    }
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The AMQP encoding of `value` (what fe2o3-amqp decoded, written again).
fn encoded<T: serde::Serialize>(value: &T) -> Bytes {
    // Serializing a decoded value cannot fail; an empty payload if it ever did.
    serde_amqp::to_vec(value)
        .map(Bytes::from)
        .unwrap_or_default()
}

/// A header value for an application property; `Err` names a type without a text form,
/// with the value's AMQP encoding.
fn simple_text(value: SimpleValue) -> Result<HeaderValue, (&'static str, HeaderValue)> {
    let no_text = |kind, value: &SimpleValue| Err((kind, HeaderValue::from(encoded(value))));
    Ok(HeaderValue::from(match value {
        SimpleValue::String(s) => return Ok(HeaderValue::from(s)),
        SimpleValue::Binary(b) => return Ok(HeaderValue::from(b.into_vec())),
        SimpleValue::Symbol(s) => s.0,
        SimpleValue::Bool(b) => b.to_string(),
        SimpleValue::Ubyte(n) => n.to_string(),
        SimpleValue::Ushort(n) => n.to_string(),
        SimpleValue::Uint(n) => n.to_string(),
        SimpleValue::Ulong(n) => n.to_string(),
        SimpleValue::Byte(n) => n.to_string(),
        SimpleValue::Short(n) => n.to_string(),
        SimpleValue::Int(n) => n.to_string(),
        SimpleValue::Long(n) => n.to_string(),
        SimpleValue::Float(n) => n.to_string(),
        SimpleValue::Double(n) => n.to_string(),
        SimpleValue::Char(c) => c.to_string(),
        SimpleValue::Timestamp(t) => t.milliseconds().to_string(),
        SimpleValue::Uuid(u) => uuid_text(u.as_ref()),
        SimpleValue::Null => return no_text("null", &value),
        SimpleValue::Decimal32(_) | SimpleValue::Decimal64(_) | SimpleValue::Decimal128(_) => {
            return no_text("a decimal", &value);
        }
        #[allow(unreachable_patterns)]
        _ => return no_text("a described value", &value),
    }))
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Ubyte(_)
        | Value::Ushort(_)
        | Value::Uint(_)
        | Value::Ulong(_)
        | Value::Byte(_)
        | Value::Short(_)
        | Value::Int(_)
        | Value::Long(_) => "integer",
        Value::Float(_) | Value::Double(_) => "float",
        Value::Symbol(_) => "symbol",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Array(_) => "array",
        Value::Described(_) => "described",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp_types::messaging::{AmqpSequence, Batch};

    fn received(message: AmqpMessage<Data>) -> AmqpMessage<Body<Value>> {
        message.map_body(|d| Body::Data(Batch::new(vec![d])))
    }

    #[test]
    fn framework_headers_go_to_properties_and_back() {
        let m = Message::new("{}")
            .with_header(CONTENT_TYPE, "application/json")
            .with_header(CORRELATION_ID, "c-1")
            .with_header(REPLY_TO, "/queues/replies")
            .with_header(MESSAGE_ID, HeaderValue::from(vec![0xff, 0x00]))
            .with_header("tenant", "acme")
            .with_header("raw", HeaderValue::from(vec![0xfe]));
        let amqp = encode(&m, true);
        let props = amqp.properties.clone().unwrap();
        assert_eq!(props.content_type, Some(Symbol::from("application/json")));
        assert_eq!(props.correlation_id, Some(MessageId::String("c-1".into())));
        assert!(matches!(props.message_id, Some(MessageId::Binary(_))));
        let app = &amqp.application_properties.as_ref().unwrap().0;
        assert_eq!(app.get("tenant"), Some(&SimpleValue::String("acme".into())));
        assert!(matches!(app.get("raw"), Some(SimpleValue::Binary(_))));
        assert!(amqp.header.as_ref().unwrap().durable);

        let d = decode(received(amqp));
        assert_eq!(d.payload, Bytes::from_static(b"{}"));
        assert_eq!(d.headers.get_str(CONTENT_TYPE), Some("application/json"));
        assert_eq!(d.headers.get_str(CORRELATION_ID), Some("c-1"));
        assert_eq!(d.headers.get_str(REPLY_TO), Some("/queues/replies"));
        assert_eq!(d.headers.get(MESSAGE_ID).unwrap().as_bytes(), &[0xff, 0x00]);
        assert_eq!(d.headers.get_str("tenant"), Some("acme"));
        assert_eq!(d.headers.get("raw").unwrap().as_bytes(), &[0xfe]);
        assert_eq!(d.delivery_count, Some(0));
        assert!(d.defect.is_none());
    }

    #[test]
    fn no_header_section_when_not_durable() {
        let amqp = encode(&Message::new("x"), false);
        assert!(amqp.header.is_none());
        assert!(amqp.properties.is_none());
        assert!(amqp.application_properties.is_none());
        assert_eq!(decode(received(amqp)).delivery_count, None);
    }

    fn with_body(body: Body<Value>) -> AmqpMessage<Body<Value>> {
        AmqpMessage {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body,
            footer: None,
        }
    }

    #[test]
    fn accepted_bodies() {
        let two = Body::Data(Batch::new(vec![
            Data(Binary::from(b"ab".to_vec())),
            Data(Binary::from(b"cd".to_vec())),
        ]));
        assert_eq!(decode(with_body(two)).payload, Bytes::from_static(b"abcd"));
        let s = Body::Value(AmqpValue(Value::String("hi".into())));
        assert_eq!(decode(with_body(s)).payload, Bytes::from_static(b"hi"));
        let b = Body::Value(AmqpValue(Value::Binary(Binary::from(vec![1u8]))));
        assert_eq!(decode(with_body(b)).payload, Bytes::from_static(&[1]));
        let e = decode(with_body(Body::Empty));
        assert!(e.payload.is_empty() && e.defect.is_none());
    }

    #[test]
    fn odd_bodies_and_properties_are_defects() {
        let v = decode(with_body(Body::Value(AmqpValue(Value::Int(7)))));
        assert_eq!(v.defect.as_deref(), Some("amqp-value body of type integer"));
        // The body's section as it arrived: amqp-value, int 7.
        assert_eq!(&v.payload[..], &[0x00, 0x53, 0x77, 0x54, 0x07]);
        let seq = Body::Sequence(Batch::new(vec![
            AmqpSequence(vec![Value::Int(1)]),
            AmqpSequence(vec![Value::Int(2)]),
        ]));
        let d = decode(with_body(seq));
        assert!(d.defect.is_some());
        // Two amqp-sequence sections, each a list of one int.
        assert_eq!(
            &d.payload[..],
            &[
                0x00, 0x53, 0x76, 0xc0, 0x03, 0x01, 0x54, 0x01, 0x00, 0x53, 0x76, 0xc0, 0x03, 0x01,
                0x54, 0x02
            ]
        );

        let mut m = with_body(Body::Empty);
        let mut app = OrderedMap::new();
        app.insert("n".to_owned(), SimpleValue::Int(-3));
        app.insert("z".to_owned(), SimpleValue::Null);
        m.application_properties = Some(ApplicationProperties(app));
        let d = decode(m);
        assert_eq!(d.headers.get_str("n"), Some("-3"));
        assert_eq!(d.headers.get("z").map(|v| v.as_bytes()), Some(&[0x40][..]));
        assert!(d.defect.unwrap().contains("\"z\""));
    }
}
