//! A mount's concurrency: the delivery loops it runs over its subscription.
//!
//! Every concurrency runs the one delivery loop ([`Process::sequential`]): one loop for
//! sequential handling, `n` taking turns at the subscription for workers
//! ([`workers`]), or one per lane fed by a reader that routes each delivery by its key
//! ([`lanes`]).

mod lanes;
mod workers;

use std::sync::Arc;

use ruststream_core::DeliveryStream;
use tokio::task::JoinSet;

use crate::dispatch::Process;
use crate::mount::Concurrency;

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
