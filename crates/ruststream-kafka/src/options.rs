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
