//! PostgreSQL as a ruststream broker, on sqlx.
//!
//! Every queue is rows of one table, `<schema>.ruststream_messages` (schema `ruststream`
//! unless the URL's `schema` says otherwise), which the adapter creates and migrates
//! itself when it connects (versioned in `<schema>.ruststream_migrations`, under an
//! advisory lock, so several processes may start at once).
//!
//! * **Publishing** is one `INSERT` with a `pg_notify` of the queue in the same
//!   statement. A retry copy or a dead letter is a row like any other.
//! * **Consuming** claims visible rows with `FOR UPDATE SKIP LOCKED`, increments each
//!   row's `attempts` and makes it invisible for the lease (`visible_at`); a consumer
//!   waits on `LISTEN` for new rows, sleeps until the next row becomes visible, and polls
//!   slowly (`poll`) as a fallback only. The leases of held rows are extended every
//!   third of the lease while handlers run.
//! * **Settling**: `Accept`, `Reject` and `Remove` delete the row; `Requeue` makes it
//!   visible now; `RequeueAfter(d)` at now + `d` (durable, any length). The attempt is
//!   the row's own count, incremented at the claim, so a crash counts too.
//! * **A consumer that dies** leaves its rows leased; once the lease runs out another
//!   consumer claims them (attempt + 1).
//!
//! * **The outbox** ([`Outbox`]): messages written in the caller's own transaction, and
//!   a [`Relay`] that publishes them to any broker afterwards (a crash duplicates, never
//!   loses; per-key order kept). See [`outbox`].
//!
//! Settings, in the URL's query (all mounts) or a mount's settings: `lease` (30s),
//! `batch` (the mount's in-flight count), `poll` (5s), `archive` (false: settled rows
//! are deleted; true: moved to the archive table); URL only: `schema` (`ruststream`),
//! `max_connections` (10). The client's own keys (`application_name`, `options`, …) stay
//! with the client; any other key is an error. No TLS yet. See `docs/postgres.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ruststream_postgres::ConnectError> {
//! let broker = ruststream_postgres::PostgresBroker::connect(
//!     "postgres://postgres@127.0.0.1:5432/test?lease=1m",
//! )
//! .await?;
//! # let _ = broker;
//! # Ok(())
//! # }
//! ```

mod acker;
mod broker;
mod connector;
mod consumer;
mod deletes;
mod error;
mod inner;
mod inspect;
mod lease;
mod moves;
pub mod outbox;
mod pending;
mod publisher;
mod row;
mod schema;
mod settings;
mod tls;
mod wake;

pub use broker::{AHEAD, CAPABILITIES, PostgresBroker, TRAILING};
pub use connector::PostgresConnector;
pub use error::ConnectError;
pub use outbox::{Outbox, OutboxError, Relay};
pub use schema::VERSION;
pub use settings::{DEFAULT_LEASE, DEFAULT_POLL, DEFAULT_SCHEMA};
/// The sqlx this adapter is built on, for the transactions the [`Outbox`] writes in.
pub use sqlx;

/// The PostgreSQL guide's examples (`docs/postgres.md`), compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/postgres.md")]
pub struct PostgresGuide;
