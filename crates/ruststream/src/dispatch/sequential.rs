//! The sequential loop (one delivery at a time, in order) as one hand-written future.
//!
//! The default concurrency, and the one the delivery path is measured on: the loop takes a
//! delivery, runs its handler, settles it and reports it with every piece of state kept in
//! place in this one future, so that a delivery whose handler finishes at once and whose
//! settlement is done at once goes through a single `poll` with nothing moved between
//! nested futures. Every concurrency runs this loop: a mount with workers runs `n` of
//! them over one subscription, a mount with lanes one per lane.
//!
//! The loop does not wait for the broker to confirm a bare settlement (no copy, reply or
//! `and_after`; the service's `after_settle` hooks run once it is over) before it takes the
//! next delivery: up to [`TRAILING`] such settlements
//! may be under way behind it (a Redis `XACK` round trip), so an adapter that answers
//! later does not make the loop ack-each. Handlers still run one at a time, in order; the
//! settlements stay after their handlers; the loop ends only once they are all over.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use ruststream_core::{
    AckError, Address, BoxFuture, Delivery, DeliveryStream, Facts, Plan, Settlement, Settling,
    Verdict,
};
use tokio::sync::futures::OwnedNotified;

use super::dead_letter::Why;
use super::execute::{Execution, execute};
use super::worker::{Process, Worker, bare, panic_message};
use crate::handler::Handler;
use crate::outcome::{After, Outcome};
use crate::settled::{Cause, SettleError, Settled};

pin_project_lite::pin_project! {
    /// The loop's future; it ends when the stream does, the service stops, or a
    /// `fail_fast` policy stops it.
    pub(super) struct Sequential<H, M>
    where
        H: Handler<M>,
        M: 'static,
    {
        worker: Arc<Worker<H, M>>,
        deliveries: DeliveryStream,
        // Armed once the stream has nothing ready: wakes the loop when the service stops.
        #[pin]
        stop: Option<OwnedNotified>,
        // Armed while the delayed copies are at their bound: wakes the loop when a copy
        // has gone out.
        #[pin]
        room: Option<OwnedNotified>,
        // The delivery whose handler runs, and the handler's future.
        delivery: Option<Delivery>,
        #[pin]
        running: Option<H::Future>,
        // The handler's time limit, armed once it waits on something (and only where
        // the mount has one).
        #[pin]
        deadline: Option<tokio::time::Sleep>,
        // What follows the handler.
        after_handler: AfterHandler,
        // Deliveries left before the loop yields to the other tasks of its thread.
        budget: u8,
        // Taking no more deliveries: the loop ends once the trailing settlements are over.
        ending: bool,
    }

    impl<H, M> PinnedDrop for Sequential<H, M>
    where
        H: Handler<M>,
        M: 'static,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let held = usize::from(this.after_handler.counted) + this.after_handler.trailing.len();
            if held > 0 {
                this.worker.runtime().in_flight.fetch_sub(held, Ordering::AcqRel);
            }
        }
    }
}

/// How many deliveries the loop handles in one go before it lets the other tasks of its
/// thread run (timers, other loops), as tokio's own resources do: a stream that is
/// always ready (a full memory queue, a handler that retries at once) must not hold the
/// thread.
const BUDGET: u8 = 128;

/// How many bare settlements may be under way behind the loop (see the module docs).
pub(crate) const TRAILING: usize = 64;

/// What follows a delivery's handler, in place.
#[derive(Default)]
struct AfterHandler {
    // The settlement under way, and what the hooks learn once it is over.
    settling: Option<Execution>,
    report: Option<Report>,
    // The outcome's `and_after`, or the slow path of an outcome with a reply.
    after: Option<BoxFuture<'static, ()>>,
    // Whether the in-flight gauge counts the delivery in hand.
    counted: bool,
    // Bare settlements under way behind the loop; the gauge counts each.
    trailing: Vec<Trailing>,
    // How many may be: `TRAILING` for a sequential mount, none for the loops of a mount
    // with workers or lanes (their count is their concurrency).
    limit: usize,
}

/// A bare settlement under way behind the loop, and what the hooks learn once it is over.
struct Trailing {
    settling: Settling,
    report: Option<Report>,
}

/// What the hooks learn once the settlement is over.
struct Report {
    address: Address,
    attempt: u32,
    verdict: Verdict,
    cause: Cause,
    plan: Plan,
    after: Option<After>,
}

impl Report {
    fn settled(self, result: Result<(), SettleError>) -> (Settled, Option<After>) {
        let settled = Settled {
            address: self.address,
            attempt: self.attempt,
            verdict: self.verdict,
            cause: self.cause,
            plan: self.plan,
            result,
        };
        (settled, self.after)
    }
}

