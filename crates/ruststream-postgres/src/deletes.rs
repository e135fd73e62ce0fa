//! Deleting settled rows together: one statement (one commit) for the rows settled at
//! the same moment.
//!
//! Each commit waits for PostgreSQL to flush its log, and that, not the row, is what a
//! settlement costs: one `DELETE` per message made the framework about an eighth of a
//! raw loop deleting 64 rows at once (`BENCHMARKS.md`). A task per subscription takes the
//! rows to delete; it gathers first (it yields while the ready tasks add rows, then
//! waits up to [`HOLD`] for a run of [`RUN`], or as many as the mount can leave waiting
//! where that is fewer), then deletes them in one statement, and answers each settlement
//! once that statement committed: whether its row was still this claim's (same id, same
//! attempt) or the lease was lost.

use std::sync::Arc;
use std::time::Duration;

use ruststream_core::AckError;
use tokio::sync::{mpsc, oneshot};

use crate::inner::Inner;

/// At most this many rows per statement.
const MAX_ROWS: usize = 1024;
/// A flush waits for up to this many rows …
const RUN: usize = 64;
/// … for this long at most.
const HOLD: Duration = Duration::from_millis(1);
/// Up to how many times a flush yields for the rows of the same moment to join it.
const GATHER_YIELDS: usize = 8;

/// A row to delete (its id, the attempt of this claim and the settlement's name, which
/// the archive keeps), and where to say whether it was deleted.
type Request = (
    i64,
    i32,
    &'static str,
    oneshot::Sender<Result<bool, AckError>>,
);

/// How many rows a flush waits for: [`RUN`], but never more than can wait at once (the
/// subscription holds at most `batch` rows, one of them possibly in its handler).
fn run_for(batch: usize) -> usize {
    RUN.min(batch.saturating_sub(1)).max(1)
}

/// The sending side; the task ends when every clone is dropped.
#[derive(Clone, Debug)]
pub(crate) struct Deletes {
    requests: mpsc::UnboundedSender<Request>,
}

impl Deletes {
    /// Starts the task deleting rows of `inner`'s table for a subscription holding at
    /// most `batch` rows; with `archive`, each deleted row is copied to the archive table
    /// in the same statement.
    pub(crate) fn spawn(inner: Arc<Inner>, batch: usize, archive: bool) -> Self {
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        let run = run_for(batch);
        tokio::spawn(async move {
            let statement = if archive {
                format!(
                    "WITH gone AS (
                        DELETE FROM {m} AS m
                        USING unnest($1::bigint[], $2::integer[], $3::text[])
                            AS s(id, attempts, settlement)
                        WHERE m.id = s.id AND m.attempts = s.attempts
                        RETURNING m.*, s.settlement),
                     kept AS (
                        INSERT INTO {a} (id, queue, payload, header_names, header_values,
                                         attempts, created_at, settlement)
                        SELECT id, queue, payload, header_names, header_values, attempts,
                               created_at, settlement FROM gone)
                     SELECT id FROM gone",
                    m = inner.names.messages,
                    a = inner.names.archive
                )
            } else {
                format!(
                    "DELETE FROM {} AS m USING unnest($1::bigint[], $2::integer[]) AS s(id, attempts)
                     WHERE m.id = s.id AND m.attempts = s.attempts RETURNING m.id",
                    inner.names.messages
                )
            };
            let mut batch: Vec<Request> = Vec::new();
            while let Some(first) = rx.recv().await {
                batch.push(first);
                gather(&mut rx, &mut batch, run).await;
                let ids: Vec<i64> = batch.iter().map(|(id, ..)| *id).collect();
                let attempts: Vec<i32> = batch.iter().map(|(_, a, ..)| *a).collect();
                let mut query = sqlx::query_scalar(&statement).bind(&ids).bind(&attempts);
                if archive {
                    // How each row was settled, for the archive only.
                    let settlements: Vec<&str> = batch.iter().map(|(_, _, s, _)| *s).collect();
                    query = query.bind(settlements);
                }
                let mut deleted: Result<Vec<i64>, sqlx::Error> = query.fetch_all(&inner.pool).await;
                if let Ok(rows) = &mut deleted {
                    rows.sort_unstable();
                }
                for (id, _, _, reply) in batch.drain(..) {
                    let answer = match &deleted {
                        Ok(rows) => Ok(rows.binary_search(&id).is_ok()),
                        Err(error) => Err(ack_error(error)),
                    };
                    let _ = reply.send(answer);
                }
            }
        });
        Self { requests }
    }

    /// Deletes row `id` of claim `attempts`, settled as `settlement`, with the next
    /// statement: whether it was still this claim's, once that statement committed.
    pub(crate) async fn delete(
        &self,
        id: i64,
        attempts: i32,
        settlement: &'static str,
    ) -> Result<bool, AckError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((id, attempts, settlement, tx))
            .map_err(|_| AckError::Disconnected)?;
        rx.await.map_err(|_| AckError::Disconnected)?
    }
}

/// A failed statement's settlement error.
pub(crate) fn ack_error(error: &sqlx::Error) -> AckError {
    match error {
        sqlx::Error::Database(db) => AckError::Refused(db.message().to_owned()),
        _ => AckError::Disconnected,
    }
}

/// Takes into `batch` what is waiting: first while yielding lets the ready tasks add
/// rows, then, below `run` rows, what comes within [`HOLD`].
async fn gather(rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>, run: usize) {
    for _ in 0..GATHER_YIELDS {
        tokio::task::yield_now().await;
        if !take(rx, batch) || batch.len() >= run {
            break;
        }
    }
    let until = tokio::time::Instant::now() + HOLD;
    while batch.len() < run.min(MAX_ROWS) {
        match tokio::time::timeout_at(until, rx.recv()).await {
            Ok(Some(request)) => {
                batch.push(request);
                take(rx, batch);
            }
            Ok(None) | Err(_) => break,
        }
    }
}

/// Takes what is waiting without waiting; whether there was anything.
fn take(rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>) -> bool {
    let before = batch.len();
    while batch.len() < MAX_ROWS {
        match rx.try_recv() {
            Ok(request) => batch.push(request),
            Err(_) => break,
        }
    }
    batch.len() > before
}

#[cfg(test)]
mod tests {
    use super::run_for;

    #[test]
    fn a_flush_waits_for_no_more_rows_than_can_wait() {
        // A sequential mount (65 held), 16 workers, one at a time.
        assert_eq!(run_for(65), 64);
        assert_eq!(run_for(16), 15);
        assert_eq!(run_for(1), 1);
        assert_eq!(run_for(1_000), 64);
    }
}
