//! The MQTT bindings of a service's description (AsyncAPI's MQTT bindings 0.2.0): every
//! subscription and every publish is QoS 1, and nothing is retained.

use ruststream_core::{Binding, BindingValue, Bindings};

/// The version of AsyncAPI's MQTT bindings these follow.
const VERSION: &str = "0.2.0";

/// A mount's subscription: QoS 1.
pub(crate) fn subscription() -> Bindings {
    Bindings {
        channel: None,
        operation: Some(Binding::new("mqtt", VERSION).field("qos", BindingValue::Number(1))),
    }
}

/// A publish: QoS 1, not retained.
pub(crate) fn publish() -> Bindings {
    Bindings {
        channel: None,
        operation: Some(
            Binding::new("mqtt", VERSION)
                .field("qos", BindingValue::Number(1))
                .field("retain", BindingValue::Flag(false)),
        ),
    }
}
