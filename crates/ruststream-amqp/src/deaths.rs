//! Dead letters RabbitMQ moved itself (a quorum queue at its delivery limit, a reject
//! into a dead-letter exchange, an expiry, an overflow) carry none of the runtime's
//! `x-ruststream-dead-letter-*` headers, only RabbitMQ's message annotations:
//! `x-last-death-queue` / `-reason` (and `x-first-death-*`), and `x-opt-deaths`, an
//! array of maps (the most recent first: `queue`, `reason`, `count`, `first-time`,
//! `last-time`, …) that the crate's frame reader turned into an array of binaries (see
//! [`crate::transport`]): each is the map's body, read again here. The dead-letter tools
//! read them as the runtime's headers: the queue it came from, RabbitMQ's reason
//! (`delivery_limit`, `rejected`, `expired`, `maxlen`), when, and how many times RabbitMQ
//! dead-lettered it so. The attempt stays unknown.

use fe2o3_amqp_types::messaging::MessageAnnotations;
use fe2o3_amqp_types::messaging::annotations::OwnedKey;
use fe2o3_amqp_types::primitives::Value;
use ruststream_core::Message;
use ruststream_rabbitmq::Death;

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Symbol(s) => Some(s.0.clone()),
        _ => None,
    }
}

/// RabbitMQ's account of the last dead-lettering in `annotations`; `None` if none.
pub(crate) fn death(annotations: &MessageAnnotations) -> Option<Death> {
    let get = |key: &str| {
        annotations.0.iter().find_map(|(k, v)| match k {
            OwnedKey::Symbol(s) if s.0 == key => Some(v),
            _ => None,
        })
    };
    let mut death = Death::default();
    if let Some(Value::Array(entries)) = get("x-opt-deaths")
        && let Some(Value::Map(last)) = entries.0.first().and_then(map)
    {
        let field = |key: &str| crate::queue::get(&last, key);
        death.queue = field("queue").and_then(text);
        death.reason = field("reason").and_then(text);
        death.count = field("count")
            .and_then(crate::queue::integer)
            .and_then(|n| u64::try_from(n).ok());
        death.at_ms = match field("last-time") {
            Some(Value::Timestamp(t)) => u64::try_from(t.milliseconds()).ok(),
            _ => None,
        };
    }
    death.completed(|key| get(key).and_then(text))
}

/// An entry of `x-opt-deaths`: a map, or the body of one (count and entries) as the
/// frame reader leaves it, decoded again.
fn map(entry: &Value) -> Option<Value> {
    let body = match entry {
        Value::Map(_) => return Some(entry.clone()),
        Value::Binary(b) => b.as_ref(),
        _ => return None,
    };
    let wide = {
        let mut bytes = vec![0xd1];
        bytes.extend_from_slice(&u32::try_from(body.len()).ok()?.to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    };
    let narrow = u8::try_from(body.len()).ok().map(|len| {
        let mut bytes = vec![0xc1, len];
        bytes.extend_from_slice(body);
        bytes
    });
    // A map8 body has a one-byte count, a map32 body a four-byte one: the one whose
    // count fits the bytes decodes.
    [Some(wide), narrow]
        .into_iter()
        .flatten()
        .find_map(|bytes| match serde_amqp::from_slice::<Value>(&bytes) {
            Ok(Value::Map(m)) => Some(Value::Map(m)),
            _ => None,
        })
}

/// `message` as the dead-letter tools show it: a dead letter RabbitMQ moved itself gets
/// the runtime's headers from RabbitMQ's annotations; one the runtime published (it has
/// `x-ruststream-dead-letter-from`) and any other message stay as they are.
pub(crate) fn described(message: Message, annotations: Option<&MessageAnnotations>) -> Message {
    ruststream_rabbitmq::described(message, || annotations.and_then(death), &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp_types::primitives::{Array, Binary, OrderedMap, Symbol, Timestamp};
    use ruststream_core::{DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON};
    use ruststream_rabbitmq::DEAD_LETTER_COUNT;

    #[test]
    fn rabbitmq_4s_annotations_read_as_the_runtimes_headers() {
        // One x-opt-deaths entry as the frame reader hands it over: a map32 body.
        let mut entry = OrderedMap::new();
        let sym = |s: &str| Value::Symbol(Symbol::from(s));
        entry.insert(sym("queue"), Value::String("orders".into()));
        entry.insert(sym("reason"), sym("delivery_limit"));
        entry.insert(sym("count"), Value::Ulong(1));
        entry.insert(
            sym("last-time"),
            Value::Timestamp(Timestamp::from_milliseconds(1_796_165_174_000)),
        );
        let encoded = serde_amqp::to_vec(&Value::Map(entry)).expect("encoded");
        let body = match encoded[0] {
            0xc1 => encoded[2..].to_vec(),
            _ => encoded[5..].to_vec(),
        };
        let mut annotations = OrderedMap::new();
        let key = |s: &str| OwnedKey::Symbol(Symbol::from(s));
        annotations.insert(
            key("x-opt-deaths"),
            Value::Array(Array::from(vec![Value::Binary(Binary::from(body))])),
        );
        annotations.insert(key("x-first-death-queue"), Value::String("first".into()));
        let annotations = MessageAnnotations(annotations);
        let shown = described(Message::new("x"), Some(&annotations));
        let h = &shown.headers;
        assert_eq!(h.get_str(DEAD_LETTER_FROM), Some("orders"));
        assert_eq!(h.get_str(DEAD_LETTER_REASON), Some("delivery_limit"));
        assert_eq!(h.get_str(DEAD_LETTER_COUNT), Some("1"));
        assert_eq!(h.get_str(DEAD_LETTER_AT), Some("1796165174000"));
        // The simple annotations alone give the source and the reason.
        let mut simple = OrderedMap::new();
        simple.insert(key("x-last-death-queue"), Value::String("orders".into()));
        simple.insert(key("x-last-death-reason"), Value::String("rejected".into()));
        let d = death(&MessageAnnotations(simple)).expect("a death");
        assert_eq!(d.queue.as_deref(), Some("orders"));
        assert_eq!(d.reason.as_deref(), Some("rejected"));
        // The runtime's own dead letters are left alone.
        let ours = Message::new("y").with_header(DEAD_LETTER_FROM, "billing");
        assert_eq!(described(ours.clone(), Some(&annotations)), ours);
    }
}