impl<H: Handler<M>, M: 'static> Sequential<H, M> {
    /// The loop over `deliveries`, with up to `trailing` bare settlements under way
    /// behind it.
    pub(super) fn new(
        worker: Arc<Worker<H, M>>,
        deliveries: DeliveryStream,
        trailing: usize,
    ) -> Self {
        Self {
            worker,
            deliveries,
            stop: None,
            room: None,
            delivery: None,
            running: None,
            deadline: None,
            after_handler: AfterHandler {
                limit: trailing,
                ..AfterHandler::default()
            },
            budget: BUDGET,
            ending: false,
        }
    }
}

impl<H: Handler<M>, M: 'static> Future for Sequential<H, M> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let worker = &**this.worker;
        let next = &mut *this.after_handler;
        // Woken: whatever woke the loop may be a trailing settlement that is over.
        poll_trailing(worker, &mut next.trailing, cx);
        if *this.ending {
            return end(next);
        }
        loop {
            // What is in hand first: the settlement, then what runs after it.
            if let Some(execution) = next.settling.as_mut() {
                let result = ready!(Pin::new(execution).poll(cx));
                next.settling = None;
                if let Err(error) = &result {
                    worker.settlement_failed(error);
                }
                if let Some(report) = next.report.take() {
                    let (settled, after) = report.settled(result);
                    next.after = worker.after_settled(settled, after);
                }
                if next.after.is_none() {
                    uncount(worker, &mut next.counted);
                }
            }
            if let Some(after) = next.after.as_mut() {
                ready!(after.as_mut().poll(cx));
                next.after = None;
                uncount(worker, &mut next.counted);
            }
            if this.running.is_some() {
                let decided = match run(this.running.as_mut(), worker, this.delivery.as_ref(), cx) {
                    Poll::Ready(decided) => {
                        this.deadline.set(None);
                        decided
                    }
                    Poll::Pending => match expired(
                        this.deadline.as_mut(),
                        this.running.as_mut(),
                        worker,
                        this.delivery.as_ref(),
                        cx,
                    ) {
                        Some(decided) => decided,
                        None => return Poll::Pending,
                    },
                };
                if let Some(delivery) = this.delivery.take()
                    && !settle(worker, this.worker, delivery, decided, next, cx)
                {
                    *this.ending = true;
                    return end(next);
                }
                continue;
            }
            // Nothing in hand: the next delivery, unless the service stops.
            let shutdown = &worker.runtime().shutdown;
            if shutdown.is_triggered() {
                *this.ending = true;
                return end(next);
            }
            if *this.budget == 0 {
                *this.budget = BUDGET;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if worker.runtime().deferred.is_full() {
                match paused(this.room.as_mut(), this.stop.as_mut(), worker, cx) {
                    Paused::Room => continue,
                    Paused::Waiting => return Poll::Pending,
                    Paused::Stopped => {
                        *this.ending = true;
                        return end(next);
                    }
                }
            }
            match this.deliveries.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(delivery))) => {
                    *this.budget -= 1;
                    worker.runtime().in_flight.fetch_add(1, Ordering::AcqRel);
                    next.counted = true;
                    let decided = match worker.start(&delivery) {
                        Ok(future) => {
                            this.running.set(Some(future));
                            match run(this.running.as_mut(), worker, Some(&delivery), cx) {
                                Poll::Ready(decided) => decided,
                                Poll::Pending => {
                                    // It waits on something: the delivery waits with it.
                                    *this.delivery = Some(delivery);
                                    if let Some(limit) = worker.timeout() {
                                        arm(this.deadline.as_mut(), limit, cx);
                                    }
                                    return Poll::Pending;
                                }
                            }
                        }
                        Err(decided) => decided,
                    };
                    if !settle(worker, this.worker, delivery, decided, next, cx) {
                        *this.ending = true;
                        return end(next);
                    }
                }
                Poll::Ready(Some(Err(error))) => worker.report(&error),
                Poll::Ready(None) => {
                    *this.ending = true;
                    return end(next);
                }
                Poll::Pending => {
                    if this.stop.is_none() {
                        this.stop.set(Some(shutdown.notified_owned()));
                    }
                    // A stop between the first look and arming is seen here.
                    let stopped = shutdown.is_triggered()
                        || this
                            .stop
                            .as_pin_mut()
                            .is_some_and(|stop| stop.poll(cx).is_ready());
                    if stopped {
                        *this.ending = true;
                        return end(next);
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Polls the handler's future, under `catch_unwind`; once it is over, what to do: its
/// outcome, or the panic policy's decision (`None`: stop).
#[inline(always)]
fn run<H: Handler<M>, M: 'static>(
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M>,
    delivery: Option<&Delivery>,
    cx: &mut Context<'_>,
) -> Poll<Option<(Outcome, Cause)>> {
    let Some(future) = running.as_mut().as_pin_mut() else {
        return Poll::Ready(None);
    };
    let decided = match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
        Ok(Poll::Pending) => return Poll::Pending,
        Ok(Poll::Ready(outcome)) => Some((outcome, Cause::Handler)),
        Err(panic) => worker.panicked(panic_message(&*panic), delivery),
    };
    running.set(None);
    Poll::Ready(decided)
}

