//! `mqtt://`: the MQTT adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::MqttBroker;

/// Opens `mqtt://[user:password@]host[:port][?key=value…]` (and `mqtts://` with the `tls`
/// feature) as an [`MqttBroker`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MqttConnector;

/// `mqtt://`, and `mqtts://` (TLS, with the `tls` feature).
const SCHEMES: &[Scheme] = &[Scheme::plain("mqtt"), Scheme::tls("mqtts")];

impl Connector for MqttConnector {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn schemes(&self) -> &'static [Scheme] {
        SCHEMES
    }

    fn tls(&self) -> bool {
        cfg!(feature = "tls")
    }

    fn connect<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>> {
        Box::pin(async move { ruststream_core::opened(MqttBroker::connect(url).await) })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        Server::from_url(url, "mqtt", Some("5.0"), "MQTT 5")
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::MqttConnector;

    #[test]
    fn a_server_is_its_host_and_port() {
        let s = MqttConnector
            .server("mqtt://u:p@broker:1883?group=billing")
            .expect("described");
        assert_eq!(s.protocol, "mqtt");
        assert!(s.host.contains("broker:1883"), "{s:?}");
    }
}
