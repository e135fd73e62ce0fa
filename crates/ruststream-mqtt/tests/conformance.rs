//! The shared conformance suite (`ruststream-conformance`) on MQTT 5 with the adapter's
//! **default** options: a topic of each check's own, each mount a shared subscription in
//! the default group on a persistent session. Needs an MQTT 5 broker (Mosquitto 2 on
//! 127.0.0.1:1883; `RUSTSTREAM_MQTT_URL`).

mod support;

use std::sync::Arc;

use ruststream_conformance::{Harness, Mount};
use ruststream_core::{Address, Broker, Capabilities};

/// Topics of the check's own, with the default options.
struct Mqtt {
    prefix: String,
}

impl Harness for Mqtt {
    fn name(&self) -> &str {
        "mqtt"
    }

    async fn broker(&self) -> Arc<dyn Broker> {
        Arc::new(support::connect().await)
    }

    fn fresh_address(&self) -> Address {
        Address::new(support::unique(&self.prefix))
    }

    fn mount(&self, address: Address) -> Mount {
        Mount::new(address)
    }

    /// User properties are UTF-8 strings.
    fn binary_headers(&self) -> bool {
        false
    }

    // No `unpublishable_address`: a dead letter to a topic nobody subscribes to is kept
    // in a session of its own (see `keeper`), so a started mount's dead letter is never
    // refused at once, and `failed_copy_is_owed` does not apply.

    fn capabilities(&self) -> Capabilities {
        Capabilities::SETTLES
    }
}

mod mqtt {
    ruststream_conformance::conformance_tests!(super::Mqtt {
        prefix: "conf".into()
    });
}
