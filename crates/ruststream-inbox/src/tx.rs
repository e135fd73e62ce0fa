//! `Tx`: the handler's database transaction, which the inbox commits.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use ruststream::{Context, ExtractError, FromDelivery};
use sqlx::{PgConnection, Postgres, Transaction};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::InboxError;

/// Where the inbox puts a delivery's transaction for its handler's [`Tx`].
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) tx: Mutex<Option<Transaction<'static, Postgres>>>,
}

thread_local! {
    /// The slot of the `Tx` made last on this thread. A handler's arguments are made and
    /// its layers wrap its future in one synchronous call, so the inbox layer takes here
    /// the slot of the handler it wraps.
    static MADE: RefCell<Option<Arc<Slot>>> = const { RefCell::new(None) };
}

/// The slot of the handler being wrapped, if it takes a [`Tx`].
pub(crate) fn take_made() -> Option<Arc<Slot>> {
    MADE.with(|made| made.borrow_mut().take())
}

/// The handler's database transaction, opened by the mount's [`Inbox`](crate::Inbox)
/// layer: the handler's writes and the record that its message was handled commit
/// together once it returns `ack()`, and roll back otherwise.
///
/// ```no_run
/// use ruststream::{Outcome, ack};
/// use ruststream_inbox::Tx;
///
/// async fn handle(tx: Tx, order: u64) -> Result<Outcome, Box<dyn std::error::Error>> {
///     let mut conn = tx.conn().await?;
///     sqlx::query("INSERT INTO shipped (order_id) VALUES ($1)")
///         .bind(order as i64)
///         .execute(&mut *conn)
///         .await?;
///     Ok(ack())
/// }
/// ```
pub struct Tx {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for Tx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx").finish_non_exhaustive()
    }
}

impl FromDelivery for Tx {
    fn from_delivery(_: &Context<'_>) -> Result<Self, ExtractError> {
        let slot = Arc::new(Slot::default());
        MADE.with(|made| *made.borrow_mut() = Some(slot.clone()));
        Ok(Self { slot })
    }
}

impl Tx {
    /// The transaction's connection, for queries (`&mut *conn` is an executor); held
    /// until the guard is dropped. [`InboxError::NoTransaction`] on a mount without
    /// the [`Inbox`](crate::Inbox) layer.
    pub async fn conn(&self) -> Result<TxConn<'_>, InboxError> {
        let guard = self.slot.tx.lock().await;
        MutexGuard::try_map(guard, |tx| tx.as_deref_mut())
            .map(|conn| TxConn { conn })
            .map_err(|_| InboxError::NoTransaction)
    }
}

/// The connection of a [`Tx`], borrowed.
pub struct TxConn<'a> {
    conn: MappedMutexGuard<'a, PgConnection>,
}

impl std::fmt::Debug for TxConn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxConn").finish_non_exhaustive()
    }
}

impl Deref for TxConn<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl DerefMut for TxConn<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}
