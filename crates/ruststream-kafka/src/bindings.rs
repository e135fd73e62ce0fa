//! The Kafka bindings of a service's description (AsyncAPI's Kafka bindings 0.5.0): a
//! channel is its topic, a mount's receive operation names its consumer group.

use ruststream_core::{Binding, BindingValue, Bindings};

/// The version of AsyncAPI's Kafka bindings these follow.
const VERSION: &str = "0.5.0";

/// A mount on `topic` read by `group`.
pub(crate) fn subscription(topic: &str, group: &str) -> Bindings {
    Bindings {
        channel: Some(channel(topic)),
        operation: Some(
            Binding::new("kafka", VERSION)
                .field("groupId", BindingValue::Constant(group.to_owned())),
        ),
    }
}

/// A publish to `topic`: the channel's binding only (a producer has no group).
pub(crate) fn publish(topic: &str) -> Bindings {
    Bindings {
        channel: Some(channel(topic)),
        operation: None,
    }
}

fn channel(topic: &str) -> Binding {
    Binding::new("kafka", VERSION).field("topic", BindingValue::Text(topic.to_owned()))
}
