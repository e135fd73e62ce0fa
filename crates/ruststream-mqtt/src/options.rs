//! The MQTT adapter's own mount options.

use std::time::Duration;

use ruststream_core::BrokerOption;

/// The shared-subscription group of a mount (`$share/<group>/<filter>`, default
/// `ruststream`): services in one group share the messages, each group gets them all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group(pub(crate) Option<String>);

impl Group {
    /// The group named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(Some(name.into()))
    }

    /// No group: the mount subscribes its filter itself and gets every message.
    pub fn none() -> Self {
        Self(None)
    }
}

impl BrokerOption for Group {
    const BROKER: &'static str = "mqtt";
}

/// How long the broker keeps a mount's session, and what it holds, after its connection
/// goes (default one hour; at least one second).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionExpiry(pub Duration);

impl BrokerOption for SessionExpiry {
    const BROKER: &'static str = "mqtt";
}
