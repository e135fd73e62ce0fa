//! The delivery limit a RabbitMQ quorum queue enforces, and whether a mount's cap fits
//! under it.
//!
//! RabbitMQ removes a quorum queue's message returned more than its limit `L` times (it
//! is delivered `L + 1` times): to the queue's dead-letter exchange, or nowhere. Where
//! the limit comes from (measured on RabbitMQ 3.10.8 and 4.0.5):
//!
//! | `x-delivery-limit` | RabbitMQ 3 | RabbitMQ 4 |
//! |---|---|---|
//! | none | no limit | **20** (the default) |
//! | `-1` (negative) | 0: delivered once | no limit |
//! | `L ≥ 0` | `L` | `L` |
//!
//! A policy's `delivery-limit` is not an argument and cannot be read: the mount states
//! it (`delivery_limit`), and a stated limit wins.

use ruststream_core::Declaration;

use crate::QueueInfo;

/// RabbitMQ 4's delivery limit of a quorum queue that sets none.
pub const RABBITMQ4_DEFAULT: i64 = 20;

/// Where a limit comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The queue's `x-delivery-limit`.
    Argument,
    /// RabbitMQ 4's default: the queue has no `x-delivery-limit`.
    Default,
    /// The mount's `delivery_limit` (a policy's).
    Stated,
}

/// The delivery limit a queue enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// None: the queue delivers a message as often as it is returned.
    Unlimited,
    /// A message is delivered at most `limit + 1` times.
    At {
        /// The limit.
        limit: i64,
        /// Where it comes from.
        from: Source,
    },
    /// Not known: the broker's version could not be read.
    Unknown,
}

/// The limit of a queue of `kind` with `argument` (`x-delivery-limit`) on a broker of
/// major version `major`; `stated` is the mount's `delivery_limit` (negative: none).
pub fn effective(
    kind: &str,
    argument: Option<i64>,
    stated: Option<i64>,
    major: Option<u32>,
) -> Limit {
    if let Some(limit) = stated {
        return if limit < 0 {
            Limit::Unlimited
        } else {
            Limit::At {
                limit,
                from: Source::Stated,
            }
        };
    }
    if kind != "quorum" {
        return Limit::Unlimited;
    }
    let four = major.map(|m| m >= 4);
    match (argument, four) {
        (Some(limit), _) if limit >= 0 => Limit::At {
            limit,
            from: Source::Argument,
        },
        (Some(_), Some(true)) | (None, Some(false)) => Limit::Unlimited,
        (Some(_), Some(false)) => Limit::At {
            limit: 0,
            from: Source::Argument,
        },
        (None, Some(true)) => Limit::At {
            limit: RABBITMQ4_DEFAULT,
            from: Source::Default,
        },
        (_, None) => Limit::Unknown,
    }
}

/// What the mount's cap makes of `limit` on `queue`: `Err` where the broker would
/// remove a message before `max_attempts` (with the fix), `Ok(Some(warning))` where it
/// removes messages the runtime would retry again (no `max_attempts`), or cannot tell.
/// `dead_letters` says whether the queue has a dead-letter exchange.
pub fn check(
    limit: Limit,
    declaration: &Declaration,
    queue: &str,
    dead_letters: bool,
) -> Result<Option<String>, String> {
    let cap = declaration.max_attempts.map(std::num::NonZeroU32::get);
    let removes = if dead_letters {
        "dead-letters it"
    } else {
        "drops it (no dead-letter exchange)"
    };
    match (limit, cap) {
        (Limit::At { limit, from }, Some(n)) if i64::from(n) - 1 > limit => {
            let wanted = i64::from(n) - 1;
            let why = match from {
                Source::Argument => format!("x-delivery-limit {limit}"),
                Source::Default => {
                    format!("RabbitMQ 4's default {limit}: the queue has no x-delivery-limit")
                }
                Source::Stated => format!("delivery_limit {limit}, stated by the mount"),
            };
            Err(format!(
                "is a quorum queue with a delivery limit of {limit} ({why}): RabbitMQ {removes} \
                 after {} deliveries, before max_attempts({n}); fix: max_attempts({}) or less, \
                 or a limit of {wanted}: `rabbitmqctl set_policy {queue}-limit '^{queue}$' \
                 '{{\"delivery-limit\":{wanted}}}' --apply-to quorum_queues` and \
                 delivery_limit={wanted} on the mount (a policy cannot be read), or the queue \
                 made again with x-delivery-limit {wanted}",
                limit + 1,
                limit + 1,
            ))
        }
        (Limit::At { limit, .. }, None) => Ok(Some(format!(
            "RabbitMQ {removes} after {} deliveries (delivery limit {limit}); the mount has \
             no max_attempts",
            limit + 1
        ))),
        (Limit::Unknown, cap) if cap.is_none_or(|n| i64::from(n) - 1 > RABBITMQ4_DEFAULT) => {
            Ok(Some(format!(
                "the broker's version is unknown: on RabbitMQ 4 a quorum queue without \
                 x-delivery-limit {removes} after {} deliveries",
                RABBITMQ4_DEFAULT + 1
            )))
        }
        _ => Ok(None),
    }
}

