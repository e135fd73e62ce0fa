//! The Kafka adapter's own mount options.

use ruststream_core::BrokerOption;

/// The consumer group a mount's subscription joins (default `ruststream.<topic>`, or
/// the `group` setting): every service reading a topic on its own needs a group of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group(pub(crate) String);

impl Group {
    /// The group named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
}

impl BrokerOption for Group {
    const BROKER: &'static str = "kafka";
}

/// Key order: a mount's records of one key are handled one at a time, in the order of
/// their partition, retries included (the `key_order` setting, `true`).
///
/// Without it a retry is a copy published to the end of the topic, so the next records
/// of its key are handled before it. Under key order a retry is the record itself: it
/// stays in hand (the group commits nothing past it), waits its delay in the process,
/// and is handed out again before any later record of its key; those are held back
/// meanwhile while other keys go on. The subscription counts attempts itself, so
/// `max_attempts` and the dead letter apply as on a broker that counts. See
/// `docs/kafka.md`, "Key order", for what it costs.
///
/// ```no_run
/// use ruststream::Mount;
/// use ruststream_kafka::KeyOrder;
///
/// let mount = Mount::new("accounts")
///     .option(KeyOrder)
///     .max_attempts(5)
///     .dead_letter("accounts.dead");
/// # let _ = mount;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyOrder;

impl BrokerOption for KeyOrder {
    const BROKER: &'static str = "kafka";
}
