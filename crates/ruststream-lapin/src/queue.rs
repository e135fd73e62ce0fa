//! What a queue is, what that makes a subscription able to do, and whether it agrees
//! with the mount's declaration.
//!
//! | queue | counts | requeues | dead-letters itself |
//! |---|---|---|---|
//! | classic | no (a requeue only sets `redelivered`) | yes | no |
//! | quorum | yes (`x-delivery-count`) | yes | with `x-delivery-limit` and `x-dead-letter-exchange` |
//! | stream | no | no | no |
//!
//! RabbitMQ dead-letters a quorum queue's message returned more than `x-delivery-limit`
//! times, so a message is delivered `limit + 1` times: `max_attempts(n)` is a limit of
//! `n − 1`.

use lapin::types::{AMQPValue, FieldTable, LongString};
use ruststream_core::Declaration;
use ruststream_rabbitmq::Arg;

/// The type of a RabbitMQ queue, for [`SubscribeOptions::declare`](crate::SubscribeOptions::declare).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueType {
    /// A classic queue: does not count requeues; retries under a cap are copies.
    Classic,
    /// A quorum queue: counts requeues; with a cap and a dead letter declared, it
    /// enforces both itself.
    Quorum,
}

impl QueueType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Quorum => "quorum",
        }
    }
}

pub(crate) use ruststream_rabbitmq::{QueueInfo, dead_letter_target, delivery_limit};

/// Reads a queue's arguments (as the probe found them) into what it is.
pub(crate) fn from_arguments(args: &FieldTable) -> QueueInfo {
    let text = |key: &str| match args.inner().get(key) {
        Some(AMQPValue::LongString(s)) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        Some(AMQPValue::ShortString(s)) => Some(s.as_str().to_owned()),
        _ => None,
    };
    QueueInfo {
        kind: text("x-queue-type").unwrap_or_else(|| "classic".into()),
        delivery_limit: args.inner().get("x-delivery-limit").and_then(integer),
        dlx: text("x-dead-letter-exchange"),
        dlrk: text("x-dead-letter-routing-key"),
    }
}

pub(crate) fn integer(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(n) => i64::from(*n),
        AMQPValue::ShortShortUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::LongLongInt(n) => *n,
        _ => return None,
    })
}

/// The values a queue made for `declaration` may have (those this adapter declares, the
/// queue types): the probe's guesses for a refusal RabbitMQ cut short.
pub(crate) fn hints(declaration: &Declaration) -> Vec<(&'static str, AMQPValue)> {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    let mut hints = vec![
        ("x-queue-type", text("quorum")),
        ("x-queue-type", text("classic")),
        ("x-queue-type", text("stream")),
        ("x-dead-letter-strategy", text("at-least-once")),
        ("x-overflow", text("reject-publish")),
        ("x-delivery-limit", AMQPValue::LongLongInt(-1)),
    ];
    if let Some(n) = declaration.max_attempts {
        hints.push((
            "x-delivery-limit",
            AMQPValue::LongLongInt(delivery_limit(n.get())),
        ));
    }
    if let Some((exchange, key)) = declaration
        .dead_letter
        .as_ref()
        .and_then(dead_letter_target)
    {
        hints.push(("x-dead-letter-exchange", text(&exchange)));
        if let Some(key) = key {
            hints.push(("x-dead-letter-routing-key", text(&key)));
        }
    }
    hints
}

/// The arguments a declaration gives a new queue of `kind` on a broker of `major`
/// version (see [`ruststream_rabbitmq::arguments`]), as a field table.
pub(crate) fn arguments(
    kind: QueueType,
    declaration: &Declaration,
    major: Option<u32>,
) -> Result<FieldTable, String> {
    let mut args = FieldTable::default();
    for (name, value) in ruststream_rabbitmq::arguments(kind.name(), declaration, major)? {
        let value = match value {
            Arg::Text(s) => AMQPValue::LongString(LongString::from(s.into_bytes())),
            Arg::Int(n) => AMQPValue::LongLongInt(n),
        };
        args.insert(name.into(), value);
    }
    Ok(args)
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

    fn declared(max: u32, dead: Option<&str>) -> Declaration {
        Declaration {
            max_attempts: NonZeroU32::new(max),
            dead_letter: dead.map(Address::from),
            retry_to: None,
        }
    }

    #[test]
    fn declared_arguments() {
        let args = arguments(QueueType::Quorum, &declared(3, Some("dead")), Some(4)).expect("ok");
        let info = from_arguments(&args);
        assert_eq!(info, quorum(Some(2), Some(""), Some("dead")));
        assert_eq!(
            ruststream_rabbitmq::check(&info, &declared(3, Some("dead")), Some("quorum"), "q"),
            Ok(None)
        );
        let classic = arguments(QueueType::Classic, &Declaration::default(), Some(4)).expect("ok");
        assert_eq!(from_arguments(&classic).kind, "classic");
        // A declared classic queue gets no dead-letter exchange, and passes the check.
        let classic =
            arguments(QueueType::Classic, &declared(3, Some("dead")), Some(4)).expect("ok");
        let info = from_arguments(&classic);
        assert_eq!(info.dlx, None);
        assert_eq!(
            ruststream_rabbitmq::check(&info, &declared(3, Some("dead")), Some("classic"), "q"),
            Ok(None)
        );
    }
}
