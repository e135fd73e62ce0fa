//! The relay: publishes an outbox's committed rows to a broker, continuously.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use ruststream_adapter::Backoff;
use ruststream_core::Publish;
use sqlx::PgPool;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::{Outbox, OutboxError, listen, round};

/// How a relay works.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    pub(super) batch: usize,
    pub(super) poll: Duration,
    pub(super) retry_min: Duration,
    pub(super) retry_max: Duration,
    pub(super) publish_timeout: Duration,
}

/// Publishes an outbox's rows through any broker's [`Publish`], waiting for each
/// confirmation, and deletes them once published.
///
/// Each round claims up to [`batch`](Self::batch) rows with `FOR UPDATE SKIP LOCKED` in
/// one transaction (so several relays share the rows and never take the same one),
/// publishes them, deletes those published and commits. A relay killed before its commit
/// leaves the whole batch to the next claim: published again, never lost. A failed publish
/// keeps its row, records `attempts` and `last_error`, and is tried again after a jittered
/// back-off ([`retry`](Self::retry)); it holds back the later rows of its key only.
///
/// Idle, a relay waits for an insert's notification (`LISTEN`), the moment a failed row
/// is due again, or the slow [`poll`](Self::poll), whichever comes first.
#[derive(Clone, Debug)]
pub struct Relay {
    outbox: Outbox,
    pool: PgPool,
    settings: Settings,
}

impl Relay {
    pub(super) fn new(outbox: Outbox, pool: PgPool) -> Self {
        Self {
            outbox,
            pool,
            settings: Settings {
                batch: 100,
                poll: Duration::from_secs(5),
                retry_min: Duration::from_millis(100),
                retry_max: Duration::from_secs(30),
                publish_timeout: Duration::from_secs(30),
            },
        }
    }

    /// The most rows one round claims (default 100, at least 1).
    pub fn batch(mut self, rows: usize) -> Self {
        self.settings.batch = rows.max(1);
        self
    }

    /// How often an idle relay looks without a notification (default 5 s, at least 10 ms).
    pub fn poll(mut self, every: Duration) -> Self {
        self.settings.poll = every.max(Duration::from_millis(10));
        self
    }

    /// The back-off of a row whose publish failed: from `min`, doubling up to `max`, with
    /// jitter (default 100 ms to 30 s; never more than a week).
    pub fn retry(mut self, min: Duration, max: Duration) -> Self {
        self.settings.retry_min = min;
        self.settings.retry_max = max.max(min);
        self
    }

    /// How long one publish may take before it counts as failed (default 30 s, at least
    /// 1 ms).
    pub fn publish_timeout(mut self, limit: Duration) -> Self {
        self.settings.publish_timeout = limit.max(Duration::from_millis(1));
        self
    }

    /// One round: claims a batch, publishes it, deletes what was published, commits.
    /// Returns how many rows were published.
    pub async fn relay_once(&self, publisher: &dyn Publish) -> Result<usize, OutboxError> {
        self.round(publisher).await.map(|done| done.published)
    }

    async fn round(&self, publisher: &dyn Publish) -> Result<round::Done, OutboxError> {
        let mut tx = self.pool.begin().await?;
        let done = round::run(&mut tx, self.outbox.names(), &self.settings, publisher).await?;
        tx.commit().await?;
        Ok(done)
    }

    /// Relays until `stop` completes: a stop finishes the round in hand (its publishes are
    /// confirmed and its rows deleted) and returns. A plain future, to spawn beside the
    /// service (or use [`spawn`](Self::spawn)).
    ///
    /// A round that fails (PostgreSQL away) is logged and tried again after a back-off
    /// (100 ms doubling to 5 s).
    pub async fn run(self, publisher: Arc<dyn Publish>, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let notify = Arc::new(Notify::new());
        let channel = self.outbox.names().outbox_channel.clone();
        let _listening = Abort(tokio::spawn(listen::listen(
            self.pool.clone(),
            channel,
            notify.clone(),
        )));
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            if stop.as_mut().now_or_never().is_some() {
                return;
            }
            let wait = match self.round(&*publisher).await {
                Ok(done) => {
                    backoff.reset();
                    if done.claimed >= self.settings.batch {
                        continue;
                    }
                    done.retry_in
                        .map_or(self.settings.poll, |due| due.min(self.settings.poll))
                }
                Err(error) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(%error, retry_in = ?wait, "postgres outbox: a relay round failed");
                    wait
                }
            };
            tokio::select! {
                biased;
                () = stop.as_mut() => return,
                () = notify.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Spawns [`run`](Self::run) on the current tokio runtime; the handle stops it.
    pub fn spawn(self, publisher: Arc<dyn Publish>) -> RelayHandle {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(self.run(publisher, stopped.map(drop)));
        RelayHandle {
            stop: Some(stop),
            task,
        }
    }
}

/// A spawned [`Relay`]. Dropping it stops the relay too (after its round in hand), without
/// waiting for it.
#[derive(Debug)]
pub struct RelayHandle {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl RelayHandle {
    /// Stops the relay and waits for it to finish the round in hand.
    pub async fn stop(mut self) {
        drop(self.stop.take());
        if let Err(error) = (&mut self.task).await {
            tracing::warn!(%error, "postgres outbox: the relay task failed");
        }
    }

    /// Whether the relay has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// Aborts the task when dropped.
struct Abort(JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}
