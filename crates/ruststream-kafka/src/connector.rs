//! `kafka://`: the Kafka adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::KafkaBroker;

/// Opens `kafka://host:port[,host:port…][?group=…]` as a [`KafkaBroker`], and with the
/// `tls` feature `kafkas://`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KafkaConnector;

/// Plain text and TLS (`kafkas://`, with the `tls` feature).
const SCHEMES: &[Scheme] = &[Scheme::plain("kafka"), Scheme::tls("kafkas")];

impl Connector for KafkaConnector {
    fn name(&self) -> &'static str {
        "kafka"
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
        Box::pin(async move { ruststream_core::opened(KafkaBroker::connect(url).await) })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        let mut servers = url.split(',').map(str::trim);
        let first = servers.next().unwrap_or_default();
        let secure = first
            .split_once("://")
            .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("kafkas"));
        let protocol = if secure { "kafka-secure" } else { "kafka" };
        let mut server = Server::from_url(first, protocol, None, "Kafka")?;
        server.nodes = servers
            .map(|one| one.split(['?', '/']).next().unwrap_or_default())
            .map(|one| {
                one.split_once("://")
                    .map_or(one, |(_, host)| host)
                    .to_owned()
            })
            .filter(|one| !one.is_empty())
            .collect();
        Ok(server)
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::KafkaConnector;

    #[test]
    fn a_list_of_servers_is_its_first_and_the_rest_as_nodes() {
        let s = KafkaConnector
            .server("kafka://a:9092,b:9092?group=billing")
            .expect("described");
        assert_eq!((s.protocol, s.host.as_str()), ("kafka", "a:9092"));
        assert_eq!(s.nodes, ["b:9092"]);
    }

    #[test]
    fn kafkas_is_kafka_secure_and_its_password_is_not_shown() {
        let s = KafkaConnector
            .server("kafkas://alice:secret@a:9093,b:9093?tls_ca_file=/ca.pem")
            .expect("described");
        assert_eq!((s.protocol, s.host.as_str()), ("kafka-secure", "a:9093"));
        assert_eq!(s.nodes, ["b:9093"]);
        assert!(!format!("{s:?}").contains("secret"), "{s:?}");
    }
}
