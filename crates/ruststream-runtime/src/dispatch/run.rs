//! The delivery loop: receive, handle, decide, settle and report, one delivery at a
//! time, in order.
//!
//! Every concurrency runs it: one loop for sequential handling, `n` sharing one
//! subscription for workers, one per lane. A delivery whose handler finishes at once
//! and whose settlement is done at once goes through in one poll, settled on the stack.
//!
//! The loop does not wait for the broker to confirm a bare settlement (no copy, reply or
//! `and_after`; the service's `after_settle` hooks run once it is over) before it takes
//! the next delivery: up to [`Concurrency::trailing`](crate::mount::Concurrency::trailing)
//! such settlements may be under way [`Behind`] it (a Redis `XACK` round trip), so an
//! adapter that answers later does not make the loop ack-each. Handlers still run one at
//! a time, in order; the settlements stay after their handlers; the loop ends only once
//! they are all over.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use ruststream_core::{
    AckError, BoxFuture, ConsumeError, Delivery, DeliveryStream, Facts, Plan, Settling,
};
use tokio::sync::futures::Notified;
use tokio::time::Sleep;

use super::worker::{Handling, Layers, Worker, bare, poll};
use crate::behind::Behind;
use crate::concurrency::Process;
use crate::handler::Handler;
use crate::layer::Visits;
use crate::outcome::Outcome;
use crate::report::Report;
use crate::runtime::{InFlight, Runtime};
use crate::settled::{Cause, SettleError};

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
        Box::pin(run(self, deliveries, trailing))
    }
}

/// How many deliveries the loop handles in one go before it lets the other tasks of its
/// thread run (timers, other loops), as tokio's own resources do: a stream that is
/// always ready (a full memory queue, a handler that retries at once) must not hold the
/// thread.
const BUDGET: u8 = 128;

/// The loop; it ends when the stream does, the service stops, or a `fail_fast` policy
/// stops it, once the settlements behind it are over.
async fn run<H: Handler<M>, M: 'static, L: Layers>(
    worker: Arc<Worker<H, M, L>>,
    mut deliveries: DeliveryStream,
    trailing: usize,
) {
    let worker = &*worker;
    let runtime = &*worker.runtime;
    // A settlement behind the loop is over: reported, and no longer in flight.
    let over = &mut |result: Result<(), AckError>, (report, _): (Option<Report>, InFlight<'_>)| {
        let _ = worker.settled(result.map_err(SettleError::from), report);
    };
    let mut behind = Behind::new(trailing);
    let mut visits = Visits::default();
    let mut budget = BUDGET;
    // Kept in place across deliveries: the stop notification (armed once the stream has
    // nothing ready), the handler's future, and its time limit (armed once the handler
    // waits on something, where the mount has one).
    let mut stop = pin!(None);
    let mut running = pin!(None::<H::Future>);
    let mut deadline = pin!(None::<Sleep>);
    loop {
        let ready = poll_fn(|cx| {
            let (stop, running) = (stop.as_mut(), running.as_mut());
            let taking = (&mut deliveries, stop, &mut budget);
            ready(worker, taking, running, &mut visits, cx)
        });
        let (left, counted) = match behind.beside(ready, over).await {
            Turn::End => break,
            Turn::Full => {
                if !behind.beside(runtime.room(), over).await {
                    break;
                }
                continue;
            }
            Turn::Left(left, counted) => (left, counted),
            Turn::Waiting(delivery, started, counted) => {
                let handling = Handling {
                    worker,
                    delivery: &delivery,
                    visits: &visits,
                    running: running.as_mut(),
                    deadline: deadline.as_mut(),
                };
                let decided = behind.beside(handling, over).await;
                deadline.set(None);
                // `fail_fast`: the delivery is dropped unsettled, for the broker.
                let Some(decided) = decided else {
                    break;
                };
                (
                    settle(worker, delivery, decided, &mut visits, started),
                    counted,
                )
            }
        };
        match left {
            Left::Done => {}
            Left::Settling(settling, report) => {
                behind.settle(settling, (report, counted), over).await;
            }
            Left::Finish(delivery, decided, facts, plan, elapsed) => {
                // A reply, a copy or an `and_after`: carried out here, a reply inside the
                // delivery's visits (it continues its trace).
                let entering =
                    (decided.0.reply.is_some() && visits.enters()).then(|| visits.clone());
                let visits = std::mem::take(&mut visits);
                let finish = worker.finish(delivery, decided, facts, plan, visits, elapsed);
                match entering {
                    Some(entering) => behind.beside(entering.enter(finish), over).await,
                    None => behind.beside(finish, over).await,
                }
            }
        }
    }
    behind.end(over).await;
}

