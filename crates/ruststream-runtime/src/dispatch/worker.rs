//! A mount's worker: calls its handler on a delivery (a failure policy deciding where
//! that fails), polls the handler's future (panics caught, inside the delivery's visits,
//! within the mount's time limit), asks the decision, and carries out and reports what
//! is more than a settlement.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{self, Poll};
use std::time::Duration;

use ruststream_core::{
    BoxFuture, Capabilities, Delivery, Facts, Original, Plan, Settlement, Verdict, decide,
};
use tokio::time::Sleep;

use crate::dead_letter::Why;
use crate::execute::execute;
use crate::extract::Context;
use crate::handler::Handler;
use crate::layer::{Stack, Visits};
use crate::mount::Mount;
use crate::outcome::Outcome;
use crate::policy::{Policy, panic_message};
use crate::report::Report;
use crate::runtime::Runtime;
use crate::settled::{Cause, SettleError};

/// One mount's handler with what it needs to settle.
pub(crate) struct Worker<H, M, L> {
    handler: H,
    /// The mount's middleware, which its handler (a [`Layered`](crate::layer::Layered))
    /// runs inside; [`NoLayers`] for a mount without layers, known when the loop is
    /// compiled (nothing is looked at then).
    stack: L,
    pub(super) mount: Mount,
    pub(super) capabilities: Capabilities,
    pub(super) runtime: Arc<Runtime>,
    /// Whether someone learns of each settlement: the service's hooks, or middleware
    /// (through their visits), known when the service starts. Only then is the handler
    /// timed ([`Settled::elapsed`](crate::Settled::elapsed)).
    pub(super) watched: bool,
    marker: PhantomData<fn() -> M>,
}

/// A mount's middleware as the loop sees it: none ([`NoLayers`], for a mount without
/// layers) or the mount's [`Stack`].
pub(crate) trait Layers: Send + Sync + 'static {
    /// The middleware, if any.
    fn stack(&self) -> Option<&Stack>;
}

/// No middleware.
pub(crate) struct NoLayers;

impl Layers for NoLayers {
    #[inline(always)]
    fn stack(&self) -> Option<&Stack> {
        None
    }
}

impl Layers for Arc<Stack> {
    #[inline(always)]
    fn stack(&self) -> Option<&Stack> {
        Some(self)
    }
}

