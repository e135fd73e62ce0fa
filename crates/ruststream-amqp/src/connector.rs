//! `amqp://`, `amqps://`: the AMQP 1.0 adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::AmqpBroker;

/// Opens AMQP 1.0 URLs as an [`AmqpBroker`] (see [`AmqpBroker::connect`]); `amqps`
/// needs the `tls` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct AmqpConnector;

/// The schemes it answers.
const SCHEMES: &[Scheme] = &[Scheme::plain("amqp"), Scheme::tls("amqps")];

impl Connector for AmqpConnector {
    fn name(&self) -> &'static str {
        "amqp"
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
        Box::pin(async move { ruststream_core::opened(AmqpBroker::connect(url).await) })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        let tls = url
            .split_once("://")
            .is_some_and(|(s, _)| s.eq_ignore_ascii_case("amqps"));
        if tls {
            Server::from_url(url, "amqps", Some("1.0"), "AMQP 1.0 over TLS (RabbitMQ 4)")
        } else {
            Server::from_url(url, "amqp", Some("1.0"), "AMQP 1.0 (RabbitMQ 4)")
        }
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::AmqpConnector;

    #[test]
    fn a_server_is_amqp_1_0_without_its_password() {
        let s = AmqpConnector
            .server("amqp://guest:secret@rabbit:5673/vhost?x=1")
            .expect("described");
        assert_eq!(s.host, "rabbit:5673");
        assert_eq!(s.pathname, "/vhost");
        assert_eq!((s.protocol, s.protocol_version), ("amqp", Some("1.0")));
        assert_eq!(s.url, "amqp://guest:***@rabbit:5673/vhost");
        assert_eq!(
            AmqpConnector
                .server("amqps://h:5671")
                .expect("tls")
                .protocol,
            "amqps"
        );
    }
}
