//! Why an outbox statement failed.

/// An outbox write, query or migration that did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The value did not encode as JSON; nothing was written.
    #[error("cannot encode the message: {0}")]
    Encode(String),
    /// The destination is empty.
    #[error("bad destination: an empty address")]
    BadDestination,
    /// The key is empty (give no key for a message without one).
    #[error("bad key: an empty key")]
    BadKey,
    /// The schema name is not one the adapter takes.
    #[error("bad schema {name:?}: {rule}")]
    BadSchema {
        /// The name given.
        name: String,
        /// What a schema name must be.
        rule: &'static str,
    },
    /// The outbox table could not be created or migrated.
    #[error("migration failed: {0}")]
    Migration(String),
    /// PostgreSQL refused or did not answer the statement.
    #[error("outbox statement failed: {0}")]
    Database(#[from] sqlx::Error),
}
