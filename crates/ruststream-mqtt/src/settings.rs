//! The broker URL (`mqtt://user:pass@host:1883?client_id=billing&session_expiry=2h`) and
//! what a mount's subscription is from the URL's settings and the mount's own.

use std::time::Duration;

use ruststream_core::{Options, Setting, SubscribeError, split_query};

use crate::error::ConnectError;
use crate::options::{Group, SessionExpiry};
use crate::topic;

/// The keys this broker reads.
pub(crate) const KEYS: &[&str] = &[
    "client_id",
    "group",
    "shared",
    "session_expiry",
    "keep_alive",
    "unrouted",
    "tls_ca_file",
];

/// The keys only the URL may set (they belong to the connection, not a mount).
const URL_ONLY: &[&str] = &["keep_alive", "unrouted", "tls_ca_file"];

/// The shared-subscription group of a mount that names none.
pub(crate) const DEFAULT_GROUP: &str = "ruststream";

/// How long the broker keeps a mount's session after its connection goes (default).
pub(crate) const DEFAULT_SESSION_EXPIRY: Duration = Duration::from_secs(3600);

/// The keep-alive of every connection (default).
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// A broker URL read: where to connect, as whom, and the query's settings.
#[derive(Clone, Debug)]
pub(crate) struct Url {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) login: Option<(String, String)>,
    pub(crate) keep_alive: Duration,
    /// Whether a publish nobody subscribes to is taken as done (`unrouted=accept`).
    pub(crate) accept_unrouted: bool,
    /// `mqtts://`: TLS, with the roots of `tls_ca_file` added to the webpki roots.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) tls: bool,
    pub(crate) tls_ca_file: Option<std::path::PathBuf>,
    /// TCP, or TLS with its rustls configuration.
    pub(crate) transport: Net,
    pub(crate) settings: Vec<Setting>,
}

/// How a connection is carried (rumqttc's `Transport`, which has no `Debug`).
#[derive(Clone)]
pub(crate) struct Net(pub(crate) rumqttc::Transport);

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            rumqttc::Transport::Tcp => "tcp",
            _ => "tls",
        })
    }
}

/// Reads `mqtt://[user[:password]@]host[:port][?key=value…]`.
pub(crate) fn parse(url: &str) -> Result<Url, ConnectError> {
    let (bare, settings) = split_query(url, |_| false);
    let (tls, rest) = match bare.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mqtt") => (false, rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mqtts") => (true, rest),
        _ => {
            return Err(ConnectError::Url(format!(
                "{bare}: not mqtt:// or mqtts://"
            )));
        }
    };
    if tls && !cfg!(feature = "tls") {
        return Err(ConnectError::Url(
            "mqtts:// needs the tls feature of ruststream-mqtt".into(),
        ));
    }
    let rest = rest.trim_end_matches('/');
    let (login, hostport) = match rest.rsplit_once('@') {
        Some((login, hostport)) => {
            let (user, password) = login.split_once(':').unwrap_or((login, ""));
            (Some((user.to_owned(), password.to_owned())), hostport)
        }
        None => (None, rest),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((host, port)) => {
            let port = port
                .parse::<u16>()
                .map_err(|_| ConnectError::Url(format!("port {port:?}: not a port number")))?;
            (host, port)
        }
        None if tls => (hostport, 8883),
        None => (hostport, 1883),
    };
    if host.is_empty() || host.contains('/') {
        return Err(ConnectError::Url(format!(
            "{}: want mqtt://host[:port]",
            ruststream_core::redact(&bare)
        )));
    }
    let mut parsed = Url {
        host: host.trim_matches(['[', ']']).to_owned(),
        port,
        login,
        keep_alive: DEFAULT_KEEP_ALIVE,
        accept_unrouted: false,
        tls,
        tls_ca_file: None,
        transport: Net(rumqttc::Transport::Tcp),
        settings,
    };
    for setting in &parsed.settings {
        match setting.key.as_str() {
            "keep_alive" => {
                let d = setting.duration().map_err(ConnectError::from)?;
                if d < Duration::from_secs(1) || d > Duration::from_secs(u64::from(u16::MAX)) {
                    return Err(setting.invalid("between 1s and 65535s").into());
                }
                parsed.keep_alive = d;
            }
            "tls_ca_file" if !tls => {
                return Err(setting.invalid("only with mqtts://").into());
            }
            "tls_ca_file" => parsed.tls_ca_file = Some(setting.value.trim().into()),
            "unrouted" => {
                parsed.accept_unrouted = setting.choice(&["error", "accept"])? == "accept";
            }
            _ => {}
        }
    }
    #[cfg(feature = "tls")]
    if parsed.tls {
        parsed.transport = Net(crate::tls::transport(parsed.tls_ca_file.as_deref())?);
    }
    // Every other key is checked as a mount would read it.
    mounted("check", &parsed.settings, &Options::default())?;
    Ok(parsed)
}

