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

pub(crate) use ruststream_rabbitmq::{QueueFacts, QueueInfo, dead_letter_target, delivery_limit};

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

/// Differences between a queue and the mount's declaration that would make the broker
/// and the runtime disagree: a declared type that is not the queue's, a delivery limit
/// that stops deliveries before `max_attempts` (or, where the queue dead-letters itself
/// or the mount declared it, any other limit than `max_attempts − 1`), a dead-letter
/// target that is not `dead_letter`. `Err` says how.
pub(crate) fn check(
    info: &QueueInfo,
    declaration: &Declaration,
    declared: Option<QueueType>,
    queue: &str,
) -> Result<(), String> {
    // An existing queue's arguments cannot be changed (and a policy cannot raise a
    // delivery limit an argument sets): the queue is made again.
    let remake = format!(
        "make the queue again: `rabbitmqctl delete_queue {queue}` (its messages go with it), \
         then start the service, which declares it as the mount implies"
    );
    if let Some(kind) = declared
        && kind.name() != info.kind
    {
        return Err(format!(
            "is a {} queue, declared {}; fix: declare={} on the mount, or {remake}",
            info.kind,
            kind.name(),
            info.kind
        ));
    }
    let strict = info.dead_letters_itself() || declared.is_some();
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
            return Err(format!(
                "has x-delivery-limit {limit}, max_attempts({n}) needs {wanted}; fix: \
                 max_attempts({}) on the mount, or {remake}",
                limit + 1
            ));
        }
    }
    // The dead-letter target must agree where the broker dead-letters: a queue that does
    // it itself, or a quorum queue the mount declared (a declared classic queue has no
    // dead-letter exchange: the runtime dead-letters for it).
    let broker_dead_letters =
        info.dead_letters_itself() || declared.is_some_and(|kind| kind == QueueType::Quorum);
    let Some(dead) = declaration
        .dead_letter
        .as_ref()
        .filter(|_| broker_dead_letters)
    else {
        return Ok(());
    };
    let differs = |has: &str| {
        Err(format!(
            "dead-letters to {has}, dead_letter is {dead}; fix: the dead_letter the queue \
             dead-letters to on the mount, or {remake}"
        ))
    };
    let Some(dlx) = info.dlx.as_deref() else {
        return differs("nowhere (no x-dead-letter-exchange)");
    };
    let has = match &info.dlrk {
        Some(k) => format!("exchange {dlx:?} key {k:?}"),
        None => format!("exchange {dlx:?} with the message's own key"),
    };
    let Some((exchange, key)) = dead_letter_target(dead) else {
        return differs(&has);
    };
    let agrees = exchange == dlx
        && match (key.as_deref(), info.dlrk.as_deref()) {
            (Some(k), Some(h)) => k == h,
            // The default exchange routes by key: the message's own would not reach it.
            (_, None) => !exchange.is_empty(),
            (None, Some(_)) => true,
        };
    if agrees {
        Ok(())
    } else if exchange.is_empty() && !dlx.is_empty() {
        // AMQP 0-9-1 cannot read bindings: whether the exchange reaches the queue is
        // not known, so the mount must name the exchange itself.
        Err(format!(
            "dead-letters through {has}, which cannot be checked against dead_letter {dead}: \
             name it as /exchanges/{dlx}{}",
            info.dlrk
                .as_deref()
                .map(|k| format!("/{k}"))
                .unwrap_or_default()
        ))
    } else {
        differs(&has)
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

    fn declared(max: u32, dead: Option<&str>) -> Declaration {
        Declaration {
            max_attempts: NonZeroU32::new(max),
            dead_letter: dead.map(Address::from),
            retry_to: None,
        }
    }

    #[test]
    fn a_queue_dead_lettering_itself_must_match_the_cap_exactly() {
        let q = quorum(Some(2), Some(""), Some("dead"));
        assert_eq!(check(&q, &declared(3, Some("dead")), None, "q"), Ok(()));
        let e = check(&q, &declared(4, Some("dead")), None, "q").expect_err("off by one");
        assert!(
            e.contains("x-delivery-limit 2, max_attempts(4) needs 3"),
            "{e}"
        );
        let e = check(&q, &declared(3, Some("other")), None, "q").expect_err("elsewhere");
        assert!(e.contains("dead_letter is other"), "{e}");
        let e = check(&q, &declared(3, None), Some(QueueType::Classic), "q").expect_err("type");
        assert!(e.contains("is a quorum queue, declared classic"), "{e}");
    }

    #[test]
    fn a_larger_limit_is_fine_where_the_runtime_caps() {
        let q = quorum(Some(10), None, None);
        assert_eq!(check(&q, &declared(3, Some("dead")), None, "q"), Ok(()));
        let e = check(&q, &declared(20, None), None, "q").expect_err("cut short");
        assert!(e.contains("needs 19"), "{e}");
    }

    #[test]
    fn an_exchange_dead_letter_must_be_named_as_such() {
        let q = quorum(Some(2), Some("dlx"), Some("k"));
        assert_eq!(
            check(&q, &declared(3, Some("/exchanges/dlx/k")), None, "q"),
            Ok(())
        );
        let e = check(&q, &declared(3, Some("dead")), None, "q").expect_err("binding unknown");
        assert!(e.contains("/exchanges/dlx/k"), "{e}");
    }

    #[test]
    fn declared_arguments() {
        let args = arguments(QueueType::Quorum, &declared(3, Some("dead")), Some(4)).expect("ok");
        let info = from_arguments(&args);
        assert_eq!(info, quorum(Some(2), Some(""), Some("dead")));
        assert_eq!(
            check(
                &info,
                &declared(3, Some("dead")),
                Some(QueueType::Quorum),
                "q"
            ),
            Ok(())
        );
        let classic = arguments(QueueType::Classic, &Declaration::default(), Some(4)).expect("ok");
        assert_eq!(from_arguments(&classic).kind, "classic");
        // A declared classic queue gets no dead-letter exchange, and passes the check.
        let classic =
            arguments(QueueType::Classic, &declared(3, Some("dead")), Some(4)).expect("ok");
        let info = from_arguments(&classic);
        assert_eq!(info.dlx, None);
        assert_eq!(
            check(
                &info,
                &declared(3, Some("dead")),
                Some(QueueType::Classic),
                "q"
            ),
            Ok(())
        );
    }
}
