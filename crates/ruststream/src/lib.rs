//! Typed async handlers on broker subscriptions.
//!
//! A service mounts plain `async fn`s on subscriptions. Each handler's [`Outcome`]
//! ([`ack`], [`retry`], [`retry_after`], [`drop`]) settles its delivery; the runtime
//! turns it into what the broker understands, with attempt caps, dead letters,
//! failure policies for undecodable payloads and panics, and hooks after settlement.
//! The decision is one pure function, [`core::decide`]; adapters carry it out.
//!
//! This crate is the one a service depends on: it re-exports the runtime
//! (`ruststream-runtime`), the adapters its features build in (`ruststream::redis`,
//! `amqp`, `lapin`, `nats`, `postgres`, `kafka`, `mqtt`), [`connect`] to open any of them by URL, the inbox
//! (`ruststream::inbox`, feature `inbox`) and the command line (`ruststream::cli`,
//! feature `cli`). The root holds what a service writes every day; the rest is in
//! modules: [`handler`], [`extract`], [`publisher`], [`settled`], [`mount`], [`codec`],
//! [`broker`] (the connectors, [`broker::server`], [`broker::redact`]) and [`core`] (the
//! adapter contract).
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

pub mod broker;
#[cfg(feature = "cli")]
pub mod cli;
mod connect;

pub use connect::{ConnectError, connect};
pub use ruststream_runtime::*;

/// The Redis adapter (feature `redis`).
#[cfg(feature = "redis")]
pub use ruststream_redis as redis;

/// The AMQP 1.0 adapter (feature `amqp`).
#[cfg(feature = "amqp")]
pub use ruststream_amqp as amqp;

/// The RabbitMQ adapter over AMQP 0-9-1, on lapin (feature `lapin`).
#[cfg(feature = "lapin")]
pub use ruststream_lapin as lapin;

/// The Kafka adapter (feature `kafka`).
#[cfg(feature = "kafka")]
pub use ruststream_kafka as kafka;
/// The NATS JetStream adapter (feature `nats`).
#[cfg(feature = "nats")]
pub use ruststream_nats as nats;

/// The MQTT 5 adapter (feature `mqtt`).
#[cfg(feature = "mqtt")]
pub use ruststream_mqtt as mqtt;

/// The inbox on PostgreSQL: each message handled once, the handler's writes committed
/// with that record (feature `inbox`).
#[cfg(feature = "inbox")]
pub use ruststream_inbox as inbox;

/// The PostgreSQL adapter: queues in tables (feature `postgres`).
#[cfg(feature = "postgres")]
pub use ruststream_postgres as postgres;

/// The README's example service, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The handlers guide's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/handlers.md")]
pub struct HandlersGuide;

/// The settlement guide's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/settlement.md")]
pub struct SettlementGuide;

/// The running guide's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/running.md")]
pub struct RunningGuide;

/// The command line guide's examples, compiled as doctests (feature `cli`).
#[cfg(all(doctest, feature = "cli"))]
#[doc = include_str!("../../../docs/cli.md")]
pub struct CliGuide;

/// The inbox guide's examples, compiled as doctests (feature `inbox`).
#[cfg(all(doctest, feature = "inbox"))]
#[doc = include_str!("../../../docs/inbox.md")]
pub struct InboxGuide;

/// The testing guide's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing.md")]
pub struct TestingGuide;

/// The observability guide's examples, compiled (they need the `http`, `logs` and `otel`
/// features, which the demo turns on in the workspace).
#[cfg(all(doctest, feature = "http", feature = "logs", feature = "otel"))]
#[doc = include_str!("../../../docs/observability.md")]
pub struct ObservabilityGuide;

/// The operating guide's examples, compiled and run as doctests (the AMQP service is
/// `ignore`d here and built as `examples/amqp_orders.rs`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/operating.md")]
pub struct OperatingGuide;

/// The adapters guide's examples, compiled and run as doctests .
#[cfg(doctest)]
#[doc = include_str!("../../../docs/adapters.md")]
pub struct AdaptersGuide;
