//! Why a connection could not be opened.

use ruststream_core::SubscribeError;

/// A [`PostgresBroker`](crate::PostgresBroker) that did not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL could not be read.
    #[error("bad url: {0}")]
    BadUrl(String),
    /// A setting in the URL's query is unknown or has a bad value.
    #[error(transparent)]
    Setting(#[from] SubscribeError),
    /// PostgreSQL did not answer or refused the connection.
    #[error("cannot reach postgresql at {url}: {reason}")]
    Unreachable {
        /// The URL, its password hidden.
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// The adapter's tables could not be created or migrated.
    #[error("migration failed: {0}")]
    Migration(String),
    /// The server takes no writes: a standby (a read-only replica), or
    /// `default_transaction_read_only` on. The adapter writes its queues, so it needs the
    /// primary.
    #[error("postgresql at {url} is read-only ({why}): connect to the primary")]
    ReadOnly {
        /// The URL, its password hidden.
        url: String,
        /// What says so: `a standby (pg_is_in_recovery)` or
        /// `default_transaction_read_only`.
        why: &'static str,
    },
    /// An adapter's table is not what its migrations made (altered by hand): a column
    /// is missing or of another type.
    #[error("table {table} was altered: {what}")]
    Altered {
        /// The table, `schema.name`.
        table: String,
        /// What differs.
        what: String,
    },
}
