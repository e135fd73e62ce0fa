//! Reading a connection URL into the client's configuration.

use fred::types::config::Config;

use crate::ConnectError;

/// Reads `redis://[user:password@]host[:port][/db]` (and `rediss://` with the `tls`
/// feature, `redis-cluster://host:port?node=host:port` for a cluster,
/// `redis-sentinel://host:port,host:port/master[/db]` for a master its sentinels name)
/// into a client configuration, and whether it asks for TLS. The TLS configuration
/// itself is not set here (see `crate::tls`).
pub(crate) fn parse(url: &str) -> Result<(Config, bool), ConnectError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| ConnectError::BadUrl(format!("{url:?} has no scheme")))?;
    let tls = match scheme {
        "redis" | "redis-cluster" | "redis-sentinel" => false,
        "rediss" | "rediss-cluster" | "rediss-sentinel" => true,
        other => {
            return Err(ConnectError::BadUrl(format!(
                "unknown scheme {other:?} (expected redis, rediss, redis-cluster or \
                 redis-sentinel)"
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
    let bad = |e: fred::error::Error| ConnectError::BadUrl(e.details().to_owned());
    let config = match scheme {
        "redis-sentinel" | "rediss-sentinel" => Config::from_url_sentinel(&sentinel(rest)?),
        "rediss" => Config::from_url(&format!("redis://{rest}")),
        "rediss-cluster" => Config::from_url(&format!("redis-cluster://{rest}")),
        _ => Config::from_url(url),
    }
    .map_err(bad)?;
    Ok((config, tls))
}

/// The query keys of a Sentinel URL that are the connection's, not subscription
/// settings.
pub(crate) const SENTINEL_KEYS: [&str; 2] = ["sentinel_username", "sentinel_password"];

/// `[auth@]host[:port],host[:port]/master[/db][?sentinel_username=…&sentinel_password=…]`
/// (the part after `redis-sentinel://`) in the client's own form:
/// `redis-sentinel://[auth@]host:port[/db]?sentinelServiceName=master&node=host:port…`.
fn sentinel(rest: &str) -> Result<String, ConnectError> {
    let bad = |why: &str| ConnectError::BadUrl(format!("redis-sentinel://{rest}: {why}"));
    let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (auth, head) = match head.rsplit_once('@') {
        Some((auth, head)) => (Some(auth), head),
        None => (None, head),
    };
    let (hosts, path) = head
        .split_once('/')
        .ok_or_else(|| bad("names no master (redis-sentinel://host:port,host:port/master)"))?;
    let (master, db) = match path.split_once('/') {
        Some((master, db)) => (master, Some(db)),
        None => (path, None),
    };
    if master.is_empty() {
        return Err(bad(
            "names no master (redis-sentinel://host:port,host:port/master)",
        ));
    }
    let mut hosts = hosts.split(',').map(|host| match host.rsplit_once(':') {
        _ if host.is_empty() => Err(bad("an empty sentinel address")),
        Some((_, port)) if port.parse::<u16>().is_err() => Err(bad("a port that is not a number")),
        Some(_) => Ok(host.to_owned()),
        None => Ok(format!("{host}:26379")),
    });
    let first = hosts.next().unwrap_or_else(|| Err(bad("no sentinel")))?;
    let mut out = String::from("redis-sentinel://");
    if let Some(auth) = auth {
        out.push_str(auth);
        out.push('@');
    }
    out.push_str(&first);
    if let Some(db) = db.filter(|db| !db.is_empty()) {
        out.push('/');
        out.push_str(db);
    }
    out.push_str("?sentinelServiceName=");
    out.push_str(master);
    for host in hosts {
        out.push_str("&node=");
        out.push_str(&host?);
    }
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = match key {
            "sentinel_username" => "sentinelUsername",
            "sentinel_password" => "sentinelPassword",
            other => return Err(bad(&format!("unknown connection key {other:?}"))),
        };
        out.push_str(&format!("&{key}={value}"));
    }
    Ok(out)
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
    fn sentinel_urls_list_every_sentinel_and_name_the_master() {
        let (c, tls) = parse(
            "redis-sentinel://:pw@127.0.0.1:26501,127.0.0.1:26502,localhost/orders/3\
             ?sentinel_password=spw",
        )
        .expect("parses");
        assert!(!tls);
        let fred::types::config::ServerConfig::Sentinel {
            hosts,
            service_name,
            password,
            ..
        } = &c.server
        else {
            panic!("a sentinel configuration: {:?}", c.server);
        };
        assert_eq!(service_name, "orders");
        let mut ports: Vec<u16> = hosts.iter().map(|h| h.port).collect();
        ports.sort_unstable();
        assert_eq!(ports, [26379, 26501, 26502]);
        assert_eq!(password.as_deref(), Some("spw"));
        assert_eq!(c.password.as_deref(), Some("pw"));
        assert_eq!(c.database, Some(3));
    }

    #[test]
    fn bad_sentinel_urls_are_refused() {
        for url in [
            "redis-sentinel://127.0.0.1:26501",
            "redis-sentinel://127.0.0.1:26501/",
            "redis-sentinel://127.0.0.1:26501,/m",
            "redis-sentinel://127.0.0.1:x/m",
            "redis-sentinel://127.0.0.1:26501/m?other=1",
            "redis-sentinel:///m",
        ] {
            assert!(matches!(parse(url), Err(ConnectError::BadUrl(_))), "{url}");
        }
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