/// Where the loop's ready deliveries leave it.
enum Turn<'a> {
    /// It takes no more deliveries.
    End,
    /// The delayed copies are at their bound: it waits for room.
    Full,
    /// A delivery whose handler waits on something (its future in the loop's place for
    /// it), with when it was called (where it is timed).
    Waiting(Delivery, Option<Instant>, InFlight<'a>),
    /// A delivery whose settlement is left to wait on.
    Left(Left, InFlight<'a>),
}

/// Handles the deliveries that are ready, in place: each handler that finishes at once,
/// and each bare settlement done at once, goes through here without a move into the
/// loop's future (the bench's hot path). Comes back with the first delivery that has
/// something to wait on, or the end; yields every [`BUDGET`] deliveries.
#[inline(always)]
fn ready<'a, H: Handler<M>, M: 'static, L: Layers>(
    worker: &'a Worker<H, M, L>,
    (deliveries, mut stop, budget): (&mut DeliveryStream, Pin<&mut Option<Notified<'a>>>, &mut u8),
    mut running: Pin<&mut Option<H::Future>>,
    visits: &mut Visits,
    cx: &mut Context<'_>,
) -> Poll<Turn<'a>> {
    let runtime = &*worker.runtime;
    loop {
        if *budget == 0 {
            *budget = BUDGET;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if runtime.deferred.is_full() {
            return Poll::Ready(Turn::Full);
        }
        let next = runtime
            .shutdown
            .poll_next(deliveries, worker.mount.drains, stop.as_mut(), cx);
        let delivery = match ready!(next) {
            Some(Ok(delivery)) => delivery,
            Some(Err(error)) => {
                worker.report(&error);
                continue;
            }
            None => return Poll::Ready(Turn::End),
        };
        *budget -= 1;
        let counted = InFlight::new(&runtime.in_flight);
        let mut started = None;
        let decided = match worker.start(&delivery, visits) {
            Ok(future) => {
                if worker.watched {
                    started = Some(Instant::now());
                }
                running.set(Some(future));
                match poll(running.as_mut(), worker, &delivery, visits, cx) {
                    Poll::Ready(decided) => decided,
                    Poll::Pending => return Poll::Ready(Turn::Waiting(delivery, started, counted)),
                }
            }
            Err(decided) => decided,
        };
        // `fail_fast`: the delivery is dropped unsettled, for the broker to hand back.
        let Some(decided) = decided else {
            return Poll::Ready(Turn::End);
        };
        let left = settle(worker, delivery, decided, visits, started);
        if !matches!(left, Left::Done) {
            return Poll::Ready(Turn::Left(left, counted));
        }
        // `Done` holds nothing: forgotten rather than dropped, which rustc does through
        // the whole enum's drop, out of line, for every delivery.
        std::mem::forget(left);
    }
}

/// What is left of a delivery once its settlement started.
enum Left {
    /// Nothing: it is settled (and reported).
    Done,
    /// A bare settlement under way, and what the hooks learn once it is over.
    Settling(Settling, Option<Report>),
    /// A reply, a copy or an `and_after`: [`Worker::finish`]'s arguments.
    Finish(Delivery, (Outcome, Cause), Facts, Plan, Option<Duration>),
}

/// Decides what to do with `delivery` and, for a bare settlement (no copy, reply or
/// `and_after`), starts it: done at once, it is over (and reported) before this returns.
/// `started`: when the handler was called, where it was timed.
#[inline(always)]
fn settle<H: Handler<M>, M: 'static, L: Layers>(
    worker: &Worker<H, M, L>,
    delivery: Delivery,
    (outcome, cause): (Outcome, Cause),
    visits: &mut Visits,
    started: Option<Instant>,
) -> Left {
    let elapsed = started.map(|started| started.elapsed());
    let facts = Facts::of(&delivery, &worker.capabilities).within(&worker.mount.declaration);
    let plan = worker.plan(&delivery, facts, &outcome, &cause);
    let Some(settlement) = bare(&outcome, &plan) else {
        return Left::Finish(delivery, (outcome, cause), facts, plan, elapsed);
    };
    // No reply and no `and_after` (`bare` looked): of the outcome only its reason may
    // need freeing, done here rather than through the whole outcome's drop, out of line.
    let Outcome {
        verdict, reason, ..
    } = outcome;
    drop(reason);
    if !worker.watched {
        return match delivery.settle(settlement).into_ready() {
            Ok(Ok(())) => Left::Done,
            Ok(Err(error)) => {
                worker.settlement_failed(&error.into());
                Left::Done
            }
            Err(settling) => Left::Settling(settling, None),
        };
    }
    // Someone learns of each settlement: told once it is over.
    let report = Report {
        address: delivery.address().clone(),
        attempt: facts.attempt,
        verdict,
        cause,
        plan,
        after: None,
        visits: std::mem::take(visits),
        elapsed,
    };
    match delivery.settle(settlement).into_ready() {
        Ok(result) => {
            let _ = worker.settled(result.map_err(SettleError::from), Some(report));
            Left::Done
        }
        Err(settling) => Left::Settling(settling, Some(report)),
    }
}
