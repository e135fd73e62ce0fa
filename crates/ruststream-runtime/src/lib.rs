//! The runtime of ruststream: typed async handlers on broker subscriptions.
//!
//! Services depend on the `ruststream` crate, which re-exports this one with the
//! adapters its features enable, `connect` by URL and the command line; this crate
//! knows no adapter.
//!
//! A service mounts plain `async fn`s on subscriptions. Each handler's [`Outcome`]
//! ([`ack`], [`retry`], [`retry_after`], [`drop`]) settles its delivery; the runtime
//! turns it into what the broker understands, with attempt caps, dead letters,
//! failure policies for undecodable payloads and panics, and hooks after settlement.
//! The decision is one pure function, [`ruststream_core::decide`]; adapters carry it out.
//!
//! The root holds what a service writes every day; the plumbing is in modules:
//! [`handler`] (the `Handler` trait), [`extract`] (writing extractors), [`publisher`]
//! (errors, messages being built, publish targets), [`settled`] (causes, settlement
//! errors), [`mount`] (environment settings, the delayed-copy limit), [`codec`] and
//! [`core`] (the adapter contract, `Verdict`).
//!
//! ```no_run
//! use ruststream::{App, Attempt, Mount, Outcome, Router, ack, retry};
//! use ruststream::memory::MemoryBroker;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Order { id: u64 }
//!
//! async fn handle(Attempt(attempt): Attempt, order: Order) -> Outcome {
//!     if order.id % 2 == 0 || attempt > 1 { ack() } else { retry() }
//! }
//!
//! # async fn run() -> Result<(), ruststream::RunError> {
//! let router = Router::new()
//!     .mount(Mount::new("orders").max_attempts(3).dead_letter("orders.dead"), handle);
//! App::new(MemoryBroker::new()).router(router).run().await
//! # }
//! ```
//!
//! Guides: `docs/` in the repository (handlers, settlement, the memory broker and test
//! kit, writing an adapter).

#[doc(hidden)]
#[path = "debug_handler.rs"]
pub mod __private;
mod app;
#[cfg(feature = "asyncapi")]
pub mod asyncapi;
mod behind;
pub mod codec;
mod concurrency;
mod dead_letter;
mod deferred;
mod dispatch;
mod execute;
pub mod extract;
pub mod handler;
mod inbox;
pub mod layer;
#[cfg(feature = "memory")]
pub mod memory;
pub mod mount;
mod mount_settings;
pub mod observe;
mod outcome;
mod plan_log;
mod policy;
pub mod publisher;
mod refused;
mod reply;
mod report;
mod router;
mod runtime;
#[cfg(feature = "asyncapi")]
mod schema;
pub mod settled;
mod shutdown;
mod signals;
mod target;
#[cfg(feature = "memory")]
pub mod testing;

// The root holds what a service writes every day; the plumbing is in the modules
// (`handler`, `extract`, `publisher`, `settled`, `mount`, `codec`, `core`).
pub use app::{App, RunError, Running};
pub use extract::{Attempt, Context, Raw, State};
pub use mount::{Concurrency, Mount};
pub use outcome::{IntoOutcome, Outcome, ack, drop, retry, retry_after};
pub use policy::Policy;
pub use publisher::Publisher;
pub use reply::Reply;
pub use router::Router;
pub use ruststream_macros::debug_handler;
pub use settled::Settled;

pub use ruststream_core as core;
pub use ruststream_core::{Address, Delivery, Headers, Message};
