//! The shape of a layer on the delivery path: this crate's [`Middleware`] against
//! tower's `Layer`/`Service`, each with one layer that looks at the delivery before the
//! handler and at the outcome and the handler's duration after it, around the same
//! handler, stored type-erased as the runtime stores handlers.
//!
//! Not timed: callgrind counts the instructions of `bare` (the handler alone), `ours` and
//! `towers` (one call each,
//! delivery in, outcome out), and the counting allocator their allocations. Run it
//! through `scripts/bench-layer-shape`, which prints both per call.
//!
//! ```text
//! cargo bench -p ruststream --bench layer_shape -- 1000
//! ```

use std::alloc::System;
use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use ruststream::layer::{Middleware, Visit};
use ruststream::{Delivery, Headers, Outcome, Settled, ack};
use ruststream_core::{Acker, Address, Message, Original, Plan, Settlement, Settling, Tag};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The handler both shapes call.
async fn handle(delivery: Delivery) -> Outcome {
    std::hint::black_box(delivery.payload().len());
    ack()
}

/// Polls a future that is ready at once (every future here is).
fn ready<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the handlers here never wait"),
    }
}

/// This crate's shape: the middleware of a subscription as trait objects, asked for a
/// visit and before the handler; the visit is told of the settlement after it (its
/// verdict and the handler's duration). The handler's future is not boxed where no
/// middleware wraps it.
struct Look(Arc<Looked>);

/// What `Look` follows every delivery with: one shared value, so a visit costs an `Arc`
/// clone and no allocation.
struct Looked;

impl Middleware for Look {
    fn visit(&self, _: &Delivery) -> Option<Arc<dyn Visit>> {
        Some(self.0.clone())
    }

    fn before(&self, delivery: &Delivery) -> Option<Outcome> {
        std::hint::black_box(delivery.payload().len());
        None
    }
}

impl Visit for Looked {
    fn settled(&self, settled: &Settled) {
        std::hint::black_box((settled.verdict(), settled.elapsed()));
    }
}

/// No layer: the handler alone, the baseline both are measured against.
#[inline(never)]
fn bare(delivery: Delivery) -> Outcome {
    ready(handle(delivery))
}

/// As the runtime does it: the visits kept (the first in place, no allocation; whether
/// one enters the handler's polls noted), the middleware asked before the handler, the
/// handler timed, the settlement's report made (the address, the verdict, the plan, the
/// duration) and shown to the visits.
#[inline(never)]
fn ours(stack: &[Arc<dyn Middleware>], delivery: Delivery) -> Outcome {
    let mut first: Option<Arc<dyn Visit>> = None;
    let mut rest: Vec<Arc<dyn Visit>> = Vec::new();
    let mut enters = false;
    for m in stack {
        if let Some(visit) = m.visit(&delivery) {
            enters |= visit.enters();
            if first.is_none() {
                first = Some(visit);
            } else {
                rest.push(visit);
            }
        }
    }
    if let Some(outcome) = stack.iter().find_map(|m| m.before(&delivery)) {
        return outcome;
    }
    let address = delivery.address().clone();
    let started = Instant::now();
    // No visit here enters: the handler is polled as it is.
    let outcome = ready(handle(delivery));
    std::hint::black_box(enters);
    let elapsed = started.elapsed();
    let plan = Plan {
        copy: None,
        original: Original::Settle(Settlement::Accept),
    };
    let settled = ruststream::testing::settled(address, outcome.verdict(), plan, Some(elapsed));
    for visit in first.iter().chain(&rest).rev() {
        visit.settled(&settled);
    }
    outcome
}

/// tower's shape: the same look as a layer over the handler as a service (its future a
/// type of its own), the stack boxed once (`BoxCloneService`, as a router stores services
/// of different types: each call's future is boxed).
#[derive(Clone)]
struct LookLayer;

impl<S> Layer<S> for LookLayer {
    type Service = LookService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LookService(inner)
    }
}

#[derive(Clone)]
struct LookService<S>(S);

impl<S> Service<Delivery> for LookService<S>
where
    S: Service<Delivery, Response = Outcome, Error = Infallible>,
{
    type Response = Outcome;
    type Error = Infallible;
    // A future type of its own, not a box: the fair shape (a layer need not allocate).
    type Future = LookFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, delivery: Delivery) -> Self::Future {
        std::hint::black_box(delivery.payload().len());
        LookFuture {
            inner: self.0.call(delivery),
            started: Instant::now(),
        }
    }
}

pin_project_lite::pin_project! {
    struct LookFuture<F> {
        #[pin]
        inner: F,
        started: Instant,
    }
}

impl<F: Future<Output = Result<Outcome, Infallible>>> Future for LookFuture<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let outcome = std::task::ready!(this.inner.poll(cx))?;
        std::hint::black_box((outcome.verdict(), this.started.elapsed()));
        Poll::Ready(Ok(outcome))
    }
}

type Boxed = BoxCloneService<Delivery, Outcome, Infallible>;

#[inline(never)]
fn towers(service: &mut Boxed, delivery: Delivery) -> Outcome {
    let result = ready(async {
        let service = service.ready().await?;
        service.call(delivery).await
    });
    match result {
        Ok(outcome) => outcome,
        Err(never) => match never {},
    }
}

struct NoAck;

impl Acker for NoAck {
    fn settle(&self, _: Tag, _: Message, _: Settlement) -> Settling {
        Settling::done(Ok(()))
    }
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000);
    let acker: Arc<dyn Acker> = Arc::new(NoAck);
    let address = Address::new("orders");
    let payload = Bytes::from_static(br#"{"id":1,"qty":2}"#);
    let deliveries = |n: u64| -> Vec<Delivery> {
        (0..n)
            .map(|i| {
                Delivery::new(
                    payload.clone(),
                    Headers::new(),
                    address.clone(),
                    Tag::Seq(i),
                    acker.clone(),
                )
            })
            .collect()
    };

    for delivery in deliveries(n) {
        let _ = std::hint::black_box(bare(delivery));
    }

    let stack: Vec<Arc<dyn Middleware>> = vec![Arc::new(Look(Arc::new(Looked)))];
    let batch = deliveries(n);
    let region = Region::new(GLOBAL);
    for delivery in batch {
        let _ = std::hint::black_box(ours(&stack, delivery));
    }
    let ours_allocs = region.change().allocations;

    let mut service: Boxed = BoxCloneService::new(ServiceBuilder::new().layer(LookLayer).service(
        tower::service_fn(|d: Delivery| async move { Ok::<_, Infallible>(handle(d).await) }),
    ));
    let batch = deliveries(n);
    let region = Region::new(GLOBAL);
    for delivery in batch {
        let _ = std::hint::black_box(towers(&mut service, delivery));
    }
    let tower_allocs = region.change().allocations;

    println!(
        "{n} calls: allocations per call: ours {:.2}, tower {:.2}",
        ours_allocs as f64 / n as f64,
        tower_allocs as f64 / n as f64
    );
}
