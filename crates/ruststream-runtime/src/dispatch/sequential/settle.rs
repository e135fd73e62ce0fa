//! What follows a delivery's handler in the loop: its settlement (done at once, trailing
//! behind the loop, or with a copy, a reply or an `and_after` to wait for) and what the
//! hooks learn once it is over.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ruststream_core::{AckError, Address, BoxFuture, Delivery, Facts, Plan, Settlement, Verdict};

use super::super::execute::{Execution, execute};
use super::super::worker::{Layers, Process, Worker, bare};
use super::behind::Behind;
use crate::dead_letter::Why;
use crate::handler::Handler;
use crate::layer::Visits;
use crate::outcome::{After, Outcome};
use crate::settled::{Cause, SettleError, Settled};

/// What follows a delivery's handler, in place.
#[derive(Default)]
pub(super) struct AfterHandler {
    // The settlement under way, and what the hooks learn once it is over.
    pub(super) settling: Option<Execution>,
    pub(super) report: Option<Report>,
    // The outcome's `and_after`, or the slow path of an outcome with a reply.
    pub(super) after: Option<BoxFuture<'static, ()>>,
    // Whether the in-flight gauge counts the delivery in hand.
    pub(super) counted: bool,
    // When the handler in hand was called, where a settlement is reported (hooks or
    // middleware): its `Settled::elapsed`.
    pub(super) started: Option<Instant>,
    // Bare settlements under way behind the loop; the gauge counts each.
    pub(super) trailing: Behind<Report>,
    // How many may be (`Concurrency::trailing`): 64 (or the broker's number) for a
    // sequential mount; for each worker, nothing unless the broker declares a number;
    // nothing for a lane.
    pub(super) limit: usize,
}

/// What the hooks learn once the settlement is over.
pub(super) struct Report {
    address: Address,
    attempt: u32,
    verdict: Verdict,
    cause: Cause,
    plan: Plan,
    after: Option<After>,
    visits: Visits,
    elapsed: Option<Duration>,
}

impl Report {
    pub(super) fn settled(
        self,
        result: Result<(), SettleError>,
    ) -> (Settled, Option<After>, Visits) {
        let settled = Settled {
            address: self.address,
            attempt: self.attempt,
            verdict: self.verdict,
            cause: self.cause,
            plan: self.plan,
            result,
            elapsed: self.elapsed,
        };
        (settled, self.after, self.visits)
    }
}

/// Lets go of the settlements under way behind the loop that are over (looked at only
/// when one of them woke the loop).
#[inline]
pub(super) fn poll_trailing<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    trailing: &mut Behind<Report>,
    cx: &Context<'_>,
) {
    let over = trailing.poll_over(cx, |result, report| over(worker, result, report));
    if over > 0 {
        worker.runtime().in_flight.fetch_sub(over, Ordering::AcqRel);
    }
}

/// A bare settlement is over: its failure logged, the hooks told.
#[inline]
fn over<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    result: Result<(), AckError>,
    report: Option<Report>,
) {
    let result = result.map_err(SettleError::from);
    if let Err(error) = &result {
        worker.settlement_failed(error);
    }
    if let Some(report) = report {
        let (settled, after, visits) = report.settled(result);
        // A bare settlement has no `and_after`: the hooks are all there is to run.
        let _ = worker.after_settled(settled, after, &visits);
    }
}

/// The loop takes no more deliveries: it ends once the trailing settlements are over
/// (each registered the loop's waker when it was last polled).
#[inline]
pub(super) fn end(next: &AfterHandler) -> Poll<()> {
    if next.trailing.is_empty() {
        Poll::Ready(())
    } else {
        Poll::Pending
    }
}

