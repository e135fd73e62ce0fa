//! Server URLs: `nats://host:port` (or `tls://`), several separated by commas.

use async_nats::ServerAddr;

use crate::ConnectError;

/// The servers of `url`, checked: a scheme the client speaks, a host, a port that is a
/// number. The client would take some of these apart later, or not at all.
pub(crate) fn servers(url: &str) -> Result<Vec<ServerAddr>, ConnectError> {
    let bad = |reason: String| ConnectError::BadUrl {
        url: redact(url),
        reason,
    };
    if url.trim().is_empty() {
        return Err(bad("empty".into()));
    }
    url.split(',')
        .map(str::trim)
        .map(|one| {
            let (scheme, rest) = one.split_once("://").ok_or_else(|| {
                bad(format!(
                    "{:?} has no scheme (nats://host:port)",
                    redact(one)
                ))
            })?;
            if !matches!(scheme, "nats" | "tls") {
                return Err(bad(format!("scheme {scheme:?} is not nats or tls")));
            }
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            let host = host.split(['/', '?']).next().unwrap_or_default();
            if host.is_empty() {
                return Err(bad("no host".into()));
            }
            if let Some((_, port)) = host.rsplit_once(':').filter(|_| !host.ends_with(']')) {
                port.parse::<u16>()
                    .map_err(|_| bad(format!("port {port:?} is not a number up to 65535")))?;
            }
            one.parse::<ServerAddr>().map_err(|e| bad(e.to_string()))
        })
        .collect()
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(_)) => {
            let (user, host) = rest.rsplit_once('@').unwrap_or(("", rest));
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_urls() {
        assert_eq!(
            servers("nats://127.0.0.1:4222").map(|s| s.len()).ok(),
            Some(1)
        );
        assert_eq!(
            servers("nats://a:1, nats://b:2").map(|s| s.len()).ok(),
            Some(2)
        );
        assert!(servers("tls://user:pw@host:4222").is_ok());
        assert!(servers("nats://host").is_ok());
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("", "empty"),
            ("127.0.0.1:4222", "no scheme"),
            ("http://host:4222", "not nats"),
            ("nats://", "no host"),
            ("nats://host:99999", "port"),
            ("nats://host:abc", "port"),
        ] {
            let error = servers(url).expect_err(url).to_string();
            assert!(error.contains(why), "{url}: {error}");
        }
    }

    #[test]
    fn passwords_are_left_out() {
        assert_eq!(redact("nats://me:secret@h:1"), "nats://me:***@h:1");
        let error = servers("http://me:secret@h:1")
            .expect_err("scheme")
            .to_string();
        assert!(!error.contains("secret"), "{error}");
    }
}
