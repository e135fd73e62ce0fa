//! Handling one delivery: decode, call, apply a failure policy, settle, run hooks.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{
    Address, BoxFuture, Capabilities, Delivery, Facts, Original, Plan, Settlement, Verdict, decide,
};

use crate::dead_letter::Why;
use crate::execute::execute;
use crate::extract::Context;
use crate::handler::Handler;
use crate::layer::{Stack, Visits};
use crate::mount::Mount;
use crate::outcome::Outcome;
use crate::policy::{Policy, panic_message};
use crate::runtime::Runtime;
use crate::settled::{Cause, SettleError, Settled};

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

/// What the hooks and the delivery's visits learn once its settlement is over.
///
/// Its own fields rather than a [`Settled`] waiting for its result: that shape, tried,
/// cost 131 more instructions a message where settlements are watched (`scripts/bench-core
/// raw+metrics`, 1,444 against 1,313), the larger value moved along the loop's path.
pub(super) struct Report {
    pub(super) address: Address,
    pub(super) attempt: u32,
    pub(super) verdict: Verdict,
    pub(super) cause: Cause,
    pub(super) plan: Plan,
    pub(super) after: Option<crate::outcome::After>,
    pub(super) visits: Visits,
    pub(super) elapsed: Option<Duration>,
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
        report.and_then(|report| self.told(result, report))
    }

    #[inline(never)]
    fn told(
        &self,
        result: Result<(), SettleError>,
        Report {
            address,
            attempt,
            verdict,
            cause,
            plan,
            after,
            visits,
            elapsed,
        }: Report,
    ) -> Option<BoxFuture<'static, ()>> {
        let settled = Settled {
            address,
            attempt,
            verdict,
            cause,
            plan,
            result,
            elapsed,
        };
        visits.settled(&settled);
        for hook in &self.runtime.after_settle {
            hook(&settled);
        }
        after.map(|after| after(&settled))
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
    pub(super) fn followed(&self, visits: &Visits) -> bool {
        self.stack.stack().is_some() && visits.enters()
    }

    /// The timeout policy's decision for a handler cancelled after `limit`.
    #[cold]
    pub(super) fn timed_out(
        &self,
        limit: std::time::Duration,
        delivery: Option<&Delivery>,
    ) -> Option<(Outcome, Cause)> {
        self.policy(self.mount.on_timeout, Cause::Timeout(limit), delivery)
    }

    /// The panic policy's decision for a handler that panicked with `message`.
    #[cold]
    pub(super) fn panicked(
        &self,
        message: String,
        delivery: Option<&Delivery>,
    ) -> Option<(Outcome, Cause)> {
        self.policy(self.mount.on_panic, Cause::Panic(message), delivery)
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
