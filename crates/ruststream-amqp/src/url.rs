//! The connection URL: `amqp://user:pass@host:port/vhost`.

use crate::error::ConnectError;

/// Where and how to connect, read from a URL.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BrokerUrl {
    /// `amqp` or `amqps`.
    pub(crate) scheme: &'static str,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `None`: SASL ANONYMOUS.
    pub(crate) credentials: Option<(String, String)>,
    /// The virtual host, sent as the open frame's hostname `vhost:NAME` (RabbitMQ).
    pub(crate) vhost: Option<String>,
}

impl std::fmt::Debug for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password.
        f.debug_struct("BrokerUrl")
            .field("scheme", &self.scheme)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("vhost", &self.vhost)
            .finish()
    }
}

impl BrokerUrl {
    /// Parses `amqp://[user[:pass]@]host[:port][/vhost]`; `amqps://` needs the `tls` feature.
    pub(crate) fn parse(url: &str) -> Result<Self, ConnectError> {
        let bad = |why: &str| ConnectError::BadUrl(why.to_owned());
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("missing scheme"))?;
        let (scheme, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "amqp" => ("amqp", 5672),
            "amqps" if cfg!(feature = "tls") => ("amqps", 5671),
            "amqps" => return Err(bad("amqps needs the `tls` feature")),
            _ => return Err(bad("scheme must be amqp or amqps")),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let credentials = match userinfo {
            None => None,
            Some(u) => {
                let (user, pass) = u.split_once(':').unwrap_or((u, ""));
                Some((decode(user)?, decode(pass)?))
            }
        };
        let (host, port) = split_host_port(hostport)?;
        if host.is_empty() {
            return Err(bad("missing host"));
        }
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
            None => default_port,
        };
        let path = path.split('?').next().unwrap_or("");
        let vhost = match path.strip_prefix('/') {
            None | Some("") => None,
            Some(v) => Some(decode(v)?),
        };
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
            credentials,
            vhost,
        })
    }
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<&str>), ConnectError> {
    if let Some(rest) = hostport.strip_prefix('[') {
        // [::1]:5672
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| ConnectError::BadUrl("unclosed ipv6 bracket".into()))?;
        return Ok((host, after.strip_prefix(':')));
    }
    Ok(match hostport.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (hostport, None),
    })
}

/// Percent-decodes one URL component.
pub(crate) fn decode(s: &str) -> Result<String, ConnectError> {
    ruststream_rabbitmq::percent::decode(s).map_err(|e| ConnectError::BadUrl(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_url() {
        let u = BrokerUrl::parse("amqp://guest:gu%40st@127.0.0.1:5673/my%2Fvh").unwrap();
        assert_eq!(u.scheme, "amqp");
        assert_eq!(u.host, "127.0.0.1");
        assert_eq!(u.port, 5673);
        assert_eq!(u.credentials, Some(("guest".into(), "gu@st".into())));
        assert_eq!(u.vhost.as_deref(), Some("my/vh"));
    }

    #[test]
    fn defaults_to_anonymous_and_port_5672() {
        let u = BrokerUrl::parse("amqp://localhost").unwrap();
        assert_eq!(u.port, 5672);
        assert_eq!(u.credentials, None);
        assert_eq!(u.vhost, None);
        let u = BrokerUrl::parse("amqp://[::1]:5673/").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.port, 5673);
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(BrokerUrl::parse("http://x").is_err());
        assert!(BrokerUrl::parse("localhost:5672").is_err());
        assert!(BrokerUrl::parse("amqp://:5672").is_err());
        assert!(BrokerUrl::parse("amqp://h:notaport").is_err());
        assert!(BrokerUrl::parse("amqp://u:%zz@h").is_err());
        #[cfg(not(feature = "tls"))]
        assert!(BrokerUrl::parse("amqps://h").is_err());
    }

    #[test]
    fn debug_hides_password() {
        let u = BrokerUrl::parse("amqp://guest:secret@h").unwrap();
        assert!(!format!("{u:?}").contains("secret"));
    }
}
