//! One round of a relay: claim a batch in a transaction, publish it, delete what was
//! published, note what failed, commit.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::join_all;
use ruststream_adapter::Backoff;
use ruststream_core::{Address, Publish};
use sqlx::{PgConnection, Postgres, Transaction};

use super::OutboxError;
use super::relay::Settings;
use crate::row;
use crate::schema::Names;

/// What a round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Done {
    /// Rows claimed.
    pub(super) claimed: usize,
    /// Rows published and deleted.
    pub(super) published: usize,
    /// The soonest a row that failed in this round may be tried again.
    pub(super) retry_in: Option<Duration>,
}

/// A claimed row's columns, as the claim selects them.
type Columns = (
    i64,
    Option<String>,
    String,
    Vec<u8>,
    Vec<String>,
    Vec<Vec<u8>>,
    i32,
);

/// A claimed row.
struct Claimed {
    id: i64,
    key: Option<String>,
    destination: String,
    payload: Vec<u8>,
    header_names: Vec<String>,
    header_values: Vec<Vec<u8>>,
    attempts: i32,
}

impl From<Columns> for Claimed {
    fn from(columns: Columns) -> Self {
        let (id, key, destination, payload, header_names, header_values, attempts) = columns;
        Self {
            id,
            key,
            destination,
            payload,
            header_names,
            header_values,
            attempts,
        }
    }
}

/// A row whose publish failed.
struct Failed {
    id: i64,
    error: String,
    retry_in: Duration,
}

const COLUMNS: &str = "id, key, destination, payload, header_names, header_values, attempts";

/// Claims, publishes and settles one batch; a crash before the commit leaves every row of
/// the batch in the outbox.
pub(super) async fn run(
    tx: &mut Transaction<'_, Postgres>,
    names: &Names,
    settings: &Settings,
    publisher: &dyn Publish,
) -> Result<Done, OutboxError> {
    let rows = claim(tx, names, settings.batch).await?;
    let claimed = rows.len();
    if claimed == 0 {
        return Ok(Done::default());
    }
    let chains = join_all(
        chains(rows)
            .into_iter()
            .map(|chain| publish(chain, publisher, settings)),
    )
    .await;
    let mut published = Vec::new();
    let mut failed = Vec::new();
    for (done, failure) in chains {
        published.extend(done);
        failed.extend(failure);
    }
    sqlx::query(&format!("DELETE FROM {} WHERE id = ANY($1)", names.outbox))
        .bind(&published)
        .execute(&mut **tx)
        .await?;
    for failure in &failed {
        tracing::warn!(
            id = failure.id,
            error = %failure.error,
            retry_in = ?failure.retry_in,
            "postgres outbox: publish failed; the row is kept"
        );
        sqlx::query(&format!(
            "UPDATE {} SET attempts = attempts + 1, last_error = $2,
                retry_at = now() + $3 * interval '1 microsecond'
             WHERE id = $1",
            names.outbox
        ))
        .bind(failure.id)
        .bind(&failure.error)
        .bind(i64::try_from(failure.retry_in.as_micros()).unwrap_or(i64::MAX))
        .execute(&mut **tx)
        .await?;
    }
    Ok(Done {
        claimed,
        published: published.len(),
        retry_in: failed.iter().map(|f| f.retry_in).min(),
    })
}

