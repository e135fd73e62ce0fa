//! RabbitMQ's queue rules, written once for ruststream's two RabbitMQ adapters
//! (`ruststream-lapin` over AMQP 0-9-1, `ruststream-amqp` over AMQP 1.0), as plain data
//! with no client library: what a queue's type and arguments make a subscription able
//! to do ([`QueueInfo::facts`]), the `x-delivery-limit` a cap needs
//! ([`delivery_limit`]), the arguments a mount's declaration gives a new queue
//! ([`arguments`]), whether an existing queue agrees with the mount ([`check`]), the
//! delivery limit a quorum queue really enforces on each RabbitMQ version ([`limit`]),
//! what an address names ([`node`]), what RabbitMQ says of a dead letter it moved
//! ([`Death`]), what a mount may override ([`QueueOptions`], read from configuration by
//! [`settings`]), and the dead-letter tools over an adapter's pass through a queue
//! ([`inspect`]). Each adapter reads the queue its own way (refusals of
//! `queue.declare`, the management node) and writes the arguments in its own encoding.

mod address;
mod check;
mod death;
mod options;
mod queue;

pub mod inspect;
pub mod limit;
pub mod percent;
pub mod settings;

pub use address::{BadAddress, Node, dead_letter_target, node};
pub use check::{Binding, check};
pub use death::{DEAD_LETTER_COUNT, Death, described, is_runtime_dead_letter};
pub use options::QueueOptions;
pub use queue::{Arg, QueueFacts, QueueInfo, arguments, delivery_limit};
