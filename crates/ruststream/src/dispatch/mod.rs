//! Running handlers over subscriptions: the per-mount loops.

mod deferred;
mod execute;
mod sequential;
mod shutdown;
mod worker;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use ruststream_core::{BoxFuture, DeliveryStream, Publish};
use tokio::sync::mpsc;

use crate::extract::AppContext;
use crate::mount::Concurrency;
use crate::settled::Settled;

pub(crate) use deferred::Deferred;
pub use deferred::DelayedLimit;
pub(crate) use sequential::TRAILING;
pub(crate) use shutdown::Shutdown;
pub(crate) use worker::{Process, Worker};

pub(crate) type AfterSettle = Arc<dyn Fn(&Settled) + Send + Sync>;

/// What every loop of a running service shares.
pub(crate) struct Runtime {
    pub(crate) app: AppContext,
    pub(crate) publish: Arc<dyn Publish>,
    pub(crate) after_settle: Vec<AfterSettle>,
    pub(crate) shutdown: Shutdown,
    pub(crate) deferred: Arc<Deferred>,
    pub(crate) in_flight: AtomicUsize,
}

/// The loops that run `worker` over `deliveries` with the mount's concurrency, until the
/// stream ends or the service stops: one for sequential handling, `n` workers sharing
/// the stream, or a reader feeding `n` ordered lanes. The caller spawns them, so that a
/// stop can abort and await every one.
pub(crate) fn loops<W: Process>(
    worker: W,
    mut deliveries: DeliveryStream,
    concurrency: Concurrency,
) -> Vec<BoxFuture<'static, ()>> {
    let worker = Arc::new(worker);
    match concurrency {
        Concurrency::Sequential => vec![worker.sequential(deliveries)],
        Concurrency::Workers(n) => {
            let deliveries = Arc::new(tokio::sync::Mutex::new(deliveries));
            (0..n)
                .map(|_| {
                    let worker = worker.clone();
                    let deliveries = deliveries.clone();
                    Box::pin(async move {
                        loop {
                            room(worker.runtime()).await;
                            let item = {
                                let mut stream = deliveries.lock().await;
                                worker.runtime().shutdown.next(&mut stream).await
                            };
                            match item {
                                None => break,
                                Some(Ok(delivery)) => {
                                    if !worker.handle(delivery).await {
                                        break;
                                    }
                                }
                                Some(Err(error)) => worker.report(&error),
                            }
                        }
                    }) as BoxFuture<'static, ()>
                })
                .collect()
        }
        Concurrency::Lanes { lanes, key } => {
            let mut loops: Vec<BoxFuture<'static, ()>> = Vec::with_capacity(lanes + 1);
            let mut senders = Vec::with_capacity(lanes);
            for _ in 0..lanes {
                let (tx, mut rx) = mpsc::channel(1);
                senders.push(tx);
                let worker = worker.clone();
                loops.push(Box::pin(async move {
                    while let Some(delivery) = rx.recv().await {
                        room(worker.runtime()).await;
                        if !worker.handle(delivery).await {
                            break;
                        }
                    }
                }));
            }
            loops.push(Box::pin(async move {
                let shutdown = &worker.runtime().shutdown;
                while let Some(item) = {
                    room(worker.runtime()).await;
                    shutdown.next(&mut deliveries).await
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
            }));
            loops
        }
    }
}

/// Waits while the delayed copies are at their bound (see [`Deferred`]), or until the
/// service stops.
async fn room(runtime: &Runtime) {
    if runtime.deferred.is_full() {
        tokio::select! {
            () = runtime.deferred.wait_room() => {}
            () = runtime.shutdown.wait() => {}
        }
    }
}
