//! How an adapter is opened from a URL: the schemes it answers, the connection, and what
//! a service's description (its AsyncAPI document) says of the server.

use std::sync::Arc;

use crate::{BoxFuture, Broker};

/// An adapter's entry point by URL: the schemes it answers, how it connects, and how it
/// describes a server.
///
/// Each adapter implements it once and owns its URL forms (its schemes, the names
/// ruststream gives them, what its query reads). The `ruststream` crate keeps a list of
/// the connectors its features build in and opens a URL with the one whose
/// [`schemes`](Self::schemes) name it; the runtime knows none of them.
///
/// ```
/// use std::sync::Arc;
/// use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};
///
/// struct Nowhere;
///
/// const SCHEMES: &[Scheme] = &[Scheme::plain("nowhere"), Scheme::tls("nowheres")];
///
/// impl Connector for Nowhere {
///     fn name(&self) -> &'static str { "nowhere" }
///     fn schemes(&self) -> &'static [Scheme] { SCHEMES }
///     fn tls(&self) -> bool { false }
///     fn connect<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>> {
///         Box::pin(async move { Err(ConnectFailure::from(format!("{url}: nothing there"))) })
///     }
///     fn server(&self, url: &str) -> Result<Server, String> {
///         Server::from_url(url, "nowhere", None, "a broker that is not there")
///     }
/// }
///
/// let server = Nowhere.server("nowhere://guest:secret@h:1/v").unwrap();
/// assert_eq!((server.host.as_str(), server.pathname.as_str()), ("h:1", "/v"));
/// ```
pub trait Connector: Send + Sync + 'static {
    /// The broker's name, as its [`Broker::name`] gives it (`redis`, `amqp`, …).
    fn name(&self) -> &'static str;

    /// The URL schemes it opens, lower case, without `://`.
    fn schemes(&self) -> &'static [Scheme];

    /// Whether this build of the adapter speaks TLS (its schemes marked
    /// [`Scheme::tls`] open only then).
    fn tls(&self) -> bool;

    /// Opens the broker `url` names; its scheme is one of [`schemes`](Self::schemes).
    fn connect<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>>;

    /// What a description of the service says of the server `url` names (no connection
    /// is made): its host, path, protocol.
    fn server(&self, url: &str) -> Result<Server, String>;
}

/// A URL scheme a [`Connector`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// The scheme, lower case, without `://` (`rediss`).
    pub name: &'static str,
    /// Whether it needs TLS (the adapter's TLS build).
    pub tls: bool,
}

impl Scheme {
    /// A scheme without TLS.
    pub const fn plain(name: &'static str) -> Self {
        Self { name, tls: false }
    }

    /// A scheme that needs TLS.
    pub const fn tls(name: &'static str) -> Self {
        Self { name, tls: true }
    }
}

/// Why a [`Connector`] did not open its broker: the adapter's own error, as text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConnectFailure(pub String);

impl From<String> for ConnectFailure {
    fn from(reason: String) -> Self {
        Self(reason)
    }
}

impl ConnectFailure {
    /// The failure of `error`, by its message.
    pub fn of(error: &dyn std::fmt::Display) -> Self {
        Self(error.to_string())
    }
}

/// What [`Connector::connect`] returns for an adapter's own `connect` result: the
/// broker type-erased, or its error as a [`ConnectFailure`].
pub fn opened<B: Broker, E: std::fmt::Display>(
    result: Result<B, E>,
) -> Result<Arc<dyn Broker>, ConnectFailure> {
    match result {
        Ok(broker) => Ok(Arc::new(broker)),
        Err(error) => Err(ConnectFailure::of(&error)),
    }
}

/// A broker's server as a description of the service gives it (an AsyncAPI server).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// `host:port` (`localhost` for a broker in the process).
    pub host: String,
    /// The URL's path (a virtual host, a database), empty if none.
    pub pathname: String,
    /// The protocol, as AsyncAPI names it (`amqp`, `redis`, `nats`, …).
    pub protocol: &'static str,
    /// The protocol's version where the scheme fixes one (`1.0`, `0.9.1`).
    pub protocol_version: Option<&'static str>,
    /// What the server is, in a few words.
    pub description: &'static str,
    /// The URL without its query and fragment, the password replaced by `***`.
    pub url: String,
    /// The further nodes a cluster URL names (`host:port` each).
    pub nodes: Vec<String>,
}

impl Server {
    /// The server of `url` (`scheme://[user[:password]@]host[/path][?query]`): its host
    /// and path read from the URL, the rest as given. An error says what is missing.
    pub fn from_url(
        url: &str,
        protocol: &'static str,
        protocol_version: Option<&'static str>,
        description: &'static str,
    ) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "no scheme".to_owned())?;
        let without_query = rest.split(['?', '#']).next().unwrap_or_default();
        let (authority, path) = match without_query.find('/') {
            Some(at) => without_query.split_at(at),
            None => (without_query, ""),
        };
        let host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        if host.is_empty() {
            return Err("no host".to_owned());
        }
        Ok(Self {
            host: host.to_owned(),
            pathname: if path == "/" {
                String::new()
            } else {
                path.to_owned()
            },
            protocol,
            protocol_version,
            description,
            url: redact(&format!(
                "{}://{without_query}",
                scheme.to_ascii_lowercase()
            )),
            nodes: Vec::new(),
        })
    }
}

/// `url` with the password of its user information, if any, replaced by `***`.
///
/// ```
/// assert_eq!(
///     ruststream_core::redact("amqp://guest:secret@h:5672/v"),
///     "amqp://guest:***@h:5672/v"
/// );
/// ```
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None if !user_info.is_empty() => format!("{scheme}://***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Server, redact};

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("amqp://guest:secret@h:5672/v"),
            "amqp://guest:***@h:5672/v"
        );
        assert_eq!(redact("redis://:secret@h:6379"), "redis://:***@h:6379");
        assert_eq!(redact("rediss://token@h"), "rediss://***@h");
        assert_eq!(redact("redis://h:6379/0?x=a@b"), "redis://h:6379/0?x=a@b");
        assert_eq!(redact("memory://"), "memory://");
        assert_eq!(redact("no scheme"), "no scheme");
    }

    #[test]
    fn a_server_is_read_from_its_url() {
        let server = Server::from_url(
            "AMQP://guest:s3cret@127.0.0.1:5673/vhost?credit=10#x",
            "amqp",
            Some("1.0"),
            "AMQP 1.0",
        )
        .expect("server");
        assert_eq!(server.host, "127.0.0.1:5673");
        assert_eq!(server.pathname, "/vhost");
        assert_eq!(server.url, "amqp://guest:***@127.0.0.1:5673/vhost");
        assert_eq!(server.protocol_version, Some("1.0"));
        let root = Server::from_url("redis://h:6379/", "redis", None, "Redis").expect("server");
        assert_eq!(root.pathname, "");
        assert_eq!(
            Server::from_url("redis://", "redis", None, "Redis"),
            Err("no host".to_owned())
        );
        assert_eq!(
            Server::from_url("h:6379", "redis", None, "Redis"),
            Err("no scheme".to_owned())
        );
    }
}
