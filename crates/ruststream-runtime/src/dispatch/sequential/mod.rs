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
//! next delivery: up to [`Concurrency::trailing`](crate::mount::Concurrency::trailing) such
//! settlements may be under way behind it (a Redis `XACK` round trip), so an adapter that answers
//! later does not make the loop ack-each. Handlers still run one at a time, in order; the
//! settlements stay after their handlers; the loop ends only once they are all over.

mod behind;
mod settle;
mod waits;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use ruststream_core::{BoxFuture, ConsumeError, Delivery, DeliveryStream};
use tokio::sync::futures::OwnedNotified;

use self::settle::{AfterHandler, end, poll_trailing, settle, uncount};
use self::waits::{Paused, arm, expired, paused};
use super::Runtime;
use super::worker::{Layers, Process, Worker, panic_message};
use crate::handler::Handler;
use crate::layer::Visits;
use crate::outcome::Outcome;
use crate::settled::Cause;

pin_project_lite::pin_project! {
    /// The loop's future; it ends when the stream does, the service stops, or a
    /// `fail_fast` policy stops it.
    pub(super) struct Sequential<H, M, L>
    where
        H: Handler<M>,
        M: 'static,
        L: Layers,
    {
        worker: Arc<Worker<H, M, L>>,
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
        // Its visits, where middleware follow it (mounts with layers only).
        visits: Visits,
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

    impl<H, M, L> PinnedDrop for Sequential<H, M, L>
    where
        H: Handler<M>,
        M: 'static,
        L: Layers,
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

impl<H: Handler<M>, M: 'static, L: Layers> Sequential<H, M, L> {
    /// The loop over `deliveries`, with up to `trailing` bare settlements under way
    /// behind it.
    pub(super) fn new(
        worker: Arc<Worker<H, M, L>>,
        deliveries: DeliveryStream,
        trailing: usize,
    ) -> Self {
        Self {
            worker,
            deliveries,
            stop: None,
            room: None,
            delivery: None,
            visits: Visits::default(),
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

impl<H: Handler<M>, M: 'static, L: Layers> Future for Sequential<H, M, L> {
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
                    let (settled, after, visits) = report.settled(result);
                    next.after = worker.after_settled(settled, after, &visits);
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
                let running = this.running.as_mut();
                let decided = match run(running, worker, this.delivery.as_ref(), this.visits, cx) {
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
                    && !settle(
                        worker,
                        this.worker,
                        delivery,
                        decided,
                        this.visits,
                        next,
                        cx,
                    )
                {
                    *this.ending = true;
                    return end(next);
                }
                continue;
            }
            // Nothing in hand: the next delivery, unless the service stops.
            let shutdown = &worker.runtime().shutdown;
            if worker.stopped() {
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
                    let decided = match worker.start(&delivery, this.visits) {
                        Ok(future) => {
                            if worker.watched() {
                                next.started = Some(Instant::now());
                            }
                            this.running.set(Some(future));
                            let running = this.running.as_mut();
                            match run(running, worker, Some(&delivery), this.visits, cx) {
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
                    if !settle(
                        worker,
                        this.worker,
                        delivery,
                        decided,
                        this.visits,
                        next,
                        cx,
                    ) {
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
                    // A stop between the first look and arming is seen here. A loop
                    // that drains waits for its stream to end (its poll is armed).
                    let notified = this
                        .stop
                        .as_pin_mut()
                        .is_some_and(|stop| stop.poll(cx).is_ready());
                    if (notified || shutdown.is_triggered()) && worker.stopped() {
                        *this.ending = true;
                        return end(next);
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Polls the handler's future, under `catch_unwind` (and inside the delivery's visits,
/// where middleware follow it); once it is over, what to do: its outcome, or the panic
/// policy's decision (`None`: stop).
#[inline(always)]
fn run<H: Handler<M>, M: 'static, L: Layers>(
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M, L>,
    delivery: Option<&Delivery>,
    visits: &Visits,
    cx: &mut Context<'_>,
) -> Poll<Option<(Outcome, Cause)>> {
    let Some(mut future) = running.as_mut().as_pin_mut() else {
        return Poll::Ready(None);
    };
    let mut poll = || std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
    let polled = if worker.followed(visits) {
        within(visits, &mut poll)
    } else {
        poll()
    };
    let decided = match polled {
        Ok(Poll::Pending) => return Poll::Pending,
        Ok(Poll::Ready(outcome)) => Some((outcome, Cause::Handler)),
        Err(panic) => worker.panicked(panic_message(&*panic), delivery),
    };
    running.set(None);
    Poll::Ready(decided)
}

/// `poll` run inside `visits` (once, even where a visit forgot to call it).
#[inline(never)]
fn within<T>(visits: &Visits, poll: &mut dyn FnMut() -> T) -> T {
    let mut polled = None;
    visits.within(&mut || polled = Some(poll()));
    match polled {
        Some(polled) => polled,
        None => poll(),
    }
}

/// How a mount's handler is run by the loops: this loop, for every concurrency.
impl<H: Handler<M>, M: 'static, L: Layers> Process for Worker<H, M, L> {
    fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    fn drains(&self) -> bool {
        self.mount.drains
    }

    fn report(&self, error: &ConsumeError) {
        tracing::warn!(address = %self.mount.address, %error, "subscription reported an error");
    }

    fn sequential(
        self: Arc<Self>,
        deliveries: DeliveryStream,
        trailing: usize,
    ) -> BoxFuture<'static, ()> {
        // Boxed: the loop's future is large, and spawning moves it through several calls.
        Box::pin(Sequential::new(self, deliveries, trailing))
    }
}
