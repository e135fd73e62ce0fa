//! What a mount may say of its queue over what the adapter finds out: the options both
//! adapters' `SubscribeOptions` carry.

use crate::{QueueFacts, QueueInfo};

/// What a queue does, stated by the mount over what the adapter finds out at subscribe:
/// for queues whose behaviour comes from a policy the adapter cannot read. Both RabbitMQ
/// adapters take it (`SubscribeOptions::queue`); the URL and mount settings `counts`,
/// `dead_letters` and `delivery_limit` set the same.
///
/// ```
/// use ruststream_rabbitmq::QueueOptions;
///
/// // A queue whose delivery limit and dead-letter exchange come from a policy.
/// let queue = QueueOptions::new().dead_letters(true).delivery_limit(5);
/// assert_eq!(queue.delivery_limit, Some(5));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueOptions {
    /// Whether the queue counts deliveries.
    pub counts: Option<bool>,
    /// Whether the queue enforces the cap and the dead letter itself.
    pub dead_letters: Option<bool>,
    /// The delivery limit the queue enforces (negative: none).
    pub delivery_limit: Option<i64>,
}

impl QueueOptions {
    /// Nothing overridden.
    pub const fn new() -> Self {
        Self {
            counts: None,
            dead_letters: None,
            delivery_limit: None,
        }
    }

    /// Says whether the queue counts the deliveries it hands back (quorum queues do, in
    /// `x-delivery-count` over AMQP 0-9-1 and the header's `delivery-count` over AMQP
    /// 1.0; classic queues and streams do not). Where it does not count, a capped
    /// `retry()` is carried by copies with `x-ruststream-retry-count` and ends at the
    /// cap. Set `true` only for a queue that counts (ActiveMQ Artemis over AMQP 1.0): on
    /// one that does not, a capped `retry()` never ends.
    pub const fn counts(mut self, counts: bool) -> Self {
        self.counts = Some(counts);
        self
    }

    /// Says whether the queue enforces the mount's cap and dead letter itself (a quorum
    /// queue with `x-delivery-limit` and a dead-letter exchange does). Retries are then
    /// always handed back to the broker, which moves spent deliveries.
    pub const fn dead_letters(mut self, dead_letters: bool) -> Self {
        self.dead_letters = Some(dead_letters);
        self
    }

    /// States the delivery limit the quorum queue enforces (negative: none), over its
    /// `x-delivery-limit`, else the broker's default (20 on RabbitMQ 4, none on RabbitMQ
    /// 3). Set it for a limit that comes from a policy's `delivery-limit`: a
    /// `max_attempts` whose deliveries do not fit under the limit is refused at subscribe.
    pub const fn delivery_limit(mut self, limit: i64) -> Self {
        self.delivery_limit = Some(limit);
        self
    }

    /// What a subscription to the queue `info` describes can do, these overrides
    /// applied; a queue not described (`None`) is taken as one that does not count.
    pub fn facts(&self, info: Option<&QueueInfo>) -> QueueFacts {
        let found = info.map_or(
            QueueFacts {
                counts: false,
                requeues: true,
                dead_letters: false,
            },
            QueueInfo::facts,
        );
        QueueFacts {
            counts: self.counts.unwrap_or(found.counts),
            requeues: found.requeues,
            dead_letters: self.dead_letters.unwrap_or(found.dead_letters),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_over_what_was_found() {
        let quorum = QueueInfo {
            kind: "quorum".into(),
            ..QueueInfo::default()
        };
        let found = QueueOptions::new().facts(Some(&quorum));
        assert!(found.counts && found.requeues && !found.dead_letters);
        let told = QueueOptions::new().counts(false).dead_letters(true);
        let facts = told.facts(Some(&quorum));
        assert!(!facts.counts && facts.dead_letters);
        let unknown = QueueOptions::new().facts(None);
        assert!(!unknown.counts && unknown.requeues && !unknown.dead_letters);
        assert_eq!(
            QueueOptions::new().delivery_limit(-1).delivery_limit,
            Some(-1)
        );
    }
}