/// What the loop does while the delayed copies are at their bound.
enum Paused {
    /// There is room again: take the next delivery.
    Room,
    /// Still no room: wait (woken when there is, or when the service stops).
    Waiting,
    /// The service stops.
    Stopped,
}

/// Waits for room among the delayed copies, or for the service to stop.
#[cold]
#[inline(never)]
fn paused<H: Handler<M>, M: 'static>(
    mut room: Pin<&mut Option<OwnedNotified>>,
    mut stop: Pin<&mut Option<OwnedNotified>>,
    worker: &Worker<H, M>,
    cx: &mut Context<'_>,
) -> Paused {
    let runtime = worker.runtime();
    let (deferred, shutdown) = (&runtime.deferred, &runtime.shutdown);
    if room.is_none() {
        room.set(Some(deferred.room_owned()));
    }
    if stop.is_none() {
        stop.set(Some(shutdown.notified_owned()));
    }
    if deferred.is_full() {
        let has_room = room
            .as_mut()
            .as_pin_mut()
            .is_some_and(|room| room.poll(cx).is_ready());
        if !has_room {
            let stopped = shutdown.is_triggered()
                || stop
                    .as_mut()
                    .as_pin_mut()
                    .is_some_and(|stop| stop.poll(cx).is_ready());
            return if stopped {
                Paused::Stopped
            } else {
                Paused::Waiting
            };
        }
    }
    room.set(None);
    Paused::Room
}

/// The handler is still running: if its time limit is over, it is cancelled (its future
/// dropped) and the timeout policy decides.
#[cold]
#[inline(never)]
fn expired<H: Handler<M>, M: 'static>(
    mut deadline: Pin<&mut Option<tokio::time::Sleep>>,
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M>,
    delivery: Option<&Delivery>,
    cx: &mut Context<'_>,
) -> Option<Option<(Outcome, Cause)>> {
    let over = deadline
        .as_mut()
        .as_pin_mut()
        .is_some_and(|deadline| deadline.poll(cx).is_ready());
    if !over {
        return None;
    }
    running.set(None);
    deadline.set(None);
    Some(worker.timed_out(worker.timeout().unwrap_or_default(), delivery))
}

/// Starts the handler's time limit; a limit already over wakes the loop at once.
#[cold]
fn arm(
    mut deadline: Pin<&mut Option<tokio::time::Sleep>>,
    limit: std::time::Duration,
    cx: &mut Context<'_>,
) {
    deadline.set(Some(tokio::time::sleep(limit)));
    if let Some(sleep) = deadline.as_pin_mut()
        && sleep.poll(cx).is_ready()
    {
        cx.waker().wake_by_ref();
    }
}

/// Polls the settlements under way behind the loop, and lets go of those that are over.
#[inline]
fn poll_trailing<H: Handler<M>, M: 'static>(
    worker: &Worker<H, M>,
    trailing: &mut Vec<Trailing>,
    cx: &mut Context<'_>,
) {
    if trailing.is_empty() {
        return;
    }
    let before = trailing.len();
    trailing.retain_mut(|entry| match Pin::new(&mut entry.settling).poll(cx) {
        Poll::Ready(result) => {
            over(worker, result, entry.report.take());
            false
        }
        Poll::Pending => true,
    });
    let over = before - trailing.len();
    if over > 0 {
        worker.runtime().in_flight.fetch_sub(over, Ordering::AcqRel);
    }
}

/// A bare settlement is over: its failure logged, the hooks told.
#[inline]
fn over<H: Handler<M>, M: 'static>(
    worker: &Worker<H, M>,
    result: Result<(), AckError>,
    report: Option<Report>,
) {
    let result = result.map_err(SettleError::from);
    if let Err(error) = &result {
        worker.settlement_failed(error);
    }
    if let Some(report) = report {
        let (settled, after) = report.settled(result);
        // A bare settlement has no `and_after`: the hooks are all there is to run.
        let _ = worker.after_settled(settled, after);
    }
}

