//! Waking consumers: one `LISTEN` connection per broker hands each notification (the
//! queue a row was published or given back to) to the subscriptions of that queue.

use ruststream_adapter::Outage;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::{Notify, watch};

/// The subscriptions waiting on each queue.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    queues: Mutex<HashMap<String, Vec<Weak<Notify>>>>,
}

impl Wake {
    /// A notifier for one subscription of `queue`; it keeps a wake-up that came while
    /// the subscription was busy.
    pub(crate) fn register(&self, queue: &str) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = queues.entry(queue.to_owned()).or_default();
        waiting.retain(|w| w.strong_count() > 0);
        waiting.push(Arc::downgrade(&notify));
        notify
    }

    /// Wakes the subscriptions of `queue`.
    fn queue(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in queues.get(queue).into_iter().flatten() {
            if let Some(notify) = notify.upgrade() {
                notify.notify_one();
            }
        }
    }

    /// Wakes every subscription (notifications may have been missed).
    fn all(&self) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in queues.values().flatten().filter_map(Weak::upgrade) {
            notify.notify_one();
        }
    }
}

/// Hands `listener`'s notifications to `wake` until the broker closes. The client
/// reconnects a lost listener itself; every subscription is woken then, since what was
/// notified meanwhile is lost.
pub(crate) async fn listen(
    mut listener: PgListener,
    wake: Arc<Wake>,
    mut watching: watch::Receiver<bool>,
) {
    // An outage is one WARN, not one per try; it is known over with the next notification.
    let mut outage = Outage::default();
    loop {
        tokio::select! {
            // The broker closes its pool only after saying it is closed: checked first, so
            // the listener's failure on the closed pool is not taken for a lost connection.
            biased;
            _ = closed(&mut watching) => return,
            received = listener.try_recv() => match received {
                Ok(Some(notification)) => {
                    if outage.back() {
                        tracing::info!("postgres: listening again");
                    }
                    wake.queue(notification.payload());
                }
                Ok(None) => wake.all(),
                Err(_) if *watching.borrow() => return,
                Err(error) => {
                    if outage.lost() {
                        tracing::warn!(%error, "postgres: listen failed; retrying");
                    } else {
                        tracing::debug!(%error, "postgres: listen still fails");
                    }
                    wake.all();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
        }
    }
}

/// Resolves once the broker is closed.
pub(crate) async fn closed(watching: &mut watch::Receiver<bool>) {
    let _ = watching.wait_for(|closed| *closed).await.map(drop);
}
