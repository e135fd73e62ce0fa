//! An inbox on PostgreSQL: each message is handled once per subscription, however often
//! it is delivered, and a handler's database writes commit with that record.
//!
//! Brokers deliver at least once: a crash, a lost acknowledgement or a rebalance
//! delivers a message again, and a handler with side effects runs them twice. An
//! [`Inbox`] added to a mount as a layer records each message's id in a table, in a
//! transaction that the handler writes in too (its [`Tx`] argument); the transaction
//! commits when the handler returns `ack()`, and only then is the delivery settled. A
//! message whose id is recorded is acknowledged without running the handler. It works
//! with every broker; the inbox's database need not be the broker.
//!
//! ```no_run
//! use ruststream::{App, Mount, Outcome, ack};
//! use ruststream::memory::MemoryBroker;
//! use ruststream_inbox::{Inbox, Tx};
//!
//! async fn ship(tx: Tx, order: u64) -> Result<Outcome, Box<dyn std::error::Error>> {
//!     sqlx::query("UPDATE orders SET shipped = true WHERE id = $1")
//!         .bind(order as i64)
//!         .execute(&mut *tx.conn().await?)
//!         .await?;
//!     Ok(ack())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::PgPool::connect("postgres://postgres@127.0.0.1/test").await?;
//! let inbox = Inbox::new(pool).await?;
//! App::new(MemoryBroker::new())
//!     .mount(Mount::new("orders").layer(inbox), ship)
//!     .run()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The guide: `docs/inbox.md` in the repository.

mod error;
mod handle;
mod inbox;
mod table;
mod tx;

pub use error::InboxError;
pub use inbox::{DEFAULT_RETENTION, Inbox, KeyFn};
pub use tx::{Tx, TxConn};

/// The `sqlx` this crate is built with, for the pool and the queries.
pub use sqlx;
