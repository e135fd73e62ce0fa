//! The settlement decision: one pure function from an outcome and the facts to a plan.
//!
//! This is the whole of the specification's §6. Adapters execute the [`Settlement`] of
//! a plan; the runtime publishes its copy. Nobody re-decides.

use std::time::Duration;

use crate::{Address, Capabilities, Declaration, Delivery, Settlement};

/// What the handler (or a failure policy) asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `ack()`: done.
    Ack,
    /// `drop()`: rejected.
    Drop,
    /// `retry()`: redeliver now.
    Retry,
    /// `retry_after(d)`: redeliver after `d`.
    RetryAfter(Duration),
}

/// The facts about one delivery that the decision reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Facts {
    /// The attempt number: the broker's count + 1 where the delivery counts, else
    /// `x-ruststream-retry-count` + 1.
    pub attempt: u32,
    /// Whether this delivery carries the broker's own count.
    pub counts: bool,
}

impl Facts {
    /// The facts of `delivery` on a form with `capabilities`.
    #[inline]
    pub fn of(delivery: &Delivery, capabilities: &Capabilities) -> Self {
        Self {
            attempt: delivery.redelivery_count(),
            counts: capabilities.counts && delivery.broker_attempt().is_some(),
        }
    }

    /// These facts with a retry-count header's claim beyond the cap not believed.
    ///
    /// A copy the runtime publishes carries the attempt it replaces, always below the
    /// cap, so a delivery that counts by its `x-ruststream-retry-count` can claim an
    /// attempt beyond `max_attempts` only if someone else wrote the header: a producer
    /// (by mistake or to skip the retries), or a service with a higher cap on the same
    /// address. Such a claim would spend the message at its first retry; it is taken as
    /// attempt 1 instead, so the message gets every attempt the mount declares. A claim
    /// within the cap is believed (it is how copies count), and the broker's own count is
    /// never second-guessed (a broker that counts would otherwise redeliver forever).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use ruststream_core::{Declaration, Facts};
    ///
    /// let decl = Declaration { max_attempts: NonZeroU32::new(5), ..Declaration::default() };
    /// let claimed = Facts { attempt: 1_000, counts: false };
    /// assert_eq!(claimed.within(&decl).attempt, 1);
    /// let copy = Facts { attempt: 5, counts: false };
    /// assert_eq!(copy.within(&decl).attempt, 5);
    /// let broker = Facts { attempt: 1_000, counts: true };
    /// assert_eq!(broker.within(&decl).attempt, 1_000);
    /// ```
    #[inline]
    #[must_use]
    pub fn within(self, decl: &Declaration) -> Self {
        match decl.max_attempts {
            Some(cap) if !self.counts && self.attempt > cap.get() => Self {
                attempt: 1,
                counts: false,
            },
            _ => self,
        }
    }
}

/// What to do: maybe publish a copy, and what becomes of the original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// A copy to publish. Without a delay it is published **before** the original is
    /// settled (a crash leaves a duplicate, never a loss); with one, the original is
    /// settled now and the copy published from the process when the delay is over.
    pub copy: Option<Republish>,
    /// What becomes of the original.
    pub original: Original,
}

impl Plan {
    fn only(original: Original) -> Self {
        Self {
            copy: None,
            original,
        }
    }
}

/// A copy of the delivery to publish: a retry, at once or after a delay, or a dead
/// letter. The one type for it, from the decision to the middleware that sees it go out
/// (the runtime's `Visit::publishes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Republish {
    /// Where it goes: the retry address or the dead letter.
    pub to: Address,
    /// `Some(n)`: a retry copy whose `x-ruststream-retry-count` is `n` (the attempt it
    /// replaces), so the copy's attempt is `n + 1`. `None`: the delivery as it arrived
    /// (a dead letter).
    pub retry_count: Option<u32>,
    /// Publish after this delay, from the process (lost if the process stops first).
    /// The original is then settled at once with [`Settlement::Reject`].
    pub delay: Option<Duration>,
}

impl Republish {
    /// What it is: `retry`, `delayed_retry` or `dead_letter` (a copy without a retry
    /// count, whatever its delay).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_core::{Address, Republish};
    ///
    /// let copy = |retry_count, delay| Republish { to: Address::new("q"), retry_count, delay };
    /// assert_eq!(copy(Some(1), None).as_str(), "retry");
    /// assert_eq!(copy(Some(1), Some(Duration::from_secs(5))).as_str(), "delayed_retry");
    /// assert_eq!(copy(None, None).as_str(), "dead_letter");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match (self.retry_count, self.delay) {
            (None, _) => "dead_letter",
            (Some(_), Some(_)) => "delayed_retry",
            (Some(_), None) => "retry",
        }
    }
}

