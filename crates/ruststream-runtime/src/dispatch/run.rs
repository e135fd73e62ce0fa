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

use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ruststream_core::{
    AckError, BoxFuture, ConsumeError, Delivery, DeliveryStream, Facts, Plan, Settling,
};
use tokio::time::Sleep;

use super::Runtime;
use super::behind::Behind;
use super::worker::{Layers, Report, Worker, bare, panic_message};
use crate::handler::Handler;
use crate::layer::Visits;
use crate::outcome::Outcome;
use crate::settled::{Cause, SettleError};

/// A mount's handler, type-erased for the loops: what they need to run it.
pub(crate) trait Process: Send + Sync + 'static {
    fn runtime(&self) -> &Arc<Runtime>;

    /// Whether the mount's subscription drains at a graceful stop (its loops handle
    /// what the stream still yields).
    fn drains(&self) -> bool;

    /// Reports an error of the subscription (it goes on).
    fn report(&self, error: &ConsumeError);

    /// The loop over `deliveries`, with up to `trailing` bare settlements under way
    /// behind it.
    fn sequential(
        self: Arc<Self>,
        deliveries: DeliveryStream,
        trailing: usize,
    ) -> BoxFuture<'static, ()>;
}

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

/// One delivery counted in flight ([`Runtime::in_flight`]) for as long as this lives,
/// also where the loop is dropped mid-delivery.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    #[inline]
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

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
    loop {
        if budget == 0 {
            budget = BUDGET;
            let mut yielded = false;
            poll_fn(|cx| {
                if std::mem::replace(&mut yielded, true) {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
        }
        if runtime.deferred.is_full() && !behind.beside(super::room(runtime), over).await {
            break;
        }
        let next = runtime.shutdown.next(&mut deliveries, worker.mount.drains);
        let delivery = match behind.beside(next, over).await {
            Some(Ok(delivery)) => delivery,
            Some(Err(error)) => {
                worker.report(&error);
                continue;
            }
            None => break,
        };
        budget -= 1;
        let counted = InFlight::new(&runtime.in_flight);
        let mut started = None;
        let decided = match worker.start(&delivery, &mut visits) {
            Ok(future) => {
                if worker.watched() {
                    started = Some(Instant::now());
                }
                let handling = Handling {
                    worker,
                    delivery: &delivery,
                    visits: &visits,
                    running: Some(future),
                    deadline: None,
                };
                behind.beside(handling, over).await
            }
            Err(decided) => decided,
        };
        // `fail_fast`: the delivery is dropped unsettled, for the broker to hand back.
        let Some(decided) = decided else {
            break;
        };
        match settle(worker, delivery, decided, &mut visits, started) {
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
    let facts = Facts::of(&delivery, &worker.capabilities()).within(&worker.mount.declaration);
    let plan = worker.plan(&delivery, facts, &outcome, &cause);
    let Some(settlement) = bare(&outcome, &plan) else {
        return Left::Finish(delivery, (outcome, cause), facts, plan, elapsed);
    };
    if !worker.watched() {
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
        verdict: outcome.verdict,
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

pin_project_lite::pin_project! {
    /// The handler's future as the loop runs it: polled under `catch_unwind` (and inside
    /// the delivery's visits, where middleware follow it), within the mount's time limit;
    /// what to do once it is over: its outcome, or the panic or timeout policy's decision
    /// (`None`: stop).
    struct Handling<'a, H, M, L>
    where
        H: Handler<M>,
        M: 'static,
        L: Layers,
    {
        worker: &'a Worker<H, M, L>,
        delivery: &'a Delivery,
        visits: &'a Visits,
        #[pin]
        running: Option<H::Future>,
        // Armed once the handler waits on something, where the mount has a limit.
        #[pin]
        deadline: Option<Sleep>,
    }
}

impl<H: Handler<M>, M: 'static, L: Layers> Future for Handling<'_, H, M, L> {
    type Output = Option<(Outcome, Cause)>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (worker, visits) = (*this.worker, *this.visits);
        let mut running = this.running;
        let Some(mut future) = running.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        let mut poll = || std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
        let polled = if worker.followed(visits) {
            within(visits, &mut poll)
        } else {
            poll()
        };
        match polled {
            Ok(Poll::Ready(outcome)) => Poll::Ready(Some((outcome, Cause::Handler))),
            Err(panic) => Poll::Ready(worker.panicked(panic_message(&*panic), Some(this.delivery))),
            Ok(Poll::Pending) => match worker.timeout() {
                Some(limit) => expired(running, this.deadline, limit, worker, this.delivery, cx),
                None => Poll::Pending,
            },
        }
    }
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

/// The handler waits on something: once its time `limit` is over (its `deadline` armed
/// at the first look), it is cancelled (its future dropped) and the timeout policy
/// decides. A limit over at once wakes the loop, which polls the handler once more.
#[cold]
#[inline(never)]
fn expired<H: Handler<M>, M: 'static, L: Layers>(
    mut running: Pin<&mut Option<H::Future>>,
    mut deadline: Pin<&mut Option<Sleep>>,
    limit: Duration,
    worker: &Worker<H, M, L>,
    delivery: &Delivery,
    cx: &mut Context<'_>,
) -> Poll<Option<(Outcome, Cause)>> {
    if deadline.is_none() {
        deadline.set(Some(tokio::time::sleep(limit)));
        if deadline
            .as_mut()
            .as_pin_mut()
            .is_some_and(|sleep| sleep.poll(cx).is_ready())
        {
            cx.waker().wake_by_ref();
        }
        return Poll::Pending;
    }
    if !deadline
        .as_pin_mut()
        .is_some_and(|sleep| sleep.poll(cx).is_ready())
    {
        return Poll::Pending;
    }
    running.set(None);
    Poll::Ready(worker.timed_out(limit, Some(delivery)))
}
