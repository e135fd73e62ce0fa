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
    fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Quorum => "quorum",
            Self::Stream => "stream",
        }
    }
}

pub(crate) use ruststream_rabbitmq::{QueueFacts, QueueInfo, dead_letter_target, delivery_limit};

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

/// Where the queue dead-letters to: exchange and routing key.
fn queue_dead_letter_target(info: &QueueInfo) -> Option<(&str, Option<&str>)> {
    Some((info.dlx.as_deref()?, info.dlrk.as_deref()))
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

/// What checking a queue against the mount's declaration found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// They agree.
    Agrees,
    /// They agree if the exchange (first) is bound to the queue (second).
    Binding(String, String),
    /// They disagree: how.
    Differs(String),
}

/// Differences between a queue and the mount's declaration that would make the broker
/// and the runtime disagree: a declared type that is not the queue's, a delivery limit
/// that stops deliveries before `max_attempts` (or, where the queue dead-letters itself
/// or was declared by the mount, any other limit than `max_attempts − 1`), a
/// dead-letter target that is not `dead_letter`.
pub(crate) fn check(
    info: &QueueInfo,
    declaration: &Declaration,
    declared: Option<QueueType>,
) -> Check {
    if let Some(kind) = declared
        && kind.name() != info.kind
    {
        return Check::Differs(format!(
            "is a {} queue, declared {}",
            info.kind,
            kind.name()
        ));
    }
    // A queue the mount declares must dead-letter as the mount says only where it
    // dead-letters for the mount at all: a quorum queue.
    let strict = info.dead_letters_itself() || declared == Some(QueueType::Quorum);
    if info.kind == "quorum"
        && let (Some(limit), Some(n)) = (info.delivery_limit, declaration.max_attempts)
        && limit >= 0
    {
        let wanted = delivery_limit(n.get());
        // A larger limit never cuts the runtime's cap short, unless the broker enforces it.
        let agrees = if strict {
            limit == wanted
        } else {
            limit >= wanted
        };
        if !agrees {
            return Check::Differs(format!(
                "x-delivery-limit is {limit}, max_attempts({n}) needs {wanted}"
            ));
        }
    }
    let Some(dead) = declaration.dead_letter.as_ref().filter(|_| strict) else {
        return Check::Agrees;
    };
    let differs =
        |has: &str| Check::Differs(format!("dead-letters to {has}, dead_letter is {dead}"));
    let Some((dlx, dlrk)) = queue_dead_letter_target(info) else {
        return differs("nowhere (no x-dead-letter-exchange)");
    };
    let has = match dlrk {
        Some(k) => format!("exchange {dlx:?} key {k:?}"),
        None => format!("exchange {dlx:?}"),
    };
    let Some((exchange, key)) = dead_letter_target(dead) else {
        return differs(&has);
    };
    if exchange == dlx {
        let agrees = match (key.as_deref(), dlrk) {
            (Some(k), Some(h)) => k == h,
            // The default exchange routes by key: the message's own would not reach it.
            (_, None) => !exchange.is_empty(),
            (None, Some(_)) => true,
        };
        return if agrees { Check::Agrees } else { differs(&has) };
    }
    match (exchange.is_empty(), key, dlrk) {
        // dead_letter is a queue, the queue dead-letters through an exchange.
        (true, Some(queue), _) => Check::Binding(dlx.to_owned(), queue),
        _ => differs(&has),
    }
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

    fn quorum(limit: Option<i64>, dlx: Option<&str>, dlrk: Option<&str>) -> QueueInfo {
        QueueInfo {
            kind: "quorum".into(),
            delivery_limit: limit,
            dlx: dlx.map(Into::into),
            dlrk: dlrk.map(Into::into),
        }
    }

    fn decl(n: u32, dead: Option<&str>) -> Declaration {
        Declaration {
            max_attempts: NonZeroU32::new(n),
            dead_letter: dead.map(Address::from),
            retry_to: None,
        }
    }

    #[test]
    fn the_limit_is_max_attempts_minus_one() {
        let q = quorum(Some(2), Some(""), Some("d"));
        assert_eq!(check(&q, &decl(3, Some("d")), None), Check::Agrees);
        assert!(matches!(
            check(&q, &decl(2, Some("d")), None),
            Check::Differs(_)
        ));
        // Without a dead-letter exchange only a limit that cuts the cap short differs.
        let q = quorum(Some(10), None, None);
        assert_eq!(check(&q, &decl(3, None), None), Check::Agrees);
        assert!(matches!(
            check(&q, &decl(12, None), None),
            Check::Differs(_)
        ));
    }

    #[test]
    fn the_dead_letter_target_must_be_the_mounts() {
        let q = quorum(Some(2), Some(""), Some("d"));
        assert!(matches!(
            check(&q, &decl(3, Some("e")), None),
            Check::Differs(_)
        ));
        let q = quorum(Some(2), Some("dlx"), None);
        assert_eq!(
            check(&q, &decl(3, Some("d")), None),
            Check::Binding("dlx".into(), "d".into())
        );
        assert_eq!(
            check(&q, &decl(3, Some("/exchanges/dlx")), None),
            Check::Agrees
        );
        assert!(matches!(
            check(&q, &decl(3, Some("/exchanges/other")), None),
            Check::Differs(_)
        ));
    }

    #[test]
    fn a_declared_classic_queue_leaves_dead_letters_to_the_runtime() {
        let Value::Map(body) = arguments(QueueType::Classic, &decl(4, Some("d")), Some(4)).unwrap()
        else {
            panic!("not a map")
        };
        let Some(Value::Map(args)) = get(&body, "arguments") else {
            panic!("no arguments")
        };
        assert_eq!(get(args, "x-dead-letter-exchange"), None);
        assert_eq!(get(args, "x-delivery-limit"), None);
        // An existing classic queue without a dead-letter exchange agrees with it.
        let classic = QueueInfo {
            kind: "classic".into(),
            ..QueueInfo::default()
        };
        let declared = Some(QueueType::Classic);
        assert_eq!(
            check(&classic, &decl(4, Some("d")), declared),
            Check::Agrees
        );
        // A declared quorum queue must dead-letter where the mount says.
        let q = quorum(Some(3), None, None);
        assert!(matches!(
            check(&q, &decl(4, Some("d")), Some(QueueType::Quorum)),
            Check::Differs(_)
        ));
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
