//! `nats://`, `tls://`, `nats+tls://`: the NATS adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::NatsBroker;

/// Opens NATS URLs as a [`NatsBroker`] (see [`NatsBroker::connect`]); a URL may list
/// several servers (`nats://a:4222,nats://b:4222`). `nats+tls://` is ruststream's other
/// name for the client's `tls://`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NatsConnector;

/// The URL as the client reads it: each `nats+tls://` server as `tls://`.
fn client_url(url: &str) -> String {
    url.split(',')
        .map(|one| match one.trim().split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("nats+tls") => format!("tls://{rest}"),
            _ => one.trim().to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The client speaks TLS in every build.
const SCHEMES: &[Scheme] = &[
    Scheme::plain("nats"),
    Scheme::plain("tls"),
    Scheme::plain("nats+tls"),
];

impl Connector for NatsConnector {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn schemes(&self) -> &'static [Scheme] {
        SCHEMES
    }

    fn tls(&self) -> bool {
        true
    }

    fn connect<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>> {
        Box::pin(
            async move { ruststream_core::opened(NatsBroker::connect(&client_url(url)).await) },
        )
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        let mut servers = url.split(',').map(str::trim);
        let first = servers.next().unwrap_or_default();
        let tls = first
            .split_once("://")
            .is_some_and(|(s, _)| !s.eq_ignore_ascii_case("nats"));
        let description = if tls { "NATS over TLS" } else { "NATS" };
        let mut server = Server::from_url(first, "nats", None, description)?;
        server.nodes = servers
            .filter_map(|one| Server::from_url(one, "nats", None, description).ok())
            .map(|one| one.host)
            .collect();
        Ok(server)
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::{NatsConnector, client_url};

    #[test]
    fn a_list_of_servers_is_its_first_and_the_rest_as_nodes() {
        let s = NatsConnector
            .server("nats://a:4222,nats://b:4222")
            .expect("described");
        assert_eq!((s.protocol, s.host.as_str()), ("nats", "a:4222"));
        assert_eq!(s.nodes, ["b:4222"]);
        assert_eq!(
            NatsConnector
                .server("nats+tls://a:4222")
                .expect("tls")
                .description,
            "NATS over TLS"
        );
        assert_eq!(
            client_url("nats+tls://a:4222, nats://b:4222"),
            "tls://a:4222,nats://b:4222"
        );
    }
}
