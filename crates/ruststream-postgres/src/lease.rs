//! The rows a subscription holds (claimed, not yet settled) and the extension of their
//! leases while handlers run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::Notify;

use crate::schema::Names;

/// A subscription's claimed rows, by id, with the attempt each was claimed at, and how
/// many of them wait for the runtime to take them.
#[derive(Debug, Default)]
pub(crate) struct Held {
    rows: Mutex<HashMap<i64, i32>>,
    /// Claimed rows handed to the stream that the runtime has not taken yet.
    waiting: AtomicUsize,
    /// Woken when a row is let go or taken (room for another claim).
    pub(crate) freed: Notify,
}

impl Held {
    /// Records a claimed row.
    pub(crate) fn insert(&self, id: i64, attempts: i32) {
        self.lock().insert(id, attempts);
    }

    /// Lets go of a row settled or given back, if it is still this claim of it.
    pub(crate) fn release(&self, id: i64, attempts: i32) {
        let mut rows = self.lock();
        if rows.get(&id) == Some(&attempts) {
            rows.remove(&id);
            drop(rows);
            self.freed.notify_one();
        }
    }

    /// How many rows are held.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// A claimed row was handed to the stream.
    pub(crate) fn handed(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// The runtime took a row from the stream.
    pub(crate) fn taken(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        self.freed.notify_one();
    }

    /// How many rows wait in the stream for the runtime.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, i32>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Pushes the lease of every held row to `lease` from now. A row settled meanwhile
    /// (no longer `leased`, or claimed again), or locked by a statement under way, is
    /// left alone.
    pub(crate) async fn extend(&self, pool: &PgPool, names: &Names, lease: Duration) {
        let (ids, attempts): (Vec<i64>, Vec<i32>) = self.lock().iter().unzip();
        if ids.is_empty() {
            return;
        }
        // A row another statement has locked is skipped, not waited for: it is being
        // deleted (a settlement) or given back, and the next extension takes it if it
        // is still held. Waiting for it, the extension held the rows it had updated
        // already while the batched delete held that row and waited for those:
        // PostgreSQL ended one of them with `deadlock detected` (a settlement failed,
        // or every lease went unextended).
        let statement = format!(
            "UPDATE {m} AS m SET visible_at = now() + $3 * interval '1 millisecond'
             FROM (SELECT l.id FROM {m} AS l
                   JOIN unnest($1::bigint[], $2::integer[]) AS t(id, attempts)
                     ON l.id = t.id AND l.attempts = t.attempts
                   WHERE l.leased
                   FOR UPDATE OF l SKIP LOCKED) AS s
             WHERE m.id = s.id",
            m = names.messages
        );
        let extended = sqlx::query(&statement)
            .bind(ids)
            .bind(attempts)
            .bind(lease.as_millis() as f64)
            .execute(pool)
            .await;
        if let Err(error) = extended {
            tracing::warn!(%error, "postgres: lease extension failed");
        }
    }
}
