//! The sequential loop (one delivery at a time, in order) as one hand-written future.
//!
//! The default concurrency, and the one the delivery path is measured on: the loop takes a
//! delivery, runs its handler, settles it and reports it with every piece of state kept in
//! place in this one future, so that a delivery whose handler finishes at once and whose
//! settlement is done at once goes through a single `poll` with nothing moved between
//! nested futures. The other concurrencies run [`Process::handle`](super::Process::handle).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use ruststream_core::{
    Address, BoxFuture, Delivery, DeliveryStream, Facts, Original, Plan, Verdict, decide,
};
use tokio::sync::futures::OwnedNotified;

use super::execute::{Execution, execute};
use super::worker::{Process, Worker, panic_message};
use crate::handler::Handler;
use crate::outcome::{After, Outcome};
use crate::settled::{Cause, Settled};

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
        // The delivery whose handler runs, and the handler's future.
        delivery: Option<Delivery>,
        #[pin]
        running: Option<H::Future>,
        // The settlement under way, and what the hooks learn once it is over.
        settling: Option<Execution>,
        report: Option<Report>,
        // The outcome's `and_after`, or the slow path of an outcome with a reply.
        after: Option<BoxFuture<'static, ()>>,
        // Whether the in-flight gauge counts a delivery of this loop.
        counted: bool,
        // Deliveries left before the loop yields to the other tasks of its thread.
        budget: u8,
    }

    impl<H, M> PinnedDrop for Sequential<H, M>
    where
        H: Handler<M>,
        M: 'static,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.counted {
                this.worker.runtime().in_flight.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// How many deliveries the loop handles in one go before it lets the other tasks of its
/// thread run (timers, other loops), as tokio's own resources do: a stream that is
/// always ready (a full memory queue, a handler that retries at once) must not hold the
/// thread.
const BUDGET: u8 = 128;

/// What the hooks learn once the settlement is over.
struct Report {
    address: Address,
    attempt: u32,
    verdict: Verdict,
    cause: Cause,
    plan: Plan,
    after: Option<After>,
}

impl<H: Handler<M>, M: 'static> Sequential<H, M> {
    pub(super) fn new(worker: Arc<Worker<H, M>>, deliveries: DeliveryStream) -> Self {
        Self {
            worker,
            deliveries,
            stop: None,
            delivery: None,
            running: None,
            settling: None,
            report: None,
            after: None,
            counted: false,
            budget: BUDGET,
        }
    }
}

impl<H: Handler<M>, M: 'static> Future for Sequential<H, M> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        loop {
            // What is in hand first: the settlement, then what runs after it.
            if let Some(execution) = this.settling.as_mut() {
                let result = ready!(Pin::new(execution).poll(cx));
                *this.settling = None;
                if let Err(error) = &result {
                    this.worker.settlement_failed(error);
                }
                if let Some(report) = this.report.take() {
                    let settled = Settled {
                        address: report.address,
                        attempt: report.attempt,
                        verdict: report.verdict,
                        cause: report.cause,
                        plan: report.plan,
                        result,
                    };
                    *this.after = this.worker.after_settled(settled, report.after);
                }
                if this.after.is_none() {
                    uncount(this.worker, this.counted);
                }
            }
            if let Some(after) = this.after.as_mut() {
                ready!(after.as_mut().poll(cx));
                *this.after = None;
                uncount(this.worker, this.counted);
            }
            if let Some(future) = this.running.as_mut().as_pin_mut() {
                let decided = match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(outcome)) => Some((outcome, Cause::Handler)),
                    Err(panic) => this.worker.panicked(panic_message(&*panic)),
                };
                this.running.set(None);
                if let Some(delivery) = this.delivery.take() {
                    let go_on = settle(
                        this.worker,
                        delivery,
                        decided,
                        this.settling,
                        this.report,
                        this.after,
                    );
                    if !go_on {
                        return Poll::Ready(());
                    }
                }
                continue;
            }
            // Nothing in hand: the next delivery, unless the service stops.
            let shutdown = &this.worker.runtime().shutdown;
            if shutdown.is_triggered() {
                return Poll::Ready(());
            }
            if *this.budget == 0 {
                *this.budget = BUDGET;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match this.deliveries.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(delivery))) => {
                    *this.budget -= 1;
                    this.worker
                        .runtime()
                        .in_flight
                        .fetch_add(1, Ordering::AcqRel);
                    *this.counted = true;
                    match this.worker.start(&delivery) {
                        Ok(future) => {
                            this.running.set(Some(future));
                            *this.delivery = Some(delivery);
                        }
                        Err(decided) => {
                            let go_on = settle(
                                this.worker,
                                delivery,
                                decided,
                                this.settling,
                                this.report,
                                this.after,
                            );
                            if !go_on {
                                return Poll::Ready(());
                            }
                        }
                    }
                }
                Poll::Ready(Some(Err(error))) => this.worker.report(&error),
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => {
                    if this.stop.is_none() {
                        this.stop.set(Some(shutdown.notified_owned()));
                        // A stop between the first look and arming is seen here.
                        if shutdown.is_triggered() {
                            return Poll::Ready(());
                        }
                    }
                    return match this.stop.as_pin_mut() {
                        Some(stop) => stop.poll(cx),
                        None => Poll::Pending,
                    };
                }
            }
        }
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
#[inline]
fn settle<H: Handler<M>, M: 'static>(
    worker: &Arc<Worker<H, M>>,
    delivery: Delivery,
    decided: Option<(Outcome, Cause)>,
    settling: &mut Option<Execution>,
    report: &mut Option<Report>,
    after: &mut Option<BoxFuture<'static, ()>>,
) -> bool {
    let Some((outcome, cause)) = decided else {
        return false;
    };
    let capabilities = worker.capabilities();
    let facts = Facts::of(&delivery, &capabilities);
    let plan = decide(
        outcome.verdict,
        facts,
        capabilities,
        &worker.mount().declaration,
        delivery.address(),
    );
    if let (None, None, None, Original::Settle(settlement)) =
        (&outcome.reply, &outcome.after, &plan.copy, plan.original)
        && worker.runtime().after_settle.is_empty()
    {
        // The common case: a bare settlement, with nothing to publish or to tell.
        *settling = Some(Execution::Settle(delivery.settle(settlement)));
        return true;
    }
    if outcome.reply.is_some() {
        // A reply is published first: the slow path, in a future of its own.
        let worker = worker.clone();
        *after = Some(Box::pin(async move {
            worker.finish(delivery, outcome, cause, facts, plan).await;
        }));
        return true;
    }
    if outcome.after.is_some() || !worker.runtime().after_settle.is_empty() {
        *report = Some(Report {
            address: delivery.address().clone(),
            attempt: facts.attempt,
            verdict: outcome.verdict,
            cause,
            plan: plan.clone(),
            after: outcome.after,
        });
    }
    *settling = Some(execute(
        delivery,
        &plan,
        capabilities.settles,
        worker.runtime_arc(),
    ));
    true
}
