//! Reading a connection URL into the client's configuration.

use fred::types::config::Config;

use crate::ConnectError;

/// Reads `redis://[user:password@]host[:port][/db]` (and `rediss://` with the `tls`
/// feature, `redis-cluster://host:port?node=host:port` for a cluster) into a client
/// configuration.
pub(crate) fn parse(url: &str) -> Result<Config, ConnectError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| ConnectError::BadUrl(format!("{url:?} has no scheme")))?;
    let tls = match scheme {
        "redis" | "redis-cluster" => false,
        "rediss" | "rediss-cluster" => true,
        other => {
            return Err(ConnectError::BadUrl(format!(
                "unknown scheme {other:?} (expected redis, rediss or redis-cluster)"
            )));
        }
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ConnectError::BadUrl(format!("{url:?} has no host")));
    }
    if tls && !cfg!(feature = "tls") {
        return Err(ConnectError::TlsDisabled);
    }
    // With the `tls` feature the client reads `rediss` itself and sets up rustls with
    // the system's roots.
    Config::from_url(url).map_err(|e| ConnectError::BadUrl(e.details().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_urls_with_auth_and_db() {
        let c = parse("redis://user:secret@127.0.0.1:6380/2").expect("parses");
        assert_eq!(c.username.as_deref(), Some("user"));
        assert_eq!(c.password.as_deref(), Some("secret"));
        assert_eq!(c.database, Some(2));
        let c = parse("redis://:only-password@localhost").expect("parses");
        assert_eq!(c.password.as_deref(), Some("only-password"));
    }

    #[test]
    fn cluster_urls_list_every_node() {
        let c = parse("redis-cluster://127.0.0.1:7001?node=127.0.0.1:7002&node=127.0.0.1:7003")
            .expect("parses");
        assert!(c.server.is_clustered());
        assert_eq!(c.server.hosts().len(), 3);
    }

    #[test]
    fn bad_urls_are_refused() {
        for url in [
            "",
            "localhost:6379",
            "http://localhost",
            "redis://",
            "redis://:6379",
        ] {
            assert!(matches!(parse(url), Err(ConnectError::BadUrl(_))), "{url}");
        }
        assert!(matches!(
            parse("redis://h/notanumber"),
            Err(ConnectError::BadUrl(_))
        ));
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_needs_the_feature() {
        assert!(matches!(
            parse("rediss://localhost"),
            Err(ConnectError::TlsDisabled)
        ));
    }
}