/// The in-flight gauge no longer counts this loop's delivery.
#[inline]
pub(super) fn uncount<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    counted: &mut bool,
) {
    if std::mem::take(counted) {
        worker.runtime().in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts carrying out what `decided` says for `delivery`; `false` means stop (a
/// `fail_fast`: the delivery is dropped unsettled for the broker to hand back).
///
/// A bare settlement that the adapter does at once is over before this returns.
#[inline(always)]
pub(super) fn settle<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    shared: &Arc<Worker<H, M, L>>,
    delivery: Delivery,
    decided: Option<(Outcome, Cause)>,
    visits: &mut Visits,
    next: &mut AfterHandler,
    cx: &mut Context<'_>,
) -> bool {
    let Some((outcome, cause)) = decided else {
        return false;
    };
    let facts = Facts::of(&delivery, &worker.capabilities()).within(&worker.mount().declaration);
    let plan = worker.plan(&delivery, facts, &outcome, &cause);
    if let Some(settlement) = bare(&outcome, &plan) {
        // The common case: a bare settlement, with nothing to publish, and at most the
        // hooks to tell once it is over.
        if worker.watched() {
            let elapsed = elapsed(next);
            let report = Report {
                address: delivery.address().clone(),
                attempt: facts.attempt,
                verdict: outcome.verdict,
                cause,
                plan: plan.clone(),
                after: None,
                visits: std::mem::take(visits),
                elapsed,
            };
            settle_told(worker, delivery, settlement, report, next, cx);
            return true;
        }
        match delivery.settle(settlement).into_ready() {
            Ok(result) => {
                if let Err(error) = result {
                    worker.settlement_failed(&error.into());
                }
                uncount(worker, &mut next.counted);
            }
            Err(settling) if next.trailing.len() < next.limit => {
                // Under way behind the loop: polled once now, so that it starts.
                match next.trailing.start(settling, None, cx) {
                    Some((result, _)) => {
                        if let Err(error) = result {
                            worker.settlement_failed(&error.into());
                        }
                        uncount(worker, &mut next.counted);
                    }
                    None => next.counted = false,
                }
            }
            Err(settling) => next.settling = Some(Execution::Settle(settling)),
        }
        return true;
    }
    let visits = std::mem::take(visits);
    let elapsed = elapsed(next);
    settle_slow(
        shared,
        delivery,
        (outcome, cause, elapsed),
        facts,
        plan,
        visits,
        next,
    );
    true
}

/// How long the handler in hand ran, where it was timed (where someone learns of each
/// settlement; not where it never ran).
#[inline(always)]
fn elapsed(next: &mut AfterHandler) -> Option<Duration> {
    next.started.take().map(|started| started.elapsed())
}

/// [`settle`] for a bare settlement the service's hooks are told of once it is over.
#[inline(never)]
fn settle_told<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    delivery: Delivery,
    settlement: Settlement,
    report: Report,
    next: &mut AfterHandler,
    cx: &mut Context<'_>,
) {
    let mut settling = delivery.settle(settlement);
    let (result, report) = match settling.take_ready() {
        Some(result) => (result, Some(report)),
        None if next.trailing.len() < next.limit => {
            match next.trailing.start(settling, Some(report), cx) {
                Some(over) => over,
                None => {
                    next.counted = false;
                    return;
                }
            }
        }
        None => {
            next.settling = Some(Execution::Settle(settling));
            next.report = Some(report);
            return;
        }
    };
    over(worker, result, report);
    uncount(worker, &mut next.counted);
}

/// [`settle`] for everything but a bare settlement: a reply, a copy, an `and_after`.
#[inline(never)]
fn settle_slow<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Arc<Worker<H, M, L>>,
    delivery: Delivery,
    (outcome, cause, elapsed): (Outcome, Cause, Option<Duration>),
    facts: Facts,
    plan: Plan,
    visits: Visits,
    next: &mut AfterHandler,
) {
    if outcome.reply.is_some() {
        // A reply is published first: in a future of its own, inside the delivery's
        // visits (the reply continues its trace).
        let worker = worker.clone();
        let entered = visits.enters();
        let entering = visits.clone();
        let finish = async move {
            worker
                .finish(delivery, (outcome, cause), facts, plan, visits, elapsed)
                .await;
        };
        next.after = Some(if entered {
            Box::pin(entering.enter(finish))
        } else {
            Box::pin(finish)
        });
        return;
    }
    let watched = outcome.after.is_some() || worker.watched();
    let address = watched.then(|| delivery.address().clone());
    let why = Why {
        from: &worker.mount().address,
        attempt: facts.attempt,
        cause: &cause,
        reason: outcome.reason.as_deref(),
        service: &worker.runtime().service,
    };
    next.settling = Some(execute(
        delivery,
        &plan,
        &worker.capabilities(),
        worker.runtime(),
        &why,
        &visits,
    ));
    if let Some(address) = address {
        next.report = Some(Report {
            address,
            attempt: facts.attempt,
            verdict: outcome.verdict,
            cause,
            plan,
            after: outcome.after,
            visits,
            elapsed,
        });
    }
}
