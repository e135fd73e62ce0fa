//! `amqp091://`, `amqps091://`: RabbitMQ over AMQP 0-9-1 by URL.
//!
//! `amqp://` is AMQP 1.0 in ruststream (the `ruststream-amqp` adapter), so that enabling
//! an adapter never changes what a URL opens: this adapter answers schemes of its own and
//! hands lapin the URL as the `amqp://` or `amqps://` it reads.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::LapinBroker;

/// Opens `amqp091://` and `amqps091://` URLs as a [`LapinBroker`] (see
/// [`LapinBroker::connect`]); `amqps091` needs the `tls` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct LapinConnector;

/// Whether `url`'s scheme is `amqps091`; the URL as lapin reads it.
fn lapin_url(url: &str) -> (bool, String) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let tls = scheme.eq_ignore_ascii_case("amqps091");
    (
        tls,
        format!("{}://{rest}", if tls { "amqps" } else { "amqp" }),
    )
}

/// The schemes it answers.
const SCHEMES: &[Scheme] = &[Scheme::plain("amqp091"), Scheme::tls("amqps091")];

impl Connector for LapinConnector {
    fn name(&self) -> &'static str {
        "lapin"
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
        Box::pin(
            async move { ruststream_core::opened(LapinBroker::connect(&lapin_url(url).1).await) },
        )
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        if lapin_url(url).0 {
            Server::from_url(
                url,
                "amqps",
                Some("0.9.1"),
                "RabbitMQ over AMQP 0-9-1 with TLS",
            )
        } else {
            Server::from_url(url, "amqp", Some("0.9.1"), "RabbitMQ over AMQP 0-9-1")
        }
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::{LapinConnector, lapin_url};

    #[test]
    fn lapin_gets_amqp_urls_and_the_server_keeps_ruststreams_scheme() {
        assert_eq!(
            lapin_url("amqps091://guest:pw@h:5671/%2f"),
            (true, "amqps://guest:pw@h:5671/%2f".to_owned())
        );
        assert_eq!(lapin_url("AMQP091://h").1, "amqp://h");
        let s = LapinConnector
            .server("amqp091://guest:secret@rabbit:5672/%2f")
            .expect("described");
        assert_eq!((s.protocol, s.protocol_version), ("amqp", Some("0.9.1")));
        assert_eq!(s.host, "rabbit:5672");
        assert_eq!(s.url, "amqp091://guest:***@rabbit:5672/%2f");
    }
}