/// What one mount's subscription is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mounted {
    /// The client id of the subscription's own connection (its session).
    pub(crate) client_id: String,
    /// The shared-subscription group; `None` subscribes the filter itself.
    pub(crate) group: Option<String>,
    pub(crate) session_expiry: Duration,
}

impl Mounted {
    /// The filter to subscribe: `$share/<group>/<filter>`, or the filter.
    pub(crate) fn filter(&self, filter: &str) -> String {
        match &self.group {
            Some(group) => format!("$share/{group}/{filter}"),
            None => filter.to_owned(),
        }
    }
}

/// A mount on `filter`: the URL's settings, then the mount's, then its typed options.
/// An unknown key or a bad value is an error naming it.
pub(crate) fn mounted(
    filter: &str,
    url: &[Setting],
    options: &Options,
) -> Result<Mounted, SubscribeError> {
    let mut prefix = None;
    let mut own_id = None;
    let mut group = Some(DEFAULT_GROUP.to_owned());
    let mut session_expiry = DEFAULT_SESSION_EXPIRY;
    let from_url = url.iter().map(|s| (s, true));
    let from_mount = options.settings().iter().map(|s| (s, false));
    for (setting, is_url) in from_url.chain(from_mount) {
        let value = setting.value.trim();
        match setting.key.as_str() {
            "client_id" if !valid_client_id(value) => {
                return Err(setting.invalid("letters, digits, '.', '_' or '-', at most 64"));
            }
            "client_id" if is_url => prefix = Some(value.to_owned()),
            "client_id" => own_id = Some(value.to_owned()),
            "group" => group = Some(valid_group(value).map_err(|why| setting.invalid(why))?),
            "shared" if !setting.flag()? => group = None,
            "shared" => group = group.or_else(|| Some(DEFAULT_GROUP.to_owned())),
            "session_expiry" => session_expiry = expiry(setting.duration()?, setting)?,
            key if is_url && URL_ONLY.contains(&key) => {}
            key if URL_ONLY.contains(&key) => {
                return Err(setting.invalid("a setting of the broker url, not of a mount"));
            }
            _ => return Err(setting.unknown("mqtt", KEYS)),
        }
    }
    if let Some(typed) = options.get::<Group>() {
        group = typed.0.clone();
        if let Some(name) = &group {
            valid_group(name).map_err(|why| SubscribeError::BadOption(format!("group: {why}")))?;
        }
    }
    if let Some(typed) = options.get::<SessionExpiry>() {
        let setting = Setting::new("session_expiry", format!("{:?}", typed.0), "option");
        session_expiry = expiry(typed.0, &setting)?;
    }
    let client_id = own_id.unwrap_or_else(|| {
        let base = prefix.unwrap_or_else(|| format!("ruststream-{}", host_name()));
        let identity = format!("{}|{filter}", group.as_deref().unwrap_or(""));
        format!("{base}-{:08x}", fnv(identity.as_bytes()) as u32)
    });
    Ok(Mounted {
        client_id,
        group,
        session_expiry,
    })
}

/// The client id of the session a mount on `filter` with the default options has, on a
/// broker opened with `url` (its `client_id`, else `ruststream-<host name>`, then a hash
/// of the group and the filter): where the broker keeps what that mount has not taken.
/// Operators and tools that end a service's sessions ask for it here.
///
/// ```
/// let id = ruststream_mqtt::session_id("mqtt://127.0.0.1:1883?client_id=billing-1", "orders")
///     .expect("a good url");
/// assert!(id.starts_with("billing-1-"));
/// ```
///
/// # Errors
///
/// A URL the adapter would refuse, as [`MqttBroker::connect`](crate::MqttBroker::connect)
/// does.
pub fn session_id(url: &str, filter: &str) -> Result<String, crate::ConnectError> {
    let parsed = parse(url)?;
    Ok(mounted(filter, &parsed.settings, &Options::default())?.client_id)
}

/// A session expiry MQTT can say (whole seconds, at most `u32::MAX`), and not zero.
fn expiry(value: Duration, setting: &Setting) -> Result<Duration, SubscribeError> {
    if value < Duration::from_secs(1) {
        return Err(setting
            .invalid("at least 1s (0 ends the session at each disconnect, losing what it held)"));
    }
    if value.as_secs() > u64::from(u32::MAX) {
        return Err(setting.invalid("at most 4294967295s"));
    }
    Ok(value)
}

fn valid_client_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A share name: not empty, no `/`, `+` or `#` (MQTT 5 §4.8.2).
pub(crate) fn valid_group(name: &str) -> Result<String, &'static str> {
    if name.is_empty() || name.contains(['/', '+', '#']) || !topic::printable(name) {
        return Err("a group name without '/', '+' or '#'");
    }
    Ok(name.to_owned())
}

/// This machine's name, for default client ids (`HOSTNAME`, `/etc/hostname`, `local`),
/// kept to the characters a client id takes.
fn host_name() -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(32)
        .collect();
    if name.is_empty() {
        "local".into()
    } else {
        name
    }
}

/// FNV-1a: a hash that stays the same across builds and Rust versions (client ids must).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