impl<H: Handler<M>, M: 'static, L: Layers> Worker<H, M, L> {
    pub(crate) fn new(
        handler: H,
        mount: Mount,
        capabilities: Capabilities,
        runtime: Arc<Runtime>,
        stack: L,
    ) -> Self {
        let watched = !runtime.after_settle.is_empty() || stack.stack().is_some();
        Self {
            handler,
            stack,
            mount,
            capabilities,
            runtime,
            watched,
            marker: PhantomData,
        }
    }

    /// Makes the handler's arguments and calls it; or, where that fails, the failure
    /// policy's decision (`None`: the service must stop).
    ///
    /// Where the handler has middleware, `visits` is given the visits of those that follow
    /// the delivery (the loop keeps them until it is settled).
    #[inline]
    pub(super) fn start(
        &self,
        delivery: &Delivery,
        visits: &mut Visits,
    ) -> Result<H::Future, Option<(Outcome, Cause)>> {
        if let Some(stack) = self.stack.stack() {
            // Taken with the settlement before: empty (unless a `fail_fast` left some).
            visits.clear();
            stack.visit(delivery, visits);
            if let Some(outcome) = stack.before(delivery) {
                return Err(Some((outcome, Cause::Layer)));
            }
        }
        if self.past_cap(delivery) {
            return Err(Some((crate::outcome::retry(), Cause::Spent)));
        }
        if let Some(defect) = delivery.defect() {
            return Err(self.policy(
                self.mount.on_decode_error,
                Cause::Decode(defect.into()),
                Some(delivery),
            ));
        }
        let cx = Context {
            delivery,
            codec: self.mount.codec,
            app: &self.runtime.app,
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.handler.call(&cx))) {
            Ok(Ok(future)) => Ok(future),
            Ok(Err(error)) => Err(self.policy(
                self.mount.on_decode_error,
                Cause::Decode(error.to_string()),
                Some(delivery),
            )),
            Err(panic) => Err(self.policy(
                self.mount.on_panic,
                Cause::Panic(panic_message(&*panic)),
                Some(delivery),
            )),
        }
    }

    /// Whether the broker counted `delivery` past the mount's `max_attempts`: its last
    /// attempt ended without a settlement (a `fail_fast` panic, a stop, a crash). It is
    /// then settled as a spent retry without running the handler again. A broker that
    /// dead-letters itself is left to do so.
    #[inline(always)]
    fn past_cap(&self, delivery: &Delivery) -> bool {
        match (
            self.mount.declaration.max_attempts,
            delivery.broker_attempt(),
        ) {
            (Some(cap), Some(attempt)) => {
                attempt > cap.get() && self.capabilities.counts && !self.capabilities.dead_letters
            }
            _ => false,
        }
    }

    /// Reports a settlement that is over: its failure logged; where someone learns of
    /// it (`report`), the delivery's visits and the service's hooks told, and the
    /// outcome's `and_after` started, whose future is all that lives on.
    #[inline]
    pub(super) fn settled(
        &self,
        result: Result<(), SettleError>,
        report: Option<Report>,
    ) -> Option<BoxFuture<'static, ()>> {
        if let Err(error) = &result {
            self.settlement_failed(error);
        }
        report.and_then(|report| report.tell(result, &self.runtime.after_settle))
    }

    /// The failure policy's decision for `cause` (see [`Policy::decide`]).
    #[cold]
    fn policy(
        &self,
        policy: Policy,
        cause: Cause,
        delivery: Option<&Delivery>,
    ) -> Option<(Outcome, Cause)> {
        policy.decide(cause, &self.mount.address, delivery, &self.runtime.shutdown)
    }
}

/// The settlement of a plan that is nothing more (no copy) for an outcome that asks for
/// nothing more (no reply, no `and_after`): the common case, settled and done.
#[inline(always)]
pub(super) fn bare(outcome: &Outcome, plan: &Plan) -> Option<Settlement> {
    match (&outcome.reply, &outcome.after, &plan.copy, plan.original) {
        (None, None, None, Original::Settle(settlement)) => Some(settlement),
        _ => None,
    }
}

