//! What the adapter finds out about a RabbitMQ queue at subscribe, and declaring one.
//!
//! The queue's type and arguments come from RabbitMQ 4's management node
//! (`GET /queues/{name}`, see [`crate::management`]) and decide the subscription's
//! capabilities:
//!
//! | queue | counts | requeues | dead-letters itself |
//! |---|---|---|---|
//! | classic | no: RabbitMQ 4 classic queues do not count `modified` | yes | no |
//! | quorum | yes (`delivery-count`) | yes | with `x-delivery-limit` and `x-dead-letter-exchange` |
//! | stream | no | no: a stream does not redeliver | no |
//!
//! With [`SubscribeOptions::declare`](crate::SubscribeOptions::declare) a missing queue
//! is made (`PUT /queues/{name}`) from the mount's declaration: `x-delivery-limit` is
//! `max_attempts − 1` (RabbitMQ counts redeliveries: with limit `L` a message is
//! delivered `L + 1` times), the dead letter becomes `x-dead-letter-exchange` /
//! `x-dead-letter-routing-key` of a quorum queue. A classic queue gets no dead-letter
//! exchange: the runtime dead-letters for it, and the exchange would also receive the
//! originals the runtime rejects (of `retry_after` copies, of `drop()`). An existing
//! classic queue that has one keeps it (a warning at subscribe says what it catches).

use fe2o3_amqp_types::primitives::{OrderedMap, Value};
use ruststream_core::Declaration;
use ruststream_rabbitmq::Arg;

/// The type of a RabbitMQ queue, for [`SubscribeOptions::declare`](crate::SubscribeOptions::declare).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueType {
    /// A classic queue: does not count `modified`; retries under a cap are copies.
    Classic,
    /// A quorum queue: counts `modified`; with a cap and a dead letter declared, it
    /// enforces both itself.
    Quorum,
    /// A stream: an append-only log that does not redeliver.
    Stream,
}

impl QueueType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Quorum => "quorum",
            Self::Stream => "stream",
        }
    }
}

pub(crate) use ruststream_rabbitmq::QueueInfo;

/// Reads the body of `GET /queues/{name}`.
pub(crate) fn parse(body: &Value) -> Option<QueueInfo> {
    let Value::Map(map) = body else { return None };
    let kind = text(get(map, "type")?)?;
    let mut info = QueueInfo {
        kind,
        ..QueueInfo::default()
    };
    if let Some(Value::Map(args)) = get(map, "arguments") {
        info.delivery_limit = get(args, "x-delivery-limit").and_then(integer);
        info.dlx = get(args, "x-dead-letter-exchange").and_then(text);
        info.dlrk = get(args, "x-dead-letter-routing-key").and_then(text);
    }
    Some(info)
}

/// The arguments a declaration gives a new queue of `kind` on a broker of `major`
/// version (see [`ruststream_rabbitmq::arguments`]), as the body of `PUT /queues/{name}`.
pub(crate) fn arguments(
    kind: QueueType,
    declaration: &Declaration,
    major: Option<u32>,
) -> Result<Value, String> {
    let mut args = OrderedMap::new();
    for (name, value) in ruststream_rabbitmq::arguments(kind.name(), declaration, major)? {
        let value = match value {
            Arg::Text(s) => Value::String(s),
            Arg::Int(n) => Value::Long(n),
        };
        args.insert(Value::String(name.to_owned()), value);
    }
    let mut body = OrderedMap::new();
    body.insert(Value::String("durable".into()), Value::Bool(true));
    body.insert(Value::String("exclusive".into()), Value::Bool(false));
    body.insert(Value::String("auto_delete".into()), Value::Bool(false));
    body.insert(Value::String("arguments".into()), Value::Map(args));
    Ok(Value::Map(body))
}

pub(crate) fn get<'a>(map: &'a OrderedMap<Value, Value>, key: &str) -> Option<&'a Value> {
    map.iter().find_map(|(k, v)| match k {
        Value::String(s) if s == key => Some(v),
        Value::Symbol(s) if s.0 == key => Some(v),
        _ => None,
    })
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Symbol(s) => Some(s.0.clone()),
        _ => None,
    }
}

pub(crate) fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Long(n) => Some(*n),
        Value::Int(n) => Some(i64::from(*n)),
        Value::Short(n) => Some(i64::from(*n)),
        Value::Byte(n) => Some(i64::from(*n)),
        Value::Ulong(n) => i64::try_from(*n).ok(),
        Value::Uint(n) => Some(i64::from(*n)),
        Value::Ushort(n) => Some(i64::from(*n)),
        Value::Ubyte(n) => Some(i64::from(*n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_core::Address;
    use std::num::NonZeroU32;

    fn decl(n: u32, dead: Option<&str>) -> Declaration {
        Declaration {
            max_attempts: NonZeroU32::new(n),
            dead_letter: dead.map(Address::from),
            retry_to: None,
        }
    }

    #[test]
    fn a_declared_classic_queue_gets_no_dead_letter_exchange() {
        let Value::Map(body) = arguments(QueueType::Classic, &decl(4, Some("d")), Some(4)).unwrap()
        else {
            panic!("not a map")
        };
        let Some(Value::Map(args)) = get(&body, "arguments") else {
            panic!("no arguments")
        };
        assert_eq!(get(args, "x-dead-letter-exchange"), None);
        assert_eq!(get(args, "x-delivery-limit"), None);
    }

    #[test]
    fn declared_arguments() {
        let Value::Map(body) =
            arguments(QueueType::Quorum, &decl(4, Some("/queues/a%20b")), Some(4)).unwrap()
        else {
            panic!("not a map")
        };
        let Some(Value::Map(args)) = get(&body, "arguments") else {
            panic!("no arguments")
        };
        assert_eq!(get(args, "x-delivery-limit"), Some(&Value::Long(3)));
        assert_eq!(
            get(args, "x-dead-letter-exchange"),
            Some(&Value::String(String::new()))
        );
        assert_eq!(
            get(args, "x-dead-letter-routing-key"),
            Some(&Value::String("a b".into()))
        );
    }
}
