//! A copy and its original's removal in one statement: a retry copy or a dead letter
//! replaces the row it was made from exactly once, and a replay its dead letter, whatever
//! moment a crash comes at.

use ruststream_core::{Address, Message};

use crate::inner::Inner;
use crate::row;

/// The row a copy replaces.
pub(crate) enum Original<'a> {
    /// A row a consumer claimed at this attempt (a dead letter, a copy to `retry_to`).
    Claimed { attempts: i32 },
    /// A row waiting in this queue, not claimed (a replay).
    Waiting { queue: &'a Address },
}

/// Deletes row `id`, if it is still the `original` meant, and inserts `copy` into queue
/// `to` (telling its consumers), in one statement: both or neither. `false` where the row
/// was claimed (again) or removed since: nothing is inserted then.
pub(crate) async fn replace(
    inner: &Inner,
    id: i64,
    original: Original<'_>,
    to: &Address,
    copy: &Message,
) -> Result<bool, sqlx::Error> {
    let which = match original {
        Original::Claimed { .. } => "attempts = $2",
        Original::Waiting { .. } => "queue = $2 AND NOT leased",
    };
    let statement = format!(
        "WITH gone AS (
            DELETE FROM {table} WHERE id = $1 AND {which} RETURNING id),
         put AS (
            INSERT INTO {table} (queue, payload, header_names, header_values)
            SELECT $3, $4, $5, $6 FROM gone RETURNING queue)
         SELECT pg_notify($7, queue) FROM put",
        table = inner.names.messages
    );
    let query = sqlx::query(&statement).bind(id);
    let query = match original {
        Original::Claimed { attempts } => query.bind(attempts),
        Original::Waiting { queue } => query.bind(queue.as_str()),
    };
    let (names, values) = row::columns(copy);
    let rows = query
        .bind(to.as_str())
        .bind(copy.payload.as_ref())
        .bind(names)
        .bind(values)
        .bind(&inner.names.channel)
        .fetch_all(&inner.pool)
        .await?;
    Ok(!rows.is_empty())
}
