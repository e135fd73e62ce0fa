//! What a queue is, what that makes a subscription able to do, and the arguments a
//! mount's declaration gives a new one.
//!
//! | queue | counts | requeues | dead-letters itself |
//! |---|---|---|---|
//! | classic | no (a requeue only marks it redelivered) | yes | no |
//! | quorum | yes (`x-delivery-count`, `delivery-count`) | yes | with `x-delivery-limit` and `x-dead-letter-exchange` |
//! | stream | no | no | no |
//!
//! RabbitMQ dead-letters a quorum queue's message returned more than `x-delivery-limit`
//! times, so a message is delivered `limit + 1` times: `max_attempts(n)` is a limit of
//! `n − 1`.

use ruststream_core::Declaration;

use crate::address::dead_letter_target;

/// A queue as the broker described it: its type and the arguments that decide how it
/// settles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueInfo {
    /// `classic`, `quorum`, `stream` (or another type a plugin adds).
    pub kind: String,
    /// `x-delivery-limit`.
    pub delivery_limit: Option<i64>,
    /// `x-dead-letter-exchange`.
    pub dlx: Option<String>,
    /// `x-dead-letter-routing-key`.
    pub dlrk: Option<String>,
}

/// The capabilities a queue decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFacts {
    /// The queue counts deliveries.
    pub counts: bool,
    /// The queue takes a delivery back for redelivery.
    pub requeues: bool,
    /// The queue enforces the cap and the dead letter itself.
    pub dead_letters: bool,
}

impl QueueInfo {
    /// Whether the queue caps deliveries and moves spent ones itself (a quorum queue
    /// with a non-negative `x-delivery-limit` and a dead-letter exchange).
    pub fn dead_letters_itself(&self) -> bool {
        self.kind == "quorum" && self.delivery_limit.is_some_and(|l| l >= 0) && self.dlx.is_some()
    }

    /// What the queue's type and arguments make a subscription able to do.
    pub fn facts(&self) -> QueueFacts {
        match self.kind.as_str() {
            "quorum" => QueueFacts {
                counts: true,
                requeues: true,
                dead_letters: self.dead_letters_itself(),
            },
            "stream" => QueueFacts {
                counts: false,
                requeues: false,
                dead_letters: false,
            },
            _ => QueueFacts {
                counts: false,
                requeues: true,
                dead_letters: false,
            },
        }
    }
}

/// `x-delivery-limit` for a cap of `max_attempts`.
pub fn delivery_limit(max_attempts: u32) -> i64 {
    i64::from(max_attempts) - 1
}

/// A queue argument's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A string (`longstr` over 0-9-1).
    Text(String),
    /// A whole number.
    Int(i64),
}

/// The arguments a declaration gives a new queue of `kind` (`classic`, `quorum`,
/// `stream`) on a broker of `major` version; `Err` where the mount's dead letter is no
/// queue or exchange (see [`dead_letter_target`]).
///
/// A quorum queue gets `x-delivery-limit` = `max_attempts − 1` (without `max_attempts`:
/// `-1` on RabbitMQ 4, whose default would remove messages after 21 deliveries), and the
/// dead letter as its dead-letter exchange and key, dead-lettering `at-least-once` (which
/// needs `x-overflow: reject-publish`). Only a quorum queue dead-letters for the mount: on
/// a classic queue the runtime publishes the dead letters, and a dead-letter exchange
/// would also take what the runtime rejects on purpose (every `drop()`, the original of
/// every `retry_after` copy).
pub fn arguments(
    kind: &str,
    declaration: &Declaration,
    major: Option<u32>,
) -> Result<Vec<(&'static str, Arg)>, String> {
    let mut args = vec![("x-queue-type", Arg::Text(kind.to_owned()))];
    if kind != "quorum" {
        return Ok(args);
    }
    let limit = match declaration.max_attempts {
        Some(n) => Some(delivery_limit(n.get())),
        None => crate::limit::unlimited_argument(major),
    };
    if let Some(limit) = limit {
        args.push(("x-delivery-limit", Arg::Int(limit)));
    }
    if let Some(dead) = &declaration.dead_letter {
        let (exchange, key) = dead_letter_target(dead)
            .ok_or_else(|| format!("dead letter {dead} is not a queue or an exchange"))?;
        args.push(("x-dead-letter-exchange", Arg::Text(exchange)));
        if let Some(key) = key {
            args.push(("x-dead-letter-routing-key", Arg::Text(key)));
        }
        args.push(("x-dead-letter-strategy", Arg::Text("at-least-once".into())));
        args.push(("x-overflow", Arg::Text("reject-publish".into())));
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_core::Address;
    use std::num::NonZeroU32;

    fn quorum(limit: Option<i64>, dlx: Option<&str>) -> QueueInfo {
        QueueInfo {
            kind: "quorum".into(),
            delivery_limit: limit,
            dlx: dlx.map(Into::into),
            dlrk: None,
        }
    }

    #[test]
    fn facts_follow_the_queue() {
        let classic = QueueInfo {
            kind: "classic".into(),
            ..QueueInfo::default()
        };
        assert!(!classic.facts().counts && classic.facts().requeues);
        assert!(quorum(None, None).facts().counts);
        assert!(!quorum(Some(2), None).facts().dead_letters);
        assert!(!quorum(Some(-1), Some("")).facts().dead_letters);
        assert!(quorum(Some(2), Some("")).facts().dead_letters);
        let stream = QueueInfo {
            kind: "stream".into(),
            ..QueueInfo::default()
        };
        assert!(!stream.facts().requeues && !stream.facts().counts);
    }

    #[test]
    fn declared_arguments() {
        let capped = Declaration {
            max_attempts: NonZeroU32::new(3),
            dead_letter: Some(Address::from("dead")),
            ..Declaration::default()
        };
        let args = arguments("quorum", &capped, Some(4)).expect("ok");
        let text = |s: &str| Arg::Text(s.into());
        assert_eq!(
            args,
            [
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", Arg::Int(2)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text("dead")),
                ("x-dead-letter-strategy", text("at-least-once")),
                ("x-overflow", text("reject-publish")),
            ]
        );
        // A classic queue gets no dead-letter exchange and no limit.
        assert_eq!(
            arguments("classic", &capped, Some(4)),
            Ok(vec![("x-queue-type", text("classic"))])
        );
        // No cap: no limit, which RabbitMQ 4 must be told.
        let none = Declaration::default();
        let args = arguments("quorum", &none, Some(4)).expect("ok");
        assert!(args.contains(&("x-delivery-limit", Arg::Int(-1))));
        assert_eq!(arguments("quorum", &none, Some(3)).map(|a| a.len()), Ok(1));
        assert_eq!(delivery_limit(5), 4);
        // A dead letter that is neither a queue nor an exchange is named.
        let nowhere = Declaration {
            dead_letter: Some(Address::from("/topics/t")),
            ..Declaration::default()
        };
        let error = arguments("quorum", &nowhere, Some(4)).expect_err("refused");
        assert!(error.contains("/topics/t"), "{error}");
    }
}
