//! The names the metrics and the spans give verdicts and plans.

#[cfg(feature = "otel")]
use ruststream_core::Verdict;
use ruststream_core::{Original, Plan, Republish, Settlement};

pub(crate) const VERDICTS: [&str; 4] = ["ack", "drop", "retry", "retry_after"];
pub(crate) const PLANS: [&str; 11] = [
    "accept",
    "reject",
    "requeue",
    "requeue_after",
    "remove",
    "hold",
    "unsupported",
    "untouched",
    "copy",
    "delayed_copy",
    "dead_letter",
];

/// The index in [`PLANS`] of what `plan` does.
pub(crate) fn plan_kind(plan: &Plan) -> usize {
    match (&plan.copy, plan.original) {
        (
            Some(Republish {
                retry_count: None, ..
            }),
            _,
        ) => 10,
        (Some(Republish { delay: Some(_), .. }), _) => 9,
        (Some(_), _) => 8,
        (None, Original::Settle(Settlement::Accept)) => 0,
        (None, Original::Settle(Settlement::Reject)) => 1,
        (None, Original::Settle(Settlement::Requeue)) => 2,
        (None, Original::Settle(Settlement::RequeueAfter(_))) => 3,
        (None, Original::Settle(Settlement::Remove)) => 4,
        (None, Original::Hold(..)) => 5,
        (None, Original::Unsupported) => 6,
        (None, Original::Untouched) => 7,
    }
}

/// What `plan` does: `accept`, `copy`, `dead_letter`, ...
#[cfg(feature = "otel")]
pub(crate) fn plan_name(plan: &Plan) -> &'static str {
    PLANS[plan_kind(plan)]
}

/// The verdict's name: `ack`, `drop`, `retry`, `retry_after`.
#[cfg(feature = "otel")]
pub(crate) fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Ack => VERDICTS[0],
        Verdict::Drop => VERDICTS[1],
        Verdict::Retry => VERDICTS[2],
        Verdict::RetryAfter(_) => VERDICTS[3],
    }
}
