//! NATS adapter for ruststream: JetStream durable pull consumers, and core NATS subjects.
//!
//! [`NatsBroker::connect`] opens one connection (the client reconnects by itself).
//! A mount's subject is consumed, by default, through a durable pull consumer of the
//! JetStream stream that holds it ([`JetStream`]): the stream and the consumer are
//! found, checked or created when the service starts. Every settlement is an
//! acknowledgement (`Accept` and `Remove` are `+ACK`, `Reject` is `+TERM`, `Requeue` is
//! `-NAK`, `RequeueAfter(d)` is `-NAK` with the delay), by default published, so a
//! `Settling` resolves once the client has taken it for writing (the server delivers
//! again, after `ack_wait`, what it did not get); with [`JetStream::confirm_acks`] (or
//! the setting `confirm_acks=true`) each is a request the server answers, and a
//! `Settling` resolves once the server has it, with `AckError::Disconnected` if the
//! connection fails first. A settlement while the connection is down is
//! `AckError::Disconnected` either way. The attempt number is the
//! consumer's delivery count; the attempt cap and the dead letter are the runtime's
//! (the consumer's `max_deliver` is left unlimited: JetStream only stops delivering at
//! it, and would lose the message without a word). A handler that runs long has its
//! delivery signalled in progress (`+WPI`), and so have the deliveries received and
//! waiting behind it, so that the server does not deliver them again meanwhile. Publishing goes through JetStream and waits for the server's
//! acknowledgement, with `Nats-Msg-Id` set from the message id for the stream's
//! duplicate window. With [`Core`] a mount is a plain subscription (or a queue group),
//! at most once.
//!
//! ```no_run
//! use ruststream::{App, Mount, Outcome, ack};
//! use ruststream_nats::{JetStream, NatsBroker};
//!
//! async fn handle(order: String) -> Outcome {
//!     println!("{order}");
//!     ack()
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = NatsBroker::connect("nats://127.0.0.1:4222").await?;
//! App::new(broker)
//!     .mount(Mount::new("orders").max_attempts(5).dead_letter("orders.dead"), handle)
//!     .mount(Mount::new("audit").option(JetStream::new().consumer("auditor")), handle)
//!     .run()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The broker offers [`Inspect`](ruststream_core::Inspect) (the command line's
//! `dead-letters` tools) on subjects a JetStream stream holds: a browse reads the
//! stream's stored messages for the subject by stream sequence (`STREAM.MSG.GET`, no
//! consumer involved: nothing is delivered or counted), ids are stream sequences, and
//! removing deletes by sequence (`STREAM.MSG.DELETE`). A stream with limits retention
//! keeps acknowledged messages too, so those are listed until its limits remove them.
//!
//! See `docs/nats.md` for the forms, the settings and what happens on a reconnect.

mod acker;
mod broker;
mod connection;
mod connector;
mod core;
mod create;
mod dead;
mod error;
mod headers;
mod inspect;
mod jetstream;
mod link;
mod names;
mod options;
mod poison;
mod progress;
mod publisher;
mod pull;
mod pump;
mod reader;
mod settings;
mod url;

pub use broker::{NatsBroker, default_url};
pub use connector::NatsConnector;
pub use error::ConnectError;
pub use headers::MSG_ID;
pub use options::{Core, JetStream};