/// The loop takes no more deliveries: it ends once the trailing settlements are over
/// (each registered the loop's waker when it was last polled).
#[inline]
fn end(next: &AfterHandler) -> Poll<()> {
    if next.trailing.is_empty() {
        Poll::Ready(())
    } else {
        Poll::Pending
    }
}

/// The in-flight gauge no longer counts this loop's delivery.
#[inline]
fn uncount<H: Handler<M>, M: 'static>(worker: &Worker<H, M>, counted: &mut bool) {
    if std::mem::take(counted) {
        worker.runtime().in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts carrying out what `decided` says for `delivery`; `false` means stop (a
/// `fail_fast`: the delivery is dropped unsettled for the broker to hand back).
///
/// A bare settlement that the adapter does at once is over before this returns.
#[inline(always)]
fn settle<H: Handler<M>, M: 'static>(
    worker: &Worker<H, M>,
    shared: &Arc<Worker<H, M>>,
    delivery: Delivery,
    decided: Option<(Outcome, Cause)>,
    next: &mut AfterHandler,
    cx: &mut Context<'_>,
) -> bool {
    let Some((outcome, cause)) = decided else {
        return false;
    };
    let facts = Facts::of(&delivery, &worker.capabilities());
    let plan = worker.plan(&delivery, facts, &outcome, &cause);
    if let Some(settlement) = bare(&outcome, &plan) {
        // The common case: a bare settlement, with nothing to publish, and at most the
        // hooks to tell once it is over.
        if !worker.runtime().after_settle.is_empty() {
            let report = Report {
                address: delivery.address().clone(),
                attempt: facts.attempt,
                verdict: outcome.verdict,
                cause,
                plan: plan.clone(),
                after: None,
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
            Err(mut settling) if next.trailing.len() < next.limit => {
                // Under way behind the loop: polled once now, so that it starts.
                match Pin::new(&mut settling).poll(cx) {
                    Poll::Ready(result) => {
                        if let Err(error) = result {
                            worker.settlement_failed(&error.into());
                        }
                        uncount(worker, &mut next.counted);
                    }
                    Poll::Pending => {
                        let report = None;
                        next.trailing.push(Trailing { settling, report });
                        next.counted = false;
                    }
                }
            }
            Err(settling) => next.settling = Some(Execution::Settle(settling)),
        }
        return true;
    }
    settle_slow(shared, delivery, outcome, cause, facts, plan, next);
    true
}

/// [`settle`] for a bare settlement the service's hooks are told of once it is over.
#[inline(never)]
fn settle_told<H: Handler<M>, M: 'static>(
    worker: &Worker<H, M>,
    delivery: Delivery,
    settlement: Settlement,
    report: Report,
    next: &mut AfterHandler,
    cx: &mut Context<'_>,
) {
    let mut settling = delivery.settle(settlement);
    let result = match settling.take_ready() {
        Some(result) => result,
        None if next.trailing.len() < next.limit => match Pin::new(&mut settling).poll(cx) {
            Poll::Ready(result) => result,
            Poll::Pending => {
                let report = Some(report);
                next.trailing.push(Trailing { settling, report });
                next.counted = false;
                return;
            }
        },
        None => {
            next.settling = Some(Execution::Settle(settling));
            next.report = Some(report);
            return;
        }
    };
    over(worker, result, Some(report));
    uncount(worker, &mut next.counted);
}

/// [`settle`] for everything but a bare settlement: a reply, a copy, an `and_after`.
#[inline(never)]
fn settle_slow<H: Handler<M>, M: 'static>(
    worker: &Arc<Worker<H, M>>,
    delivery: Delivery,
    outcome: Outcome,
    cause: Cause,
    facts: Facts,
    plan: Plan,
    next: &mut AfterHandler,
) {
    if outcome.reply.is_some() {
        // A reply is published first: in a future of its own.
        let worker = worker.clone();
        next.after = Some(Box::pin(async move {
            worker.finish(delivery, outcome, cause, facts, plan).await;
        }));
        return;
    }
    let watched = outcome.after.is_some() || !worker.runtime().after_settle.is_empty();
    let address = watched.then(|| delivery.address().clone());
    let why = Why {
        from: &worker.mount().address,
        attempt: facts.attempt,
        cause: &cause,
        service: &worker.runtime().service,
    };
    next.settling = Some(execute(
        delivery,
        &plan,
        worker.capabilities().settles,
        worker.runtime(),
        &why,
    ));
    if let Some(address) = address {
        next.report = Some(Report {
            address,
            attempt: facts.attempt,
            verdict: outcome.verdict,
            cause,
            plan,
            after: outcome.after,
        });
    }
}
