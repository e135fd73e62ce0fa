//! The transactional outbox: messages written into a table inside the caller's own
//! transaction, and a [`Relay`] that publishes them to any broker afterwards.
//!
//! [`Outbox::publish`] inserts a row into `<schema>.ruststream_outbox` on the executor it
//! is given (the caller's transaction), so the message commits or rolls back with the
//! caller's own writes. A [`Relay`] claims committed rows (`FOR UPDATE SKIP LOCKED`),
//! publishes each through a [`Publish`](ruststream_core::Publish), and deletes the
//! published rows in the claim's transaction: a relay killed before its commit leaves
//! the rows for the next claim, so they are published again (a duplicate, never a loss).
//!
//! The relay is a plain future ([`Relay::run`]) or a task ([`Relay::spawn`]) beside the
//! service: the runtime has no hook that runs a task and waits for it at the stop (its
//! `on_start` and `on_stop` are synchronous), so stop the relay before the service's
//! broker closes. Its depth and age are [`Outbox::depth`].
//!
//! ```no_run
//! use ruststream::App;
//! use ruststream::memory::MemoryBroker; // or Redis, RabbitMQ, NATS, PostgreSQL…
//! use ruststream_core::Broker;
//! use ruststream_postgres::Outbox;
//! use ruststream_postgres::sqlx::PgPool;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = PgPool::connect("postgres://postgres@127.0.0.1:5432/test").await?;
//! let outbox = Outbox::migrate(&pool, "ruststream").await?;
//!
//! // The service's own write and its message commit (or roll back) together.
//! let mut tx = pool.begin().await?;
//! sqlx::query("UPDATE orders SET state = 'paid' WHERE id = $1")
//!     .bind(7)
//!     .execute(&mut *tx)
//!     .await?;
//! outbox
//!     .message("orders.paid", &serde_json::json!({ "id": 7 }))
//!     .key("order-7") // published after order 7's earlier messages
//!     .insert(&mut *tx)
//!     .await?;
//! tx.commit().await?;
//!
//! // Beside the service, a relay publishes to the service's broker until stopped.
//! let app = App::new(MemoryBroker::new());
//! let relay = outbox.relay(pool.clone()).spawn(app.broker().publisher());
//! let running = app.start().await?;
//! running.stopping().await; // a stop asked for (see `Running::stopping`)
//! relay.stop().await; // finishes the batch in hand
//! running.stop().await?;
//!
//! let depth = outbox.depth(&pool).await?; // export as gauges
//! println!("{} waiting, the oldest for {:?}", depth.rows, depth.oldest);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use ruststream_core::{Address, Message};
use serde::Serialize;
use sqlx::{Executor, PgPool, Postgres};

use crate::schema::{self, Names};
use crate::settings;

mod depth;
mod entry;
mod error;
mod listen;
mod relay;
mod round;

pub use depth::Depth;
pub use entry::Entry;
pub use error::OutboxError;
pub use relay::{Relay, RelayHandle};

/// The outbox table of one schema: where [`publish`](Self::publish) writes and a
/// [`Relay`] reads. Cheap to clone.
///
/// Per-key order: messages written with a [`key`](Entry::key) are published in the order
/// they were written, one after the other; a message whose publish fails holds back the
/// later messages of its key only. Writers of the same key wait for each other's commit
/// (a transaction-level advisory lock), so the order is the commit order.
#[derive(Clone, Debug)]
pub struct Outbox {
    names: Arc<Names>,
}

impl Outbox {
    /// The outbox of `schema`, whose tables (the queues' and the outbox's) are created or
    /// migrated first, as [`PostgresBroker::connect`](crate::PostgresBroker::connect)
    /// does; for a service whose broker is not PostgreSQL.
    pub async fn migrate(pool: &PgPool, schema: &str) -> Result<Self, OutboxError> {
        if !settings::schema_fits(schema) {
            return Err(OutboxError::BadSchema {
                name: schema.to_owned(),
                rule: settings::SCHEMA_RULE,
            });
        }
        let names = Names::new(schema);
        schema::migrate(pool, &names)
            .await
            .map_err(|error| OutboxError::Migration(error.to_string()))?;
        Ok(Self::from_names(names))
    }

    /// The outbox of tables already migrated.
    pub(crate) fn from_names(names: Names) -> Self {
        Self {
            names: Arc::new(names),
        }
    }

    /// The schema of the outbox table.
    pub fn schema(&self) -> &str {
        &self.names.schema
    }

    /// The outbox table, `<schema>.ruststream_outbox`.
    pub fn table(&self) -> &str {
        &self.names.outbox
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// Writes `value`, encoded as JSON like the runtime's publisher does (with
    /// `content-type: application/json`), as a message to `to`, on `executor` (the
    /// caller's transaction: `&mut *tx`); returns the row's id.
    pub async fn publish<'e, E, T>(
        &self,
        executor: E,
        to: impl Into<Address>,
        value: &T,
    ) -> Result<i64, OutboxError>
    where
        E: Executor<'e, Database = Postgres>,
        T: Serialize + ?Sized,
    {
        self.message(to, value).insert(executor).await
    }

    /// Writes an encoded message as it is, on `executor`; returns the row's id.
    pub async fn publish_message<'e, E>(
        &self,
        executor: E,
        to: impl Into<Address>,
        message: Message,
    ) -> Result<i64, OutboxError>
    where
        E: Executor<'e, Database = Postgres>,
    {
        self.raw(to, message).insert(executor).await
    }

    /// Starts a message of `value` (JSON) to `to`, to give a key or headers before
    /// [`insert`](Entry::insert).
    pub fn message<T: Serialize + ?Sized>(&self, to: impl Into<Address>, value: &T) -> Entry<'_> {
        Entry::json(self, to.into(), value)
    }

    /// Starts an encoded message to `to`, to give a key or headers before
    /// [`insert`](Entry::insert).
    pub fn raw(&self, to: impl Into<Address>, message: Message) -> Entry<'_> {
        Entry::new(self, to.into(), Ok(message))
    }

    /// A relay of this outbox on `pool`, with the default settings.
    pub fn relay(&self, pool: PgPool) -> Relay {
        Relay::new(self.clone(), pool)
    }

    /// How many messages wait and for how long the oldest has (the metrics to watch).
    pub async fn depth<'e, E>(&self, executor: E) -> Result<Depth, OutboxError>
    where
        E: Executor<'e, Database = Postgres>,
    {
        depth::query(self, executor).await
    }
}
