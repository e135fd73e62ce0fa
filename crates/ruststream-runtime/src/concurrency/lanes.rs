//! Lanes: one loop per lane, fed by a reader that routes each delivery by its key, so
//! that deliveries of one key are handled in order and keys run side by side.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use ruststream_core::{ConsumeError, Delivery, DeliveryStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::Process;

/// Spawns `lanes` loops, each over a channel of its own with `trailing` settlements
/// behind it (none: a lane keeps its key's settlements in order), and the reader that
/// routes `deliveries` among them by `key`.
pub(super) fn spawn<W: Process>(
    worker: Arc<W>,
    mut deliveries: DeliveryStream,
    lanes: usize,
    key: Arc<dyn Fn(&Delivery) -> u64 + Send + Sync>,
    trailing: usize,
    tasks: &mut JoinSet<()>,
) {
    let mut senders = Vec::with_capacity(lanes);
    for _ in 0..lanes {
        let (tx, rx) = mpsc::channel(1);
        senders.push(tx);
        tasks.spawn(worker.clone().sequential(Box::pin(Lane(rx)), trailing));
    }
    tasks.spawn(async move {
        let runtime = worker.runtime();
        let drains = worker.drains();
        while let Some(item) = {
            if runtime.deferred.is_full() {
                runtime.room().await;
            }
            runtime.shutdown.next(&mut deliveries, drains).await
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

/// A lane's channel as a stream of deliveries.
pub(super) struct Lane(pub(super) mpsc::Receiver<Delivery>);

impl Stream for Lane {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|delivery| delivery.map(Ok))
    }
}
