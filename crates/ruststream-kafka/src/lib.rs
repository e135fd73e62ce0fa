//! Kafka adapter for ruststream: a mount is a consumer of its topic in a consumer group
//! (classic protocol), publishing goes through one idempotent producer (`acks=all`).
//!
//! [`KafkaBroker::connect`] opens `kafka://host:9092[,host:9092…]` (librdkafka, built
//! into the crate); a user in the URL (`kafka://user:password@host:9092`) is SASL, and
//! with the `tls` feature `kafkas://` is TLS (the system's roots, or the URL's
//! `tls_ca_file`) and SASL may be SCRAM (see `docs/kafka.md`, "TLS and SASL"). Each mount's subscription joins the group its [`Group`] option, its
//! `group` setting or the URL's `?group=` names (default `ruststream.<topic>`) and reads its
//! topic, which must exist; a new group starts at the earliest offset. Kafka keeps one
//! position per partition and group, so every settlement (`Accept`, `Reject`, `Remove`)
//! marks its offset done and the group commits, per partition, up to the lowest offset
//! still in hand: nothing unsettled is ever committed past, and what a stopped or killed
//! service held is read again by the consumer that gets the partition. A `Settling`
//! resolves once the commit it allowed is made, at once where a lower delivery is still
//! in hand (its commit comes with that one's), and with `AckError::Disconnected` where
//! the partition was taken away meanwhile (a rebalance: the new owner reads it again).
//! A delivery given back unsettled (`Acker::abandon`) is read again at once: the
//! partition is sought back to it, and what that reads again is skipped unless it was
//! given back too. A graceful stop drains: nothing more is read, what the subscription
//! holds is handled and settled, then the consumer commits and leaves its group.
//!
//! Kafka neither takes a record back nor counts deliveries, so subscriptions declare
//! [`Capabilities::SETTLES`](ruststream_core::Capabilities::SETTLES) and `delays`: a
//! retry is a copy the runtime publishes (to the topic, or `retry_to`), carrying
//! `x-ruststream-retry-count`, and a dead letter is a record published to the dead-letter
//! topic. A delayed retry (`RequeueAfter(d)`) is a copy parked in the delay topic
//! `<group>.delay.<ms>` before the original is done; a mover of the group's own sends it
//! back when it is due, whichever process of the group is running then. Headers are
//! Kafka record headers (a null value reads as empty); the record key is the header
//! [`KEY`] (`kafka-key`), on publishing and on reading, so copies keep it.
//!
//! Under the [`KeyOrder`] option a mount handles a key's records one at a time, in their
//! partition's order, retries included: a retry is the record itself, kept in hand (no
//! commit passes it) and handed out again before the later records of its key, which
//! wait while other keys go on; the subscription counts attempts itself.
//!
//! ```no_run
//! use ruststream::{App, Mount, Outcome, ack};
//! use ruststream_kafka::{Group, KafkaBroker};
//!
//! async fn handle(order: String) -> Outcome {
//!     println!("{order}");
//!     ack()
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = KafkaBroker::connect("kafka://127.0.0.1:9092").await?;
//! App::new(broker)
//!     .mount(Mount::new("orders").max_attempts(5).dead_letter("orders.dead"), handle)
//!     .mount(Mount::new("audit").option(Group::new("auditor")), handle)
//!     .run()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/kafka.md` for the broker the tests run on and how it differs from Kafka.

mod acker;
mod admin;
mod bindings;
mod broker;
mod close;
mod cluster;
mod commit;
mod connector;
mod context;
mod delay;
mod deliveries;
mod error;
mod fetch;
mod gap;
mod group;
mod headers;
mod inspect;
mod lag;
mod offsets;
mod options;
mod order;
mod positions;
mod probe;
mod producer;
mod publisher;
mod reader;
mod record;
mod said;
mod settings;

pub use broker::{KafkaBroker, TRAILING, default_url};
pub use connector::KafkaConnector;
pub use error::ConnectError;
pub use headers::KEY;
pub use inspect::TOOLS_GROUP;
pub use lag::{Lag, LagError};
pub use options::{Group, KeyOrder};
pub use producer::MAX_MESSAGE;
