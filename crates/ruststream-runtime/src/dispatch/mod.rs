//! Running handlers over subscriptions: the per-mount loops.

mod behind;
mod execute;
mod handling;
mod run;
mod shared;
mod worker;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use ruststream_core::{DeliveryStream, Publish};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::deferred::Deferred;
use crate::extract::AppContext;
use crate::mount::Concurrency;
use crate::settled::Settled;
use crate::shutdown::Shutdown;

pub(crate) use run::Process;
pub(crate) use worker::{NoLayers, Worker};

pub(crate) type AfterSettle = Arc<dyn Fn(&Settled) + Send + Sync>;

/// What every loop of a running service shares.
pub(crate) struct Runtime {
    pub(crate) app: AppContext,
    /// The service's name, on its dead letters.
    pub(crate) service: String,
    /// The broker's name (OpenTelemetry's `messaging.system`).
    pub(crate) system: &'static str,
    pub(crate) publish: Arc<dyn Publish>,
    pub(crate) after_settle: Vec<AfterSettle>,
    pub(crate) shutdown: Shutdown,
    pub(crate) deferred: Arc<Deferred>,
    /// The messages whose copy the broker refused for good, lately.
    pub(crate) refused: crate::refused::Refused,
    pub(crate) in_flight: AtomicUsize,
    /// How many bare settlements the broker lets trail behind a mount, if it declares a
    /// number ([`Concurrency::trailing`] shares it among a mount's loops).
    pub(crate) trailing: Option<usize>,
}

/// Spawns on `tasks` the loops that run `worker` over `deliveries` with the mount's
/// concurrency, until the stream ends or the service stops. Each is the one delivery
/// loop ([`sequential`](Process::sequential)), with the bare settlements
/// [`Concurrency::trailing`] lets be under way behind it: one for sequential handling,
/// `n` sharing the subscription for workers, or one per lane fed by a reader that routes
/// each delivery by its key. They
/// go on the service's tasks, so that a stop can abort and await every one (spawned
/// here rather than returned: no `Vec` of them to allocate).
pub(crate) fn loops<W: Process>(
    worker: W,
    mut deliveries: DeliveryStream,
    concurrency: Concurrency,
    tasks: &mut JoinSet<()>,
) {
    let worker = Arc::new(worker);
    match concurrency {
        Concurrency::Sequential => {
            let trailing = concurrency.trailing(worker.runtime().trailing);
            tasks.spawn(worker.sequential(deliveries, trailing));
        }
        Concurrency::Workers(n) => {
            let trailing = concurrency.trailing(worker.runtime().trailing);
            for deliveries in shared::Shared::split(deliveries, n.max(1)) {
                tasks.spawn(worker.clone().sequential(deliveries, trailing));
            }
        }
        Concurrency::Lanes { lanes, key } => {
            let mut senders = Vec::with_capacity(lanes);
            for _ in 0..lanes {
                let (tx, rx) = mpsc::channel(1);
                senders.push(tx);
                tasks.spawn(worker.clone().sequential(Box::pin(shared::Lane(rx)), 0));
            }
            tasks.spawn(async move {
                let shutdown = &worker.runtime().shutdown;
                let drains = worker.drains();
                while let Some(item) = {
                    if worker.runtime().deferred.is_full() {
                        room(worker.runtime()).await;
                    }
                    shutdown.next(&mut deliveries, drains).await
                } {
                    let delivery = match item {
                        Ok(delivery) => delivery,
                        Err(error) => {
                            worker.report(&error);
                            continue;
                        }
                    };
                    let lane = (key(&delivery) % senders.len() as u64) as usize;
                    if senders[lane].send(delivery).await.is_err() {
                        break;
                    }
                }
            });
        }
    }
}

/// Waits while the delayed copies are at their bound (see [`Deferred`]); `false`: the
/// service stops first.
async fn room(runtime: &Runtime) -> bool {
    tokio::select! {
        biased;
        () = runtime.deferred.wait_room() => true,
        () = runtime.shutdown.wait() => false,
    }
}