impl<H: Handler<M>, M: 'static, L: Layers> Worker<H, M, L> {
    /// What the decision decides for `delivery` (of which it read `facts`) and `outcome`.
    ///
    /// Logs it: at debug for every delivery; at warn where a failure policy decided (a
    /// payload that did not decode, a panic, a timeout) or a retry was spent (dead
    /// lettered, or rejected at the cap).
    #[inline(always)]
    pub(super) fn plan(
        &self,
        delivery: &Delivery,
        facts: Facts,
        outcome: &Outcome,
        cause: &Cause,
    ) -> Plan {
        // One look on the common path (an ack from the handler, debug off); the rest,
        // with its logs, out of line.
        if outcome.verdict == Verdict::Ack && !tracing::level_enabled!(tracing::Level::DEBUG) {
            return decide(
                Verdict::Ack,
                facts,
                self.capabilities,
                &self.mount.declaration,
                delivery.address(),
            );
        }
        self.plan_observed(delivery, facts, outcome, cause)
    }

    /// [`Worker::plan`] with its logs.
    #[cold]
    #[inline(never)]
    fn plan_observed(
        &self,
        delivery: &Delivery,
        facts: Facts,
        outcome: &Outcome,
        cause: &Cause,
    ) -> Plan {
        let plan = decide(
            outcome.verdict,
            facts,
            self.capabilities,
            &self.mount.declaration,
            delivery.address(),
        );
        let mount = (&self.mount, self.capabilities);
        crate::plan_log::log(mount, delivery, facts, outcome, cause, &plan);
        plan
    }

    /// Whether the handler's polls run inside the delivery's visits: only where the
    /// handler has middleware, and one of its visits enters.
    #[inline(always)]
    fn followed(&self, visits: &Visits) -> bool {
        self.stack.stack().is_some() && visits.enters()
    }

    /// Carries out `plan` for `delivery` when there is more to it than a settlement
    /// (a reply, a copy, an `and_after`) and reports it. `elapsed`: how long the handler
    /// ran, where it ran and was timed.
    pub(super) async fn finish(
        &self,
        delivery: Delivery,
        (mut outcome, cause): (Outcome, Cause),
        facts: Facts,
        mut plan: Plan,
        visits: Visits,
        elapsed: Option<Duration>,
    ) {
        if let Some(reply) = outcome.reply.take()
            && crate::reply::send(reply, &delivery, &self.mount, &self.runtime.app)
                .await
                .is_err()
        {
            // The answer the handler owes did not go out: the request is retried
            // (through the cap) rather than settled without it.
            outcome.verdict = ruststream_core::Verdict::Retry;
            plan = self.plan(&delivery, facts, &outcome, &cause);
        }
        let address = (outcome.after.is_some() || self.watched).then(|| delivery.address().clone());
        let why = Why {
            from: &self.mount.address,
            attempt: facts.attempt,
            cause: &cause,
            reason: outcome.reason.as_deref(),
            service: &self.runtime.service,
        };
        let result = execute(
            delivery,
            &plan,
            &self.capabilities,
            &self.runtime,
            &why,
            &visits,
        )
        .await;
        let report = address.map(|address| Report {
            address,
            attempt: facts.attempt,
            verdict: outcome.verdict,
            cause,
            plan,
            after: outcome.after,
            visits,
            elapsed,
        });
        if let Some(after) = self.settled(result, report) {
            after.await;
        }
    }

    #[cold]
    pub(super) fn settlement_failed(&self, error: &SettleError) {
        tracing::warn!(address = %self.mount.address, %error, "settlement failed; going on");
    }
}

/// The handler's future (in the loop's place for it) until it decides, within the
/// mount's time limit.
pub(super) struct Handling<'a, H: Handler<M>, M: 'static, L: Layers> {
    pub(super) worker: &'a Worker<H, M, L>,
    pub(super) delivery: &'a Delivery,
    pub(super) visits: &'a Visits,
    pub(super) running: Pin<&'a mut Option<H::Future>>,
    pub(super) deadline: Pin<&'a mut Option<Sleep>>,
}

impl<H: Handler<M>, M: 'static, L: Layers> Future for Handling<'_, H, M, L> {
    type Output = Option<(Outcome, Cause)>;

    fn poll(self: Pin<&mut Self>, cx: &mut task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (worker, delivery) = (this.worker, this.delivery);
        match poll(this.running.as_mut(), worker, delivery, this.visits, cx) {
            Poll::Pending => match worker.mount.timeout {
                Some(limit) => {
                    let (running, deadline) = (this.running.as_mut(), this.deadline.as_mut());
                    expired(running, deadline, limit, worker, delivery, cx)
                }
                None => Poll::Pending,
            },
            decided => decided,
        }
    }
}

/// Polls the handler's future, under `catch_unwind` (and inside the delivery's visits,
/// where middleware follow it); once it is over (and dropped), what to do: its outcome,
/// or the panic policy's decision (`None`: stop).
#[inline(always)]
pub(super) fn poll<H: Handler<M>, M: 'static, L: Layers>(
    mut running: Pin<&mut Option<H::Future>>,
    worker: &Worker<H, M, L>,
    delivery: &Delivery,
    visits: &Visits,
    cx: &mut task::Context<'_>,
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
        Err(panic) => {
            let cause = Cause::Panic(panic_message(&*panic));
            worker.policy(worker.mount.on_panic, cause, Some(delivery))
        }
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
    cx: &mut task::Context<'_>,
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
    let cause = Cause::Timeout(limit);
    Poll::Ready(worker.policy(worker.mount.on_timeout, cause, Some(delivery)))
}
