//! Whether a queue that exists agrees with the mount's declaration, the same on both
//! protocols.
//!
//! One rule: a queue the broker settles for the mount, one that dead-letters itself or
//! one the mount declares, is held to the declaration exactly (its type, a delivery
//! limit of `max_attempts − 1`); any other queue only must not cut the runtime's cap
//! short. The dead-letter target is checked where the broker dead-letters: a queue that
//! does it itself, or a declared quorum queue (a declared classic queue has no
//! dead-letter exchange: the runtime dead-letters for it).

use ruststream_core::Declaration;

use crate::{QueueInfo, dead_letter_target, delivery_limit};

/// A route the check cannot see: the queue dead-letters through `exchange`, the mount
/// names the queue `queue`; they agree if the exchange is bound to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The queue's dead-letter exchange.
    pub exchange: String,
    /// The queue's dead-letter routing key (`None`: the message's own).
    pub key: Option<String>,
    /// The mount's dead-letter queue.
    pub queue: String,
}

impl Binding {
    /// The route, for messages: `exchange "X" key "K"`.
    pub fn route(&self) -> String {
        route(&self.exchange, self.key.as_deref())
    }
}

fn route(exchange: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("exchange {exchange:?} key {k:?}"),
        None => format!("exchange {exchange:?} with the message's own key"),
    }
}

/// Checks `info`, the queue `queue` as the broker described it, against the mount's
/// `declaration` and the type it `declared` (`classic`, `quorum`, `stream`), if any:
/// `Ok(None)` where they agree, `Ok(Some(binding))` where they agree if a binding the
/// check cannot see exists, `Err` with the difference and its fix (see the module docs).
pub fn check(
    info: &QueueInfo,
    declaration: &Declaration,
    declared: Option<&str>,
    queue: &str,
) -> Result<Option<Binding>, String> {
    // An existing queue's arguments cannot be changed (and a policy cannot raise a
    // delivery limit an argument sets): the queue is made again.
    let remake = format!(
        "make the queue again: `rabbitmqctl delete_queue {queue}` (its messages go with it), \
         then start the service, which declares it as the mount implies"
    );
    if let Some(kind) = declared
        && kind != info.kind
    {
        return Err(format!(
            "is a {} queue, declared {kind}; fix: declare={} on the mount, or {remake}",
            info.kind, info.kind
        ));
    }
    let exact = info.dead_letters_itself() || declared.is_some();
    if info.kind == "quorum"
        && let (Some(limit), Some(n)) = (info.delivery_limit, declaration.max_attempts)
        && limit >= 0
    {
        let wanted = delivery_limit(n.get());
        // A larger limit never cuts the runtime's cap short, unless the broker enforces it.
        let agrees = if exact {
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
    let broker_dead_letters = info.dead_letters_itself() || declared == Some("quorum");
    let Some(dead) = declaration
        .dead_letter
        .as_ref()
        .filter(|_| broker_dead_letters)
    else {
        return Ok(None);
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
    let dlrk = info.dlrk.as_deref();
    let has = route(dlx, dlrk);
    let Some((exchange, key)) = dead_letter_target(dead) else {
        return differs(&has);
    };
    let agrees = exchange == dlx
        && match (key.as_deref(), dlrk) {
            (Some(k), Some(h)) => k == h,
            // The default exchange routes by key: the message's own would not reach it.
            (_, None) => !exchange.is_empty(),
            (None, Some(_)) => true,
        };
    match key {
        _ if agrees => Ok(None),
        // The mount names a queue, the queue dead-letters through an exchange.
        Some(queue) if exchange.is_empty() && !dlx.is_empty() => Ok(Some(Binding {
            exchange: dlx.to_owned(),
            key: info.dlrk.clone(),
            queue,
        })),
        _ => differs(&has),
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
        assert_eq!(check(&q, &declared(3, Some("dead")), None, "q"), Ok(None));
        let e = check(&q, &declared(4, Some("dead")), None, "q").expect_err("off by one");
        for says in [
            "x-delivery-limit 2, max_attempts(4) needs 3",
            "max_attempts(3) on the mount",
            "rabbitmqctl delete_queue q",
        ] {
            assert!(e.contains(says), "{says}: {e}");
        }
        let e = check(&q, &declared(3, Some("other")), None, "q").expect_err("elsewhere");
        assert!(e.contains("dead_letter is other"), "{e}");
        let e = check(&q, &declared(3, None), Some("classic"), "q").expect_err("type");
        assert!(e.contains("is a quorum queue, declared classic"), "{e}");
    }

    #[test]
    fn a_larger_limit_is_fine_where_the_runtime_caps() {
        let q = quorum(Some(10), None, None);
        assert_eq!(check(&q, &declared(3, Some("dead")), None, "q"), Ok(None));
        let e = check(&q, &declared(20, None), None, "q").expect_err("cut short");
        assert!(e.contains("needs 19"), "{e}");
        // A declared queue is held to its declaration: exactly max_attempts − 1.
        let e = check(&q, &declared(3, None), Some("quorum"), "q").expect_err("declared");
        assert!(
            e.contains("x-delivery-limit 10, max_attempts(3) needs 2"),
            "{e}"
        );
    }

    #[test]
    fn a_queue_named_for_an_exchange_is_a_binding_to_check() {
        let q = quorum(Some(2), Some("dlx"), Some("k"));
        assert_eq!(
            check(&q, &declared(3, Some("/exchanges/dlx/k")), None, "q"),
            Ok(None)
        );
        let binding = check(&q, &declared(3, Some("dead")), None, "q").expect("a binding");
        assert_eq!(
            binding,
            Some(Binding {
                exchange: "dlx".into(),
                key: Some("k".into()),
                queue: "dead".into(),
            })
        );
        assert_eq!(
            binding.map(|b| b.route()).as_deref(),
            Some("exchange \"dlx\" key \"k\"")
        );
        let q = quorum(Some(2), Some("dlx"), None);
        let binding = check(&q, &declared(3, Some("d")), None, "q").expect("a binding");
        assert_eq!(
            binding.map(|b| (b.exchange, b.queue)),
            Some(("dlx".into(), "d".into()))
        );
        assert_eq!(
            check(&q, &declared(3, Some("/exchanges/dlx")), None, "q"),
            Ok(None)
        );
        assert!(check(&q, &declared(3, Some("/exchanges/other")), None, "q").is_err());
    }

    #[test]
    fn a_declared_classic_queue_leaves_dead_letters_to_the_runtime() {
        let classic = QueueInfo {
            kind: "classic".into(),
            ..QueueInfo::default()
        };
        let mount = declared(4, Some("d"));
        assert_eq!(check(&classic, &mount, Some("classic"), "q"), Ok(None));
        // A declared quorum queue must dead-letter where the mount says.
        let q = quorum(Some(3), None, None);
        let e = check(&q, &mount, Some("quorum"), "q").expect_err("nowhere");
        assert!(e.contains("dead-letters to nowhere"), "{e}");
    }
}
