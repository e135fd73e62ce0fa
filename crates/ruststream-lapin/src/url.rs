//! The broker URL: `amqp://user:pass@host:port/vhost`, checked before connecting.

use lapin::uri::{AMQPScheme, AMQPUri};

use crate::error::ConnectError;

/// A checked broker URL.
#[derive(Clone, Debug)]
pub(crate) struct BrokerUrl {
    pub(crate) uri: AMQPUri,
}

impl BrokerUrl {
    /// Reads `url` (without the settings the adapter takes from its query): `amqp://`,
    /// and `amqps://` where the crate is built with the `tls` feature.
    pub(crate) fn parse(url: &str) -> Result<Self, ConnectError> {
        let bad = |why: String| ConnectError::BadUrl(why);
        let shown = redact(url);
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad(format!(
                "{shown:?} is not a URL (amqp://user:pass@host:port/vhost)"
            )));
        };
        match scheme {
            "amqp" => {}
            "amqps" if cfg!(feature = "tls") => {}
            "amqps" => {
                return Err(bad("amqps:// needs the crate's `tls` feature".into()));
            }
            other => return Err(bad(format!("scheme {other:?} is not amqp"))),
        }
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with(':') {
            return Err(bad(format!("{shown:?} has no host")));
        }
        let uri: AMQPUri = url
            .parse()
            .map_err(|e: String| bad(format!("{shown:?}: {}", e.replace(url, &shown))))?;
        if uri.scheme != AMQPScheme::AMQP && !cfg!(feature = "tls") {
            return Err(bad("only amqp:// is supported".into()));
        }
        Ok(Self { uri })
    }

    /// `host:port/vhost`, for messages (no credentials).
    pub(crate) fn display(&self) -> String {
        format!(
            "{}:{}/{}",
            self.uri.authority.host, self.uri.authority.port, self.uri.vhost
        )
    }
}

/// `url` with the password of its user information, if any, as `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_host_port_and_vhost() {
        let url = BrokerUrl::parse("amqp://app:secret@rabbit:5673/orders").expect("ok");
        assert_eq!(url.uri.authority.host, "rabbit");
        assert_eq!(url.uri.authority.port, 5673);
        assert_eq!(url.uri.authority.userinfo.username, "app");
        assert_eq!(url.uri.vhost, "orders");
        assert_eq!(url.display(), "rabbit:5673/orders");
        let default = BrokerUrl::parse("amqp://127.0.0.1/%2f").expect("ok");
        assert_eq!(default.uri.authority.port, 5672);
        assert_eq!(default.uri.vhost, "/");
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        for (url, says) in [
            ("localhost:5672", "not a URL"),
            ("http://h:5672", "not amqp"),
            #[cfg(not(feature = "tls"))]
            ("amqps://h:5671", "`tls` feature"),
            ("amqp://", "no host"),
            ("amqp://u:p@:5672/", "no host"),
            ("amqp://h:port/", "h:port"),
            ("amqp://u:secret@/%2f", "\"amqp://u:***@/%2f\" has no host"),
            ("amqp://u:secret@h:port/", "u:***@h:port"),
        ] {
            let error = BrokerUrl::parse(url).expect_err(url).to_string();
            assert!(!error.contains("secret"), "{url}: {error}");
            assert!(error.starts_with("bad url: "), "{url}: {error}");
            assert!(error.contains(says), "{url}: {error}");
        }
    }
}
