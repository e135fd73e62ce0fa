//! `Tx`: the handler's database transaction, which the inbox commits.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use ruststream::{
    Context, Delivery,
    extract::{ExtractError, FromDelivery},
};
use sqlx::{PgConnection, Postgres, Transaction};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::InboxError;

/// Where the inbox puts a delivery's transaction for its handler's [`Tx`].
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) tx: Mutex<Option<Transaction<'static, Postgres>>>,
}

/// Which delivery a slot was made for: the addresses of the delivery and of its payload,
/// and the payload's length, while the call that made the handler's arguments runs.
type Made = (usize, usize, usize);

fn made_for(delivery: &Delivery) -> Made {
    let payload = delivery.payload();
    (
        std::ptr::from_ref(delivery) as usize,
        payload.as_ptr() as usize,
        payload.len(),
    )
}

thread_local! {
    /// The slot of the `Tx` made last on this thread, and for which delivery. A handler's
    /// arguments are made and its layers wrap its future in one synchronous call, so the
    /// inbox layer takes here the slot of the handler it wraps; a slot left by a handler
    /// on a mount without the inbox is for another delivery, and is not taken.
    static MADE: RefCell<Option<(Made, Arc<Slot>)>> = const { RefCell::new(None) };
}

/// The slot of the handler of `delivery` being wrapped, if it takes a [`Tx`].
pub(crate) fn take_made(delivery: &Delivery) -> Option<Arc<Slot>> {
    let made = MADE.with(|made| made.borrow_mut().take())?;
    (made.0 == made_for(delivery)).then_some(made.1)
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
    fn from_delivery(cx: &Context<'_>) -> Result<Self, ExtractError> {
        let slot = Arc::new(Slot::default());
        let made = made_for(cx.delivery());
        MADE.with(|cell| *cell.borrow_mut() = Some((made, slot.clone())));
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
