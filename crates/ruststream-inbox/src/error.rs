//! What can go wrong with an inbox.

/// An inbox could not be opened or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The table name is not one PostgreSQL identifier, or a schema and one.
    #[error("bad inbox table name {0:?}: letters, digits and `_`, optionally `schema.table`")]
    BadTable(String),
    /// The database refused or could not be reached.
    #[error("inbox: {0}")]
    Database(#[from] sqlx::Error),
    /// [`Tx`](crate::Tx) was used where no inbox holds a transaction: the mount has no
    /// [`Inbox`](crate::Inbox) layer, or the handler has returned.
    #[error("no inbox transaction here: add the Inbox layer to this mount (Mount::layer)")]
    NoTransaction,
}
