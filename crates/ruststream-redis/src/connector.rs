//! `redis://`, `rediss://`, `redis-cluster://`, `rediss-cluster://`,
//! `redis-sentinel://`, `rediss-sentinel://`: the Redis adapter by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use crate::RedisBroker;

/// Opens Redis URLs as a [`RedisBroker`] (see [`RedisBroker::connect`] for their forms
/// and settings); `rediss` schemes need the `tls` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedisConnector;

/// The schemes it answers.
const SCHEMES: &[Scheme] = &[
    Scheme::plain("redis"),
    Scheme::plain("redis-cluster"),
    Scheme::plain("redis-sentinel"),
    Scheme::tls("rediss"),
    Scheme::tls("rediss-cluster"),
    Scheme::tls("rediss-sentinel"),
];

impl Connector for RedisConnector {
    fn name(&self) -> &'static str {
        "redis"
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
        Box::pin(async move { ruststream_core::opened(RedisBroker::connect(url).await) })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        let scheme = url
            .split_once("://")
            .map_or("", |(s, _)| s)
            .to_ascii_lowercase();
        let (protocol, description) = if scheme.starts_with("rediss") {
            ("rediss", "Redis over TLS")
        } else {
            ("redis", "Redis")
        };
        let mut server = Server::from_url(url, protocol, None, description)?;
        if scheme.ends_with("-sentinel") {
            // The sentinels, comma-separated: the first is the host, the rest nodes.
            let mut sentinels: Vec<String> = server.host.split(',').map(str::to_owned).collect();
            server.host = sentinels.remove(0);
            server.nodes = sentinels;
        }
        if scheme.ends_with("-cluster") {
            // The further nodes: `?node=host:port&node=…`.
            server.nodes = url
                .split_once('?')
                .map(|(_, query)| query.split('#').next().unwrap_or_default())
                .unwrap_or_default()
                .split('&')
                .filter_map(|pair| pair.strip_prefix("node="))
                .map(str::to_owned)
                .collect();
        }
        Ok(server)
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Connector;

    use super::RedisConnector;

    #[test]
    fn clusters_list_their_nodes_and_passwords_never_show() {
        let s = RedisConnector
            .server("redis-cluster://:pw@a:7001?node=b:7002&node=c:7003")
            .expect("described");
        assert_eq!(s.host, "a:7001");
        assert_eq!(s.protocol, "redis");
        assert_eq!(s.nodes, ["b:7002", "c:7003"]);
        assert!(!s.url.contains("pw"));
        let s = RedisConnector
            .server("rediss://h:6390/2")
            .expect("described");
        assert_eq!((s.protocol, s.pathname.as_str()), ("rediss", "/2"));
        assert!(RedisConnector.server("redis://").is_err());
        let s = RedisConnector
            .server("redis-sentinel://:pw@a:26379,b:26380/orders")
            .expect("described");
        assert_eq!(
            (s.host.as_str(), s.pathname.as_str()),
            ("a:26379", "/orders")
        );
        assert_eq!(s.nodes, ["b:26380"]);
        assert!(!s.url.contains("pw"));
    }
}
