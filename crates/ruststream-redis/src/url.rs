//! Reading a connection URL into the client's configuration.

use fred::types::config::Config;

use crate::ConnectError;

/// Reads `redis://[user:password@]host[:port][/db]` (and `rediss://` with the `tls`
/// feature, `redis-cluster://host:port?node=host:port` for a cluster) into a client
/// configuration, and whether it asks for TLS. The TLS configuration itself is not set
/// here (see `crate::tls`).
pub(crate) fn parse(url: &str) -> Result<(Config, bool), ConnectError> {
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
    // fred would set up rustls itself for `rediss`, with the system's roots only and a
    // crypto provider guessed from rustls' features (a panic when a build has two):
    // the plain scheme here, TLS from the settings.
    let plain = match scheme {
        "rediss" => format!("redis://{rest}"),
        "rediss-cluster" => format!("redis-cluster://{rest}"),
        _ => url.to_owned(),
    };
    let config =
        Config::from_url(&plain).map_err(|e| ConnectError::BadUrl(e.details().to_owned()))?;
    Ok((config, tls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_urls_with_auth_and_db() {
        let (c, tls) = parse("redis://user:secret@127.0.0.1:6380/2").expect("parses");
        assert!(!tls);
        assert_eq!(c.username.as_deref(), Some("user"));
        assert_eq!(c.password.as_deref(), Some("secret"));
        assert_eq!(c.database, Some(2));
        let (c, _) = parse("redis://:only-password@localhost").expect("parses");
        assert_eq!(c.password.as_deref(), Some("only-password"));
    }

    #[test]
    fn cluster_urls_list_every_node() {
        let (c, _) =
            parse("redis-cluster://127.0.0.1:7001?node=127.0.0.1:7002&node=127.0.0.1:7003")
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

    #[cfg(feature = "tls")]
    #[test]
    fn tls_urls_are_read_as_plain_ones_plus_tls() {
        let (c, tls) = parse("rediss://u:p@127.0.0.1:6390/3").expect("parses");
        assert!(tls);
        assert!(
            c.tls.is_none(),
            "TLS comes from the settings, not from fred"
        );
        assert_eq!(c.database, Some(3));
        assert_eq!(c.password.as_deref(), Some("p"));
        let (c, tls) =
            parse("rediss-cluster://127.0.0.1:7001?node=127.0.0.1:7002").expect("parses");
        assert!(tls);
        assert!(c.server.is_clustered());
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
