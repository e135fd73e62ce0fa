//! The inbox table: its name, its migration and its retention sweep.

use std::time::Duration;

use sqlx::PgPool;

use crate::InboxError;

/// The default table: `ruststream_inbox` in the connection's search path.
pub(crate) const DEFAULT: &str = "ruststream_inbox";

/// Rows a retention sweep deletes in one statement at most.
const SWEEP_BATCH: i64 = 10_000;

/// A checked table name, quoted for SQL, with the statements that use it.
#[derive(Debug)]
pub(crate) struct Table {
    /// As given (for messages).
    pub(crate) name: String,
    claim: String,
    sweep: String,
    create: String,
    index: String,
}

impl Table {
    /// `name` or `schema.name`, each a plain identifier (no quoting needed or allowed).
    pub(crate) fn new(name: &str) -> Result<Self, InboxError> {
        let parts: Vec<&str> = name.split('.').collect();
        let plain = |part: &str| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                && part.len() <= 63
        };
        if parts.is_empty() || parts.len() > 2 || !parts.iter().all(|p| plain(p)) {
            return Err(InboxError::BadTable(name.to_owned()));
        }
        let quoted = parts
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".");
        let last = parts[parts.len() - 1];
        Ok(Self {
            name: name.to_owned(),
            claim: format!(
                "INSERT INTO {quoted} (subscription, message_id) VALUES ($1, $2) \
                 ON CONFLICT DO NOTHING"
            ),
            sweep: format!(
                "DELETE FROM {quoted} WHERE ctid IN (SELECT ctid FROM {quoted} \
                 WHERE handled_at < now() - make_interval(secs => $1) LIMIT $2)"
            ),
            create: format!(
                "CREATE TABLE IF NOT EXISTS {quoted} (\
                 subscription text NOT NULL, \
                 message_id text NOT NULL, \
                 handled_at timestamptz NOT NULL DEFAULT now(), \
                 PRIMARY KEY (subscription, message_id))"
            ),
            index: format!(
                "CREATE INDEX IF NOT EXISTS \"{}\" ON {quoted} (handled_at)",
                index_name(last)
            ),
        })
    }

    /// Creates the table and its index if missing; several processes may do it at once
    /// (an advisory lock orders them).
    pub(crate) async fn migrate(&self, pool: &PgPool) -> Result<(), InboxError> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("ruststream-inbox:{}", self.name))
            .execute(&mut *tx)
            .await?;
        sqlx::query(&self.create).execute(&mut *tx).await?;
        sqlx::query(&self.index).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records `id` as handled for `subscription` in `tx`; `false` if it is already
    /// (a transaction that recorded it and is still open makes this wait for its end).
    pub(crate) async fn claim(
        &self,
        tx: &mut sqlx::PgConnection,
        subscription: &str,
        id: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(&self.claim)
            .bind(subscription)
            .bind(id)
            .execute(tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes rows older than `retention`, a batch at a time; returns how many.
    pub(crate) async fn sweep(
        &self,
        pool: &PgPool,
        retention: Duration,
    ) -> Result<u64, InboxError> {
        let mut deleted = 0;
        loop {
            let done = sqlx::query(&self.sweep)
                .bind(retention.as_secs_f64())
                .bind(SWEEP_BATCH)
                .execute(pool)
                .await?;
            deleted += done.rows_affected();
            if done.rows_affected() < SWEEP_BATCH as u64 {
                return Ok(deleted);
            }
        }
    }
}

/// The index's name: the table's, with a suffix, within PostgreSQL's 63 bytes.
fn index_name(table: &str) -> String {
    const SUFFIX: &str = "_handled_at";
    let keep = table.len().min(63 - SUFFIX.len());
    format!("{}{SUFFIX}", &table[..keep])
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn only_plain_identifiers_are_taken() {
        for good in ["ruststream_inbox", "app.inbox", "_x1", &"a".repeat(63)] {
            assert!(Table::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a.b.c",
            "1abc",
            "inbox; DROP TABLE x",
            "in\"box",
            "a.",
            ".a",
            "é",
            &"a".repeat(64),
        ] {
            assert!(Table::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_schema_is_quoted_apart_and_the_index_is_unqualified() {
        let table = Table::new("app.inbox").expect("good");
        assert!(
            table.create.contains("\"app\".\"inbox\""),
            "{}",
            table.create
        );
        assert!(
            table
                .index
                .contains("\"inbox_handled_at\" ON \"app\".\"inbox\""),
            "{}",
            table.index
        );
        let long = Table::new(&"a".repeat(63)).expect("good");
        assert!(
            long.index
                .contains(&format!("\"{}_handled_at\"", "a".repeat(52)))
        );
    }
}
