//! `postgres://`, `postgresql://`: the PostgreSQL adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::PostgresBroker;

/// Opens PostgreSQL URLs as a [`PostgresBroker`] (see [`PostgresBroker::connect`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct PostgresConnector;

/// Both names the client answers; TLS is the URL's `sslmode` (feature `tls`).
const SCHEMES: &[Scheme] = &[Scheme::plain("postgres"), Scheme::plain("postgresql")];

impl Connector for PostgresConnector {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn schemes(&self) -> &'static [Scheme] {
        SCHEMES
    }

    fn tls(&self) -> bool {
        crate::tls::BUILT_IN
    }

    fn connect<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>> {
        Box::pin(async move { ruststream_core::opened(PostgresBroker::connect(url).await) })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        Server::from_url(url, "postgres", None, "PostgreSQL")
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::PostgresConnector;

    #[test]
    fn a_server_is_its_host_and_database() {
        let server = PostgresConnector
            .server("postgresql://app:secret@db:5432/orders?schema=jobs")
            .expect("described");
        assert_eq!(
            (server.host.as_str(), server.pathname.as_str()),
            ("db:5432", "/orders")
        );
        assert_eq!(server.url, "postgresql://app:***@db:5432/orders");
        assert_eq!(server.protocol, "postgres");
    }
}
