//! A mount's concurrency: the delivery loops it runs over its subscription.
//!
//! Every concurrency runs the one delivery loop ([`Process::sequential`]): one loop for
//! sequential handling, `n` taking turns at the subscription for workers
//! ([`workers`]), or one per lane fed by a reader that routes each delivery by its key
//! ([`lanes`]).

mod lanes;
mod workers;

use std::sync::Arc;

use ruststream_core::{BoxFuture, ConsumeError, DeliveryStream};
use tokio::task::JoinSet;

use crate::mount::Concurrency;
use crate::runtime::Runtime;

/// Spawns on `tasks` the loops that run `worker` over `deliveries` with the mount's
/// concurrency, until the stream ends or the service stops, each with the bare
/// settlements [`Concurrency::trailing`] lets be under way behind it. They go on the
/// service's tasks, so that a stop can abort and await every one (spawned here rather
/// than returned: no `Vec` of them to allocate).
pub(crate) fn loops<W: Process>(
    worker: W,
    deliveries: DeliveryStream,
    concurrency: Concurrency,
    tasks: &mut JoinSet<()>,
) {
    let worker = Arc::new(worker);
    let trailing = concurrency.trailing(worker.runtime().trailing);
    match concurrency {
        Concurrency::Sequential => {
            tasks.spawn(worker.sequential(deliveries, trailing));
        }
        Concurrency::Workers(n) => {
            for deliveries in workers::Shared::split(deliveries, n.max(1)) {
                tasks.spawn(worker.clone().sequential(deliveries, trailing));
            }
        }
        Concurrency::Lanes { lanes, key } => {
            lanes::spawn(worker, deliveries, lanes, key, trailing, tasks);
        }
    }
}

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