/// The first rows of their keys (and rows without a key) that are due, oldest first,
/// skipping those another relay holds; then the rows after them of the same keys, which
/// no other relay can claim while the first is held.
async fn claim(
    tx: &mut PgConnection,
    names: &Names,
    batch: usize,
) -> Result<Vec<Claimed>, OutboxError> {
    let limit = i64::try_from(batch).unwrap_or(i64::MAX);
    let table = &names.outbox;
    let heads: Vec<Columns> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM {table} o
         WHERE o.retry_at <= now()
           AND (o.key IS NULL OR NOT EXISTS (
                SELECT 1 FROM {table} e WHERE e.key = o.key AND e.id < o.id))
         ORDER BY o.id LIMIT $1
         FOR UPDATE SKIP LOCKED"
    ))
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    let mut rows: Vec<Claimed> = heads.into_iter().map(Claimed::from).collect();
    let (keys, firsts): (Vec<&str>, Vec<i64>) = rows
        .iter()
        .filter_map(|r| r.key.as_deref().map(|key| (key, r.id)))
        .unzip();
    let room = batch.saturating_sub(rows.len());
    if keys.is_empty() || room == 0 {
        return Ok(rows);
    }
    let followers: Vec<Columns> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM {table} o
         JOIN unnest($1::text[], $2::bigint[]) AS first (first_key, first_id)
           ON key = first_key AND id > first_id
         ORDER BY id LIMIT $3
         FOR UPDATE OF o"
    ))
    .bind(keys)
    .bind(firsts)
    .bind(i64::try_from(room).unwrap_or(i64::MAX))
    .fetch_all(&mut *tx)
    .await?;
    rows.extend(followers.into_iter().map(Claimed::from));
    Ok(rows)
}

/// The rows as chains published one after the other: a key's rows in id order, each row
/// without a key alone.
fn chains(rows: Vec<Claimed>) -> Vec<Vec<Claimed>> {
    let mut chains: Vec<Vec<Claimed>> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let mut rows = rows;
    rows.sort_by_key(|r| r.id);
    for row in rows {
        match row.key.clone() {
            None => chains.push(vec![row]),
            Some(key) => match by_key.get(&key) {
                Some(&at) => chains[at].push(row),
                None => {
                    by_key.insert(key, chains.len());
                    chains.push(vec![row]);
                }
            },
        }
    }
    chains
}

/// Publishes a chain in order until a row fails: the ids published, and the failure
/// (the rows after it are left as they are).
async fn publish(
    chain: Vec<Claimed>,
    publisher: &dyn Publish,
    settings: &Settings,
) -> (Vec<i64>, Option<Failed>) {
    let mut published = Vec::with_capacity(chain.len());
    for claimed in chain {
        let (message, defect) =
            row::message(claimed.payload, claimed.header_names, claimed.header_values);
        if let Some(defect) = defect {
            tracing::warn!(id = claimed.id, %defect, "postgres outbox: a row's headers do not pair up");
        }
        let to = Address::new(&claimed.destination);
        let sent = tokio::time::timeout(settings.publish_timeout, publisher.publish(to, message));
        let error = match sent.await {
            Ok(Ok(())) => {
                published.push(claimed.id);
                continue;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!(
                "publish to {} timed out after {:?}",
                claimed.destination, settings.publish_timeout
            ),
        };
        let attempt = u32::try_from(claimed.attempts)
            .unwrap_or(0)
            .saturating_add(1);
        let failed = Failed {
            id: claimed.id,
            error: for_text(&error),
            retry_in: retry_delay(settings, attempt),
        };
        return (published, Some(failed));
    }
    (published, None)
}

/// The longest wait a failed row gets, whatever the settings (a timestamp stays in range).
const LONGEST_RETRY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The jittered delay before a row's next try after its `attempt`-th failure.
fn retry_delay(settings: &Settings, attempt: u32) -> Duration {
    let mut backoff = Backoff::new(settings.retry_min, settings.retry_max);
    let mut delay = backoff.next_delay();
    for _ in 1..attempt.min(32) {
        delay = backoff.next_delay();
    }
    delay.min(LONGEST_RETRY)
}

/// A broker's error as `last_error` can keep it: no NUL (which `text` refuses, failing
/// the round), at most 1,000 characters.
fn for_text(error: &str) -> String {
    error.replace('\0', "?").chars().take(1_000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_delays_fit_their_columns() {
        assert_eq!(for_text("bad\0byte"), "bad?byte");
        assert_eq!(for_text(&"x".repeat(5_000)).len(), 1_000);
        let settings = Settings {
            batch: 1,
            poll: Duration::from_secs(1),
            retry_min: Duration::MAX,
            retry_max: Duration::MAX,
            publish_timeout: Duration::from_secs(1),
        };
        assert_eq!(retry_delay(&settings, u32::MAX), LONGEST_RETRY);
    }
}
