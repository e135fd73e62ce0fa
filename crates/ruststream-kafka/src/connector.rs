//! `kafka://`: the Kafka adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::KafkaBroker;

/// Opens `kafka://host:port[,host:port…][?group=…]` as a [`KafkaBroker`].
#[derive(Clone, Copy, Debug, Default)]
pub struct KafkaConnector;

/// One scheme: this build speaks no TLS to Kafka.
const SCHEMES: &[Scheme] = &[Scheme::plain("kafka")];

impl Connector for KafkaConnector {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn schemes(&self) -> &'static [Scheme] {
        SCHEMES
    }

    fn tls(&self) -> bool {
        false
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
        let mut server = Server::from_url(first, "kafka", None, "Kafka")?;
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
}
