//! `Inbox`: the layer that records handled messages and commits the handler's writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ruststream::layer::{Layer, Middleware, Subscribed};
use ruststream_core::{Delivery, MESSAGE_ID};
use sqlx::PgPool;

use crate::InboxError;
use crate::handle::InboxMiddleware;
use crate::table::{DEFAULT, Table};

/// How long a row is kept by default: a copy delivered again later than this runs again.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a service sweeps rows past their retention, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What makes a delivery's key in the inbox (`None`: it cannot be recognised again).
pub type KeyFn = dyn Fn(&Delivery) -> Option<String> + Send + Sync;

/// An inbox on PostgreSQL: add it to a mount as a layer ([`Mount::layer`]) and each
/// message is handled once per subscription, however often it is delivered.
///
/// Before the handler runs, the layer opens a transaction and records the message's id
/// (its `message-id` header, or what [`key`](Inbox::key) makes) for the mount's address.
/// Already there: the delivery is acknowledged without running the handler (counted in
/// [`duplicates`](Inbox::duplicates) and logged). New: the handler runs, and can write
/// in the same transaction through a [`Tx`](crate::Tx) argument; on `ack()` the
/// transaction commits (the record and the handler's writes together), and only then is
/// the delivery settled; on any other outcome, a panic or a timeout it rolls back, so a
/// retry finds nothing done. A crash between the commit and the settlement brings the
/// message back, and the inbox acknowledges it.
///
/// A message without an id is handled every time it comes (a warning once per mount).
/// Rows older than the retention (7 days by default) are swept by the service.
///
/// [`Mount::layer`]: ruststream::Mount::layer
///
/// ```no_run
/// use ruststream::{App, Mount, Outcome, ack};
/// use ruststream::memory::MemoryBroker;
/// use ruststream_inbox::{Inbox, Tx};
///
/// async fn handle(tx: Tx, order: u64) -> Result<Outcome, Box<dyn std::error::Error>> {
///     sqlx::query("INSERT INTO shipped (order_id) VALUES ($1)")
///         .bind(order as i64)
///         .execute(&mut *tx.conn().await?)
///         .await?;
///     Ok(ack())
/// }
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::PgPool::connect("postgres://postgres@127.0.0.1/test").await?;
/// let inbox = Inbox::new(pool).await?;
/// App::new(MemoryBroker::new())
///     .mount(Mount::new("orders").layer(inbox), handle)
///     .run()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Inbox {
    pub(crate) pool: PgPool,
    pub(crate) table: Arc<Table>,
    pub(crate) key: Arc<KeyFn>,
    pub(crate) retention: Duration,
    pub(crate) shared: Arc<Shared>,
}

/// What every clone of an inbox shares: its count and its sweeps.
pub(crate) struct Shared {
    pub(crate) duplicates: AtomicU64,
    /// When the inbox was made, and the last sweep (milliseconds after it, 0: none).
    started: Instant,
    swept_at: AtomicU64,
    sweeping: AtomicBool,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("table", &self.table.name)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox in the table `ruststream_inbox`, made if missing.
    pub async fn new(pool: PgPool) -> Result<Self, InboxError> {
        Self::with_table(pool, DEFAULT).await
    }

    /// An inbox in `table` (`name` or `schema.name`), made if missing.
    pub async fn with_table(pool: PgPool, table: &str) -> Result<Self, InboxError> {
        let table = Table::new(table)?;
        table.migrate(&pool).await?;
        Ok(Self {
            pool,
            table: Arc::new(table),
            key: Arc::new(|d: &Delivery| d.headers().get_str(MESSAGE_ID).map(str::to_owned)),
            retention: DEFAULT_RETENTION,
            shared: Arc::new(Shared {
                duplicates: AtomicU64::new(0),
                started: Instant::now(),
                swept_at: AtomicU64::new(0),
                sweeping: AtomicBool::new(false),
            }),
        })
    }

    /// How long a handled message is remembered (7 days by default): a copy that comes
    /// later than this runs the handler again.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// What recognises a message again (by default its `message-id` header): for
    /// producers that set no id, a key from the payload or another header.
    pub fn key(
        mut self,
        key: impl Fn(&Delivery) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.key = Arc::new(key);
        self
    }

    /// Deliveries acknowledged without running the handler, since the inbox was made
    /// (over all its clones).
    pub fn duplicates(&self) -> u64 {
        self.shared.duplicates.load(Ordering::Relaxed)
    }

    /// Deletes the rows past the retention now; returns how many.
    pub async fn sweep(&self) -> Result<u64, InboxError> {
        self.table.sweep(&self.pool, self.retention).await
    }

    /// Sweeps in the background if the last sweep is a minute old (one at a time).
    pub(crate) fn sweep_if_due(&self) {
        let shared = &self.shared;
        let now = shared.started.elapsed().as_millis() as u64;
        let last = shared.swept_at.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < SWEEP_EVERY.as_millis() as u64 {
            return;
        }
        if shared.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        shared.swept_at.store(now.max(1), Ordering::Relaxed);
        let inbox = self.clone();
        tokio::spawn(async move {
            match inbox.sweep().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(table = %inbox.table.name, deleted = n, "inbox: swept"),
                Err(e) => {
                    tracing::warn!(table = %inbox.table.name, error = %e, "inbox: sweep failed")
                }
            }
            inbox.shared.sweeping.store(false, Ordering::Release);
        });
    }
}

impl Layer for Inbox {
    fn layer(&self, subscribed: &Subscribed) -> Arc<dyn Middleware> {
        Arc::new(InboxMiddleware::new(
            self.clone(),
            subscribed.address().as_str(),
        ))
    }
}
