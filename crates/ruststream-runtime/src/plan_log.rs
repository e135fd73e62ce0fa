//! The log of each delivery's plan, one line a person can follow: where a retry went
//! and when, what a handler dropped, what was dead-lettered or rejected at the cap.

use ruststream_core::{
    Address, Capabilities, Declaration, Delivery, Facts, MESSAGE_ID, Original, Plan, Settlement,
    Verdict,
};

use crate::mount::Mount;
use crate::outcome::Outcome;
use crate::settled::Cause;

/// Logs the plan decided for `delivery` of `mount` (with the capabilities of its
/// subscription): at debug for every delivery; at info for a retry and a handler's drop;
/// at warn where a retry was spent (dead-lettered, or rejected at the cap).
pub(crate) fn log(
    (mount, capabilities): (&Mount, Capabilities),
    delivery: &Delivery,
    facts: Facts,
    outcome: &Outcome,
    cause: &Cause,
    plan: &Plan,
) {
    let (verdict, reason) = (outcome.verdict, outcome.reason());
    let message_id = delivery.headers().get_str(MESSAGE_ID);
    // A queue that dead-letters itself takes a retry at the cap to its dead letter
    // (its delivery limit is the cap): the broker moves it, and the line says so.
    let by_broker = capabilities.dead_letters
        && broker_dead_letters(verdict, facts.attempt, &mount.declaration);
    if spent(verdict, plan) || by_broker {
        let copied = plan
            .copy
            .as_ref()
            .filter(|copy| copy.retry_count.is_none())
            .map(|copy| copy.to.as_str());
        let dead_letter = copied.or_else(|| {
            by_broker
                .then_some(mount.declaration.dead_letter.as_ref())
                .flatten()
                .map(Address::as_str)
        });
        tracing::warn!(
            address = %mount.address,
            message_id,
            attempt = facts.attempt,
            ?verdict,
            ?cause,
            reason,
            dead_letter,
            ?plan,
            "{}",
            if copied.is_some() {
                "dead-lettered"
            } else if by_broker {
                "dead-lettered by the broker"
            } else {
                "rejected at the attempt cap"
            }
        );
    } else if matches!(verdict, Verdict::Retry | Verdict::RetryAfter(_)) {
        // One line a person can follow per retry: where it went, and when.
        let (to, delay) = match &plan.copy {
            Some(copy) => (copy.to.as_str(), copy.delay),
            None => ("the broker", None),
        };
        tracing::info!(
            address = %mount.address,
            message_id,
            attempt = facts.attempt,
            ?verdict,
            reason,
            to,
            delay = ?delay,
            "retrying"
        );
    } else if verdict == Verdict::Drop && *cause == Cause::Handler {
        tracing::info!(
            address = %mount.address,
            message_id,
            attempt = facts.attempt,
            reason,
            "dropped by the handler"
        );
    }
    tracing::debug!(
        address = %mount.address,
        message_id,
        attempt = facts.attempt,
        ?verdict,
        reason,
        ?plan,
        "handled"
    );
}

/// Whether a retry at `attempt` is the one a queue that dead-letters itself moves to
/// its dead letter: the broker's delivery limit is the mount's cap, so the retry of the
/// last attempt is refused by the broker.
pub(crate) fn broker_dead_letters(verdict: Verdict, attempt: u32, declared: &Declaration) -> bool {
    matches!(verdict, Verdict::Retry | Verdict::RetryAfter(_))
        && declared
            .max_attempts
            .is_some_and(|cap| attempt >= cap.get())
}

/// Whether `plan` ends the retries of a delivery its handler asked to retry: a dead
/// letter, or a rejection at the cap.
fn spent(verdict: Verdict, plan: &Plan) -> bool {
    matches!(verdict, Verdict::Retry | Verdict::RetryAfter(_))
        && match &plan.copy {
            Some(copy) => copy.retry_count.is_none(),
            None => plan.original == Original::Settle(Settlement::Reject),
        }
}
