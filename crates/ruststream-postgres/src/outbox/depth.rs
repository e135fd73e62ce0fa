//! How far the relays are behind: the rows waiting and the oldest one's age.

use std::time::Duration;

use sqlx::{Executor, Postgres};

use super::{Outbox, OutboxError};

/// What waits in an outbox: the numbers to export as gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Depth {
    /// Messages not yet published (committed rows).
    pub rows: u64,
    /// Of those, messages whose publish failed at least once.
    pub failing: u64,
    /// How long ago the oldest waiting message was written; `None` when none waits.
    pub oldest: Option<Duration>,
}

/// Counts the rows of `outbox`.
pub(super) async fn query<'e, E>(outbox: &Outbox, executor: E) -> Result<Depth, OutboxError>
where
    E: Executor<'e, Database = Postgres>,
{
    let statement = format!(
        "SELECT count(*), count(*) FILTER (WHERE attempts > 0),
                extract(epoch FROM now() - min(created_at))::float8
         FROM {}",
        outbox.table()
    );
    let (rows, failing, oldest): (i64, i64, Option<f64>) =
        sqlx::query_as(&statement).fetch_one(executor).await?;
    Ok(Depth {
        rows: u64::try_from(rows).unwrap_or(0),
        failing: u64::try_from(failing).unwrap_or(0),
        oldest: oldest.map(|seconds| Duration::try_from_secs_f64(seconds).unwrap_or_default()),
    })
}