/// Whether queue `info` has a delivery limit to check: a quorum queue's, or one the mount
/// states (`stated`, its `delivery_limit`).
pub fn applies(info: &QueueInfo, stated: Option<i64>) -> bool {
    info.kind == "quorum" || stated.is_some()
}

/// [`check`] of the limit queue `info` (named `queue`) enforces on a broker of `major`,
/// with the mount's `stated` limit (see [`effective`]).
pub fn check_queue(
    info: &QueueInfo,
    stated: Option<i64>,
    major: Option<u32>,
    declaration: &Declaration,
    queue: &str,
) -> Result<Option<String>, String> {
    let limit = effective(&info.kind, info.delivery_limit, stated, major);
    check(limit, declaration, queue, info.dlx.is_some())
}

/// The `x-delivery-limit` a quorum queue made for a mount without `max_attempts` needs on
/// a broker of `major`: `-1` on RabbitMQ 4 (else its default removes messages after 21
/// deliveries), none on RabbitMQ 3.
pub fn unlimited_argument(major: Option<u32>) -> Option<i64> {
    major.is_some_and(|m| m >= 4).then_some(-1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn capped(n: Option<u32>) -> Declaration {
        Declaration {
            max_attempts: n.and_then(NonZeroU32::new),
            ..Declaration::default()
        }
    }

    #[test]
    fn the_limit_by_version_and_argument() {
        let at = |limit, from| Limit::At { limit, from };
        assert_eq!(
            effective("quorum", None, None, Some(4)),
            at(20, Source::Default)
        );
        assert_eq!(effective("quorum", None, None, Some(3)), Limit::Unlimited);
        assert_eq!(
            effective("quorum", Some(-1), None, Some(4)),
            Limit::Unlimited
        );
        assert_eq!(
            effective("quorum", Some(-1), None, Some(3)),
            at(0, Source::Argument)
        );
        assert_eq!(
            effective("quorum", Some(30), None, Some(4)),
            at(30, Source::Argument)
        );
        assert_eq!(effective("quorum", None, None, None), Limit::Unknown);
        assert_eq!(effective("classic", None, None, Some(4)), Limit::Unlimited);
        assert_eq!(
            effective("quorum", None, Some(24), Some(4)),
            at(24, Source::Stated)
        );
        assert_eq!(
            effective("quorum", None, Some(-1), Some(4)),
            Limit::Unlimited
        );
    }

    #[test]
    fn a_cap_above_the_limit_is_refused_with_the_fix() {
        let limit = effective("quorum", None, None, Some(4));
        let e = check(limit, &capped(Some(25)), "orders", true).expect_err("above");
        for says in [
            "delivery limit of 20",
            "RabbitMQ 4's default",
            "max_attempts(21) or less",
            "set_policy orders-limit '^orders$' '{\"delivery-limit\":24}'",
            "delivery_limit=24",
        ] {
            assert!(e.contains(says), "{says}: {e}");
        }
        assert_eq!(check(limit, &capped(Some(21)), "orders", true), Ok(None));
        let warned = check(limit, &capped(None), "orders", false).expect("warned");
        assert!(warned.is_some_and(|w| w.contains("drops it")));
        assert_eq!(
            check(Limit::Unlimited, &capped(Some(25)), "orders", true),
            Ok(None)
        );
        assert!(matches!(
            check(Limit::Unknown, &capped(Some(25)), "orders", true),
            Ok(Some(_))
        ));
        assert_eq!(
            check(Limit::Unknown, &capped(Some(5)), "orders", true),
            Ok(None)
        );
    }

    #[test]
    fn a_queue_is_checked_with_its_own_limit() {
        let quorum = QueueInfo {
            kind: "quorum".into(),
            delivery_limit: Some(4),
            ..QueueInfo::default()
        };
        assert!(applies(&quorum, None));
        let e = check_queue(&quorum, None, Some(4), &capped(Some(6)), "q").expect_err("above");
        assert!(e.contains("x-delivery-limit 4"), "{e}");
        assert_eq!(
            check_queue(&quorum, None, Some(4), &capped(Some(5)), "q"),
            Ok(None)
        );
        let classic = QueueInfo {
            kind: "classic".into(),
            ..QueueInfo::default()
        };
        assert!(!applies(&classic, None) && applies(&classic, Some(3)));
        assert!(check_queue(&classic, Some(3), Some(4), &capped(Some(6)), "q").is_err());
    }

    #[test]
    fn an_unlimited_queue_is_declared_so_on_rabbitmq_4() {
        assert_eq!(unlimited_argument(Some(4)), Some(-1));
        assert_eq!(unlimited_argument(Some(3)), None);
        assert_eq!(unlimited_argument(None), None);
    }
}