/// What becomes of the original delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Original {
    /// Settle it now, this way.
    Settle(Settlement),
    /// Keep it unsettled for the delay, then settle it this way (a broker that counts
    /// and dead-letters itself but has no delayed redelivery).
    Hold(Duration, Settlement),
    /// The form cannot settle the outcome asked: `AckError::Unsupported`, logged.
    Unsupported,
    /// Nothing to do: the form does not settle and a copy carries the retry.
    Untouched,
}

/// Decides what to do with a delivery.
///
/// `own` is the subscription's address, where retry copies go unless the declaration
/// names a retry address.
///
/// ```
/// use std::num::NonZeroU32;
/// use ruststream_core::{decide, Address, Capabilities, Declaration, Facts, Original, Settlement, Verdict};
///
/// let decl = Declaration { max_attempts: NonZeroU32::new(3), ..Declaration::default() };
/// let own = Address::new("orders");
/// let plan = decide(Verdict::Retry, Facts { attempt: 3, counts: false }, Capabilities::SETTLES, &decl, &own);
/// // At the cap without a dead letter: rejected.
/// assert_eq!(plan.original, Original::Settle(Settlement::Reject));
/// assert!(plan.copy.is_none());
/// ```
#[inline]
pub fn decide(
    verdict: Verdict,
    facts: Facts,
    caps: Capabilities,
    decl: &Declaration,
    own: &Address,
) -> Plan {
    let settle_or_unsupported = |s| {
        if caps.settles {
            Original::Settle(s)
        } else {
            Original::Unsupported
        }
    };
    let remove = if caps.settles {
        Original::Settle(Settlement::Remove)
    } else {
        Original::Untouched
    };
    let delay = match verdict {
        Verdict::Ack => return Plan::only(settle_or_unsupported(Settlement::Accept)),
        Verdict::Drop => return Plan::only(settle_or_unsupported(Settlement::Reject)),
        Verdict::Retry => None,
        Verdict::RetryAfter(d) => Some(d),
    };

    // A broker that dead-letters itself counts and moves spent deliveries on its own.
    if caps.dead_letters && caps.requeues {
        return Plan::only(match delay {
            None => Original::Settle(Settlement::Requeue),
            Some(d) if caps.delays_for(d) => Original::Settle(Settlement::RequeueAfter(d)),
            Some(d) => Original::Hold(d, Settlement::Requeue),
        });
    }

    // The cap is checked before any retry; a dead letter without a cap takes every retry.
    let at_cap = decl.max_attempts.is_some_and(|n| facts.attempt >= n.get());
    if at_cap || (decl.max_attempts.is_none() && decl.dead_letter.is_some()) {
        return match &decl.dead_letter {
            Some(dead_letter) => Plan {
                copy: Some(Republish {
                    to: dead_letter.clone(),
                    retry_count: None,
                    delay: None,
                }),
                original: remove,
            },
            None => Plan::only(settle_or_unsupported(Settlement::Reject)),
        };
    }

    let copy = |delay| {
        Some(Republish {
            to: decl.retry_to.clone().unwrap_or_else(|| own.clone()),
            retry_count: Some(facts.attempt),
            delay,
        })
    };
    match delay {
        Some(d) if caps.delays_for(d) => Plan::only(Original::Settle(Settlement::RequeueAfter(d))),
        // The original goes now, as `rejected` (the seeds' AMQP `retry_after`; Redis
        // `XACK` / `LREM`); the copy follows from the process after `d`.
        Some(d) => Plan {
            copy: copy(Some(d)),
            original: if caps.settles {
                Original::Settle(Settlement::Reject)
            } else {
                Original::Untouched
            },
        },
        None if !decl.is_declared() && caps.requeues => {
            Plan::only(Original::Settle(Settlement::Requeue))
        }
        None if !decl.is_declared() && !caps.settles => Plan::only(Original::Unsupported),
        None if decl.is_declared() && facts.counts => Plan::only(if caps.requeues {
            Original::Settle(Settlement::Requeue)
        } else {
            Original::Unsupported
        }),
        None => Plan {
            copy: copy(None),
            original: remove,
        },
    }
}
