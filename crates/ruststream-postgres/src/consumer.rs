//! A subscription's reader: claims visible rows with `FOR UPDATE SKIP LOCKED` under a
//! lease, hands them out, waits on `LISTEN` (or the next row's visibility, or the slow
//! poll), and extends the leases of what it holds.

use ruststream_adapter::Outage;
use std::sync::Arc;
use std::time::Duration;

use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, Drain};
use sqlx::Row;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::acker::{RowAcker, tag};
use crate::deletes::Deletes;
use crate::inner::Inner;
use crate::lease::Held;
use crate::row;
use crate::settings::Claim;

/// What a reader waits for before it claims again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// A notification, or the deadline.
    Rows(Instant),
    /// A held row let go, or the deadline.
    Room(Instant),
    /// Only the deadline (a back-off after an error).
    Backoff(Instant),
}

/// One subscription's reader task.
pub(crate) struct Consumer {
    pub(crate) inner: Arc<Inner>,
    pub(crate) queue: Address,
    pub(crate) claim: Claim,
    pub(crate) batch: usize,
    /// The most claimed rows waiting for the runtime at once.
    pub(crate) ahead: usize,
    pub(crate) held: Arc<Held>,
    pub(crate) notify: Arc<Notify>,
    pub(crate) drain: Drain,
    pub(crate) attached: Attached,
    pub(crate) tx: mpsc::UnboundedSender<Result<Delivery, ConsumeError>>,
}

impl Consumer {
    /// Claims and hands out rows until the broker closes, a drain is requested or the
    /// stream is dropped; then keeps the leases of what is still held until it is let go.
    pub(crate) async fn run(self) {
        let mut closed = self.inner.closed.subscribe();
        let mut tick = tokio::time::interval(self.claim.lease / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let acker: Arc<dyn Acker> = Arc::new(RowAcker {
            inner: self.inner.clone(),
            held: self.held.clone(),
            deletes: Deletes::spawn(self.inner.clone(), self.batch, self.claim.archive),
        });
        let mut backoff = Duration::from_millis(100);
        // An outage is one error (one WARN), not one per failed claim.
        let mut outage = Outage::default();
        'claiming: loop {
            let waiting = self.held.waiting();
            let room = self
                .batch
                .saturating_sub(self.held.len())
                .min(self.ahead.saturating_sub(waiting));
            // Each claim is a commit: while rows still wait for the handlers, the next
            // claim waits for room for half as many as may wait, not for one row.
            let wait = if room == 0 || (waiting > 0 && room < self.ahead.div_ceil(2)) {
                Wait::Room(Instant::now() + self.claim.poll)
            } else {
                match self.take(room, &acker).await {
                    Ok(taken) => {
                        self.attached.attach();
                        if outage.back() {
                            tracing::info!(queue = %self.queue, "postgres: claiming again");
                        }
                        backoff = Duration::from_millis(100);
                        if taken == room {
                            continue;
                        }
                        Wait::Rows(Instant::now() + self.next_visible().await)
                    }
                    Err(error) => {
                        if *closed.borrow() {
                            break;
                        }
                        self.attached.detach();
                        if outage.lost() {
                            let _ = self.tx.send(Err(ConsumeError(format!(
                                "postgres: claiming from {} failed: {error}",
                                self.queue
                            ))));
                        } else {
                            tracing::debug!(queue = %self.queue, %error, "postgres: claiming still fails");
                        }
                        let until = Instant::now() + backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        Wait::Backoff(until)
                    }
                }
            };
            let deadline = match wait {
                Wait::Rows(at) | Wait::Room(at) | Wait::Backoff(at) => at,
            };
            loop {
                tokio::select! {
                    biased;
                    _ = crate::wake::closed(&mut closed) => break 'claiming,
                    _ = self.drain.requested() => break 'claiming,
                    _ = self.tx.closed() => break 'claiming,
                    _ = tick.tick() => self.held.extend(&self.inner.pool, &self.inner.names, self.claim.lease).await,
                    _ = self.notify.notified(), if matches!(wait, Wait::Rows(_)) => break,
                    _ = self.held.freed.notified(), if matches!(wait, Wait::Room(_)) => break,
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        let Self {
            inner,
            held,
            claim,
            tx,
            ..
        } = self;
        // The stream ends after what it holds; handlers may still run on held rows.
        drop(tx);
        while held.len() > 0 && !*closed.borrow() {
            tokio::select! {
                _ = crate::wake::closed(&mut closed) => break,
                _ = tick.tick() => held.extend(&inner.pool, &inner.names, claim.lease).await,
                _ = held.freed.notified() => {}
            }
        }
    }

    /// Claims up to `room` visible rows and hands them out; how many it took.
    async fn take(&self, room: usize, acker: &Arc<dyn Acker>) -> Result<usize, sqlx::Error> {
        let statement = format!(
            "WITH picked AS (
                SELECT id FROM {m} WHERE queue = $1 AND visible_at <= now()
                ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
             UPDATE {m} AS m
             SET attempts = m.attempts + 1, leased = true,
                 visible_at = now() + $3 * interval '1 millisecond'
             FROM picked WHERE m.id = picked.id
             RETURNING m.id, m.attempts, m.payload, m.header_names, m.header_values",
            m = self.inner.names.messages
        );
        let mut rows = sqlx::query(&statement)
            .bind(self.queue.as_str())
            .bind(room as i64)
            .bind(self.claim.lease.as_millis() as f64)
            .fetch_all(&self.inner.pool)
            .await?;
        let taken = rows.len();
        let mut claimed = Vec::with_capacity(taken);
        for found in rows.drain(..) {
            let id: i64 = found.try_get("id")?;
            let attempts: i32 = found.try_get("attempts")?;
            let (message, defect) = row::message(
                found.try_get("payload")?,
                found.try_get("header_names")?,
                found.try_get("header_values")?,
            );
            claimed.push((id, attempts, message, defect));
        }
        // RETURNING does not keep the claim's order.
        claimed.sort_by_key(|(id, ..)| *id);
        for (id, attempts, message, defect) in claimed {
            self.held.insert(id, attempts);
            let mut delivery = Delivery::new(
                message.payload,
                message.headers,
                self.queue.clone(),
                tag(id, attempts),
                acker.clone(),
            )
            .with_broker_attempt(u32::try_from(attempts).unwrap_or(u32::MAX));
            if let Some(defect) = defect {
                delivery = delivery.with_defect(defect);
            }
            // A stream dropped meanwhile drops the delivery, which gives the row back.
            self.held.handed();
            let _ = self.tx.send(Ok(delivery));
        }
        Ok(taken)
    }

    /// How long until the queue's next row becomes visible (a delay, a lease running
    /// out), at most the poll.
    async fn next_visible(&self) -> Duration {
        let statement = format!(
            "SELECT (extract(epoch FROM min(visible_at) - now()) * 1000)::float8 AS ms
             FROM {} WHERE queue = $1",
            self.inner.names.messages
        );
        let ms: Option<f64> = sqlx::query_scalar(&statement)
            .bind(self.queue.as_str())
            .fetch_one(&self.inner.pool)
            .await
            .unwrap_or(None);
        match ms {
            // A row visible now but skipped is being claimed by another consumer.
            Some(ms) => Duration::from_millis(ms.max(20.0) as u64).min(self.claim.poll),
            None => self.claim.poll,
        }
    }
}
