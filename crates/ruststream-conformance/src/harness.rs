//! What an adapter tells the suite about the broker and the form under test.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ruststream::Mount;
use ruststream_core::{Address, Broker, Capabilities};

/// The broker and subscription form under test.
///
/// One harness value serves one check (the macro makes a new one per test). A check
/// takes every address it needs with [`fresh_address`](Self::fresh_address) before it
/// asks for its first [`broker`](Self::broker), so a harness may configure each
/// connection for the addresses handed out (a Redis list form routes them as lists).
pub trait Harness: Send + Sync + 'static {
    /// A short name for messages: `amqp quorum`, `redis stream`.
    fn name(&self) -> &str;

    /// A new connection to the broker under test. Every service of a check gets its own:
    /// a stopping [`App`](ruststream::App) closes its broker.
    fn broker(&self) -> impl Future<Output = Arc<dyn Broker>> + Send;

    /// An address no other check uses, in the adapter's address form, ready to be
    /// published to and consumed from (declared on brokers that need it).
    fn fresh_address(&self) -> Address;

    /// A mount on `address` with the adapter's options for the form under test (a Redis
    /// form, AMQP subscription options). Checks add their declarations and policies.
    fn mount(&self, address: Address) -> Mount {
        Mount::new(address)
    }

    /// The capabilities the form's subscriptions declare; checks that need what the form
    /// cannot do are skipped. [`checks::declared_capabilities`](crate::checks::declared_capabilities)
    /// verifies the declaration against a real subscription.
    fn capabilities(&self) -> Capabilities;

    /// Whether header values may be any bytes (default `true`); `false` leaves the
    /// non-UTF-8 header out of the round trip.
    fn binary_headers(&self) -> bool {
        true
    }

    /// How long to watch for something that must not arrive (default 1 s). Longer than
    /// the form takes to redeliver an unsettled delivery, so that a redelivery would show.
    fn quiet(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// Whether the form's subscription drains at a graceful stop (it accepts the spec's
    /// `Drain`): what the broker had already handed over is handled and settled by the
    /// stopping service instead of waiting for the next one (default `false`).
    fn drains(&self) -> bool {
        false
    }

    /// Whether the broker stores a publish whose `message-id` it has stored already only
    /// once (JetStream's duplicate window): the copy `delivered_twice_handled_once`
    /// publishes then never arrives, and that part of the check does not apply (default
    /// `false`).
    fn drops_repeated_publishes(&self) -> bool {
        false
    }

    /// How long what a killed consumer held takes to be handed out again (a lease
    /// running out, a heartbeat missed), with the form's defaults; by default
    /// [`quiet`](Self::quiet).
    fn after_a_kill(&self) -> Duration {
        self.quiet()
    }

    /// What the harness of a child process of a check needs to reach what this one
    /// reaches (a schema of the check's own, say), given to the child's harness as
    /// [`child::parent`](crate::child::parent). `None` (the default): a new harness
    /// reaches it anyway.
    fn share(&self) -> Option<String> {
        None
    }

    /// An address a publish to fails at once (AMQP: a queue that does not exist; Redis: a
    /// key holding another type), used as a dead letter that cannot be published.
    /// `None` (the default) where the broker takes any address; the checks that need one
    /// are then not applicable.
    fn unpublishable_address(&self) -> Option<Address> {
        None
    }

    /// The header that carries a message's key, where the harness's
    /// [`mount`](Self::mount) keeps each key's messages in order through retries (Kafka's
    /// `KeyOrder`: `kafka-key`). `None` (the default): the form keeps no such order, and
    /// [`key_order_through_retries`](crate::checks::key_order_through_retries) does not
    /// apply.
    fn key_header(&self) -> Option<&'static str> {
        None
    }
}
