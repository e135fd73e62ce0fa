//! The broker URL (`kafka://host:9092,host2:9092?group=billing`) and a subscription's
//! settings from configuration (the URL's query, then the mount's).

use std::time::Duration;

use ruststream_core::{Options, Setting, SubscribeError, split_query};

use crate::Group;
use crate::cluster::{Cluster, Mechanism, Sasl, Tls};
use crate::error::ConnectError;

/// The keys this broker reads.
pub(crate) const KEYS: &[&str] = &[
    "group",
    "session_timeout",
    "max_poll_interval",
    "partitions",
    "key_order",
    "sasl_mechanism",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
];

/// The keys only the URL may set: they belong to the connection, not to a mount.
pub(crate) const URL_ONLY: &[&str] = &[
    "sasl_mechanism",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
];

/// The most partitions `partitions` makes a topic with.
const MAX_PARTITIONS: i32 = 10_000;

/// The shortest and longest `session_timeout` librdkafka takes; the cluster's
/// `group.min.session.timeout.ms` and `group.max.session.timeout.ms` (6 s and 30 min
/// by default) bound it further, and a consumer outside them is refused at its join.
const SESSION_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

/// librdkafka's default session timeout (`session.timeout.ms`).
const DEFAULT_SESSION: Duration = Duration::from_secs(45);

/// The longest `max_poll_interval` librdkafka takes (`max.poll.interval.ms`, 24 h); the
/// shortest is the session timeout.
const MAX_POLL: Duration = Duration::from_secs(86_400);

/// The prefix of the consumer group of a mount that names none: `ruststream.<topic>`,
/// a group per topic, so that a service starting on one topic does not make every
/// consumer of every other topic rebalance.
pub(crate) const DEFAULT_GROUP: &str = "ruststream.";

/// A broker URL read: the cluster and the query's settings (those of a mount; the
/// connection's own, [`URL_ONLY`], are in the cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    pub(crate) cluster: Cluster,
    pub(crate) settings: Vec<Setting>,
}

/// Reads `kafka[s]://[user:password@]host:port[,host:port…][?key=value…]`; the scheme
/// may be left out of the servers after the first. `kafkas://` is TLS (the `tls`
/// feature); a user is SASL. Nothing is read from disk but `tls_ca_file`.
pub(crate) fn parse(url: &str) -> Result<Url, ConnectError> {
    let (bare, settings) = split_query(url, |_| false);
    let shown = ruststream_core::redact(&bare);
    let (scheme, rest) = match bare.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("kafka") => ("kafka", rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("kafkas") => ("kafkas", rest),
        _ => {
            return Err(ConnectError::Url(format!(
                "{shown}: not kafka:// or kafkas://"
            )));
        }
    };
    let tls = scheme == "kafkas";
    if tls && !cfg!(feature = "tls") {
        return Err(ConnectError::Url(
            "kafkas:// needs the tls feature of ruststream-kafka".into(),
        ));
    }
    let (login, rest) = match rest.rsplit_once('@') {
        Some((login, rest)) => (Some(login), rest),
        None => (None, rest),
    };
    let servers: Vec<&str> = rest
        .split(',')
        .map(|one| {
            let one = one.trim();
            let one = match one.split_once("://") {
                Some((given, host)) if given.eq_ignore_ascii_case(scheme) => host,
                _ => one,
            };
            one.trim_end_matches('/')
        })
        .collect();
    if servers
        .iter()
        .any(|one| one.is_empty() || one.contains(['/', '@']) || one.contains("://"))
    {
        return Err(ConnectError::Url(format!(
            "{shown}: want {scheme}://[user:password@]host:port[,host:port]"
        )));
    }
    let mut cluster = Cluster::plain(servers.join(","));
    if tls {
        cluster.tls = Some(Tls::default());
    }
    if let Some(login) = login {
        let (user, password) = login.split_once(':').unwrap_or((login, ""));
        let user = decode(user);
        if user.is_empty() {
            return Err(ConnectError::Url(format!("{shown}: an empty user")));
        }
        cluster.sasl = Some(Sasl {
            user,
            password: decode(password),
            mechanism: None,
        });
    }
    let (own, settings): (Vec<Setting>, Vec<Setting>) = settings
        .into_iter()
        .partition(|setting| URL_ONLY.contains(&setting.key.as_str()));
    secure(&mut cluster, &own)?;
    Ok(Url { cluster, settings })
}

/// Percent-decodes a user or a password (`+` stays a plus).
fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Applies the URL's TLS and SASL settings to `cluster`, refusing one its scheme or
/// user has no use for, and reading `tls_ca_file`.
fn secure(cluster: &mut Cluster, own: &[Setting]) -> Result<(), ConnectError> {
    let (mut cert, mut key) = (None, None);
    for setting in own {
        let value = setting.value.trim();
        match setting.key.as_str() {
            "sasl_mechanism" => {
                let Some(sasl) = cluster.sasl.as_mut() else {
                    return Err(setting.invalid("only with a user in the url").into());
                };
                let mechanism = Mechanism::named(value)
                    .ok_or_else(|| setting.invalid("PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))?;
                if !Mechanism::SPOKEN.contains(&mechanism) {
                    return Err(setting
                        .invalid("SCRAM needs the tls feature of ruststream-kafka")
                        .into());
                }
                sasl.mechanism = Some(mechanism);
            }
            key if cluster.tls.is_none() => {
                debug_assert!(key.starts_with("tls_"));
                return Err(setting.invalid("only with kafkas://").into());
            }
            "tls_ca_file" => {
                let pem = ca_pem(value)?;
                if let Some(tls) = cluster.tls.as_mut() {
                    tls.ca_pem = Some(pem);
                }
            }
            "tls_cert_file" => cert = Some(std::path::PathBuf::from(value)),
            _ => key = Some(std::path::PathBuf::from(value)),
        }
    }
    match (cert, key, cluster.tls.as_mut()) {
        (Some(cert), Some(key), Some(tls)) => tls.client = Some((cert, key)),
        (None, None, _) => {}
        _ => {
            return Err(ConnectError::Url(
                "tls_cert_file and tls_key_file go together".into(),
            ));
        }
    }
    Ok(())
}

/// The certificates of the CA file at `path`, read and checked (errors name the file).
#[cfg(feature = "tls")]
fn ca_pem(path: &str) -> Result<String, ConnectError> {
    let ca = ruststream_adapter::tls::CaFile::read(path)
        .map_err(|error| ConnectError::Tls(error.to_string()))?;
    Ok(String::from_utf8_lossy(ca.pem()).into_owned())
}

/// Without TLS there is no `kafkas://`, so no CA file to read.
#[cfg(not(feature = "tls"))]
fn ca_pem(_: &str) -> Result<String, ConnectError> {
    Err(ConnectError::Url(
        "kafkas:// needs the tls feature of ruststream-kafka".into(),
    ))
}

/// The consumer group of a mount on `topic`: its typed option, else its settings, else
/// the URL's, else `ruststream.<topic>`. An unknown key or an empty group is an error
/// naming it.
pub(crate) fn group(
    topic: &str,
    url: &[Setting],
    options: &Options,
) -> Result<String, SubscribeError> {
    let mut group = format!("{DEFAULT_GROUP}{topic}");
    for setting in url.iter().chain(options.settings()) {
        match setting.key.as_str() {
            "group" if setting.value.trim().is_empty() => {
                return Err(setting.invalid("a group name"));
            }
            "group" => group = setting.value.trim().to_owned(),
            "session_timeout" | "max_poll_interval" | "partitions" | "key_order" => {}
            key if URL_ONLY.contains(&key) => {
                return Err(setting.invalid("a setting of the broker url, not of a mount"));
            }
            _ => return Err(setting.unknown("kafka", KEYS)),
        }
    }
    Ok(options
        .get::<Group>()
        .map_or(group, |typed| typed.0.clone()))
}

/// A mount's consumer timeouts, from its settings (the mount's, else the URL's); `None`
/// keeps librdkafka's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// `session_timeout`: how long the group waits for a consumer that stopped answering
    /// (a killed process) before its partitions go to the others (the mount's delay
    /// mover's too). librdkafka's default: 45 s.
    pub(crate) session: Option<Duration>,
    /// `max_poll_interval`: how long the consumer may go without taking a record before
    /// librdkafka leaves the group (its partitions go to the others), and how long a
    /// rebalance waits for a member to join again. librdkafka's default: 5 min. A mount
    /// whose handlers all keep their deliveries longer than that takes no record
    /// meanwhile: raise it for such handlers.
    pub(crate) max_poll: Option<Duration>,
}

/// The last value of `key` in `url` then `options`, within `range`, else an error saying
/// `range_text`.
fn duration(
    url: &[Setting],
    options: &Options,
    key: &str,
    range: (Duration, Duration),
    range_text: &str,
) -> Result<Option<Duration>, SubscribeError> {
    let mut found = None;
    for setting in url.iter().chain(options.settings()) {
        if setting.key == key {
            let value = setting.duration()?;
            if value < range.0 || value > range.1 {
                return Err(setting.invalid(range_text));
            }
            found = Some(value);
        }
    }
    Ok(found)
}

/// `partitions`, the mount's setting else the URL's: where the mount's topic is missing,
/// it is made with this many partitions (and the cluster's replication), as `declare`
/// makes a queue on RabbitMQ. `None`: a missing topic stops the start, since a consumer
/// of a topic nobody made would wait for ever.
pub(crate) fn partitions(
    url: &[Setting],
    options: &Options,
) -> Result<Option<i32>, SubscribeError> {
    let mut found = None;
    for setting in url.iter().chain(options.settings()) {
        if setting.key == "partitions" {
            let n: i32 = setting.number()?;
            if !(1..=MAX_PARTITIONS).contains(&n) {
                return Err(setting.invalid(format!("from 1 to {MAX_PARTITIONS}")));
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// Whether a mount keeps key order: its [`KeyOrder`](crate::KeyOrder) option, else its
/// `key_order` setting, else the URL's (default `false`).
pub(crate) fn key_order(url: &[Setting], options: &Options) -> Result<bool, SubscribeError> {
    if options.get::<crate::KeyOrder>().is_some() {
        return Ok(true);
    }
    let mut found = false;
    for setting in url.iter().chain(options.settings()) {
        if setting.key == "key_order" {
            found = setting.flag()?;
        }
    }
    Ok(found)
}

/// A mount's [`Timeouts`]. `max_poll_interval` below the session timeout is an error
/// (librdkafka refuses such a consumer).
pub(crate) fn timeouts(url: &[Setting], options: &Options) -> Result<Timeouts, SubscribeError> {
    let session = duration(
        url,
        options,
        "session_timeout",
        SESSION_RANGE,
        "from 1s to 1h (the cluster's group.min.session.timeout.ms and \
         group.max.session.timeout.ms, 6s and 30m by default, bound it further)",
    )?;
    let floor = session.unwrap_or(DEFAULT_SESSION);
    let max_poll = duration(
        url,
        options,
        "max_poll_interval",
        (floor, MAX_POLL),
        &format!("from the session timeout ({}s) to 24h", floor.as_secs_f64()),
    )?;
    Ok(Timeouts { session, max_poll })
}

impl Timeouts {
    /// Sets them on a consumer's configuration: the session (heartbeats every third of
    /// it, librdkafka's 3 s at most) and `max.poll.interval.ms`, where given.
    pub(crate) fn apply(&self, config: &mut rdkafka::ClientConfig) {
        if let Some(timeout) = self.session {
            let heartbeat = (timeout / 3).min(Duration::from_secs(3));
            config
                .set("session.timeout.ms", timeout.as_millis().to_string())
                .set("heartbeat.interval.ms", heartbeat.as_millis().to_string());
        }
        if let Some(interval) = self.max_poll {
            config.set("max.poll.interval.ms", interval.as_millis().to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::{Options, Setting};

    use super::{Timeouts, group, key_order, parse, partitions, timeouts};
    use crate::Group;
    use crate::cluster::{Cluster, Mechanism};

    #[test]
    fn a_url_lists_servers_and_settings() {
        let url = parse("kafka://a:9092,kafka://b:9093?group=billing").expect("read");
        assert_eq!(url.cluster, Cluster::plain("a:9092,b:9093"));
        assert_eq!(url.settings[0].value, "billing");
        assert_eq!(
            parse("kafka://a:9092/").expect("read").cluster.servers(),
            "a:9092"
        );
        assert!(parse("redis://a:1").is_err());
        assert!(parse("kafka://").is_err());
    }

    #[test]
    fn a_user_is_sasl_and_its_password_is_percent_decoded() {
        let url = parse("kafka://alice:p%40ss%3Aw+rd@a:9092,b:9092?sasl_mechanism=plain&group=g")
            .expect("read");
        let sasl = url.cluster.sasl.as_ref().expect("sasl");
        assert_eq!(
            (sasl.user.as_str(), sasl.password.as_str()),
            ("alice", "p@ss:w+rd")
        );
        assert_eq!(sasl.mechanism, Some(Mechanism::Plain));
        assert_eq!(url.cluster.servers(), "a:9092,b:9092");
        assert_eq!(url.cluster.tls, None);
        let keys: Vec<&str> = url.settings.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            ["group"],
            "the connection's own settings are not a mount's"
        );
        let bare = parse("kafka://alice@a:9092").expect("no password");
        let sasl = bare.cluster.sasl.expect("sasl");
        assert_eq!((sasl.password.as_str(), sasl.mechanism), ("", None));
    }

    #[test]
    fn what_a_url_has_no_use_for_is_refused_naming_it() {
        // (url, what the error says)
        let table: &[(&str, &str)] = &[
            ("kafka://a:9092?sasl_mechanism=PLAIN", "only with a user"),
            ("kafka://u:p@a:9092?sasl_mechanism=GSSAPI", "SCRAM-SHA-512"),
            ("kafka://a:9092?tls_ca_file=/ca.pem", "only with kafkas://"),
            ("kafka://a:9092?tls_cert_file=/c.pem", "only with kafkas://"),
            ("kafka://:secret@a:9092", "an empty user"),
            ("kafka://u:p@a:9092/orders", "want kafka://"),
            ("kafka://a:9092,kafkas://b:9092", "want kafka://"),
        ];
        for (url, says) in table {
            let error = parse(url).expect_err(url).to_string();
            assert!(error.contains(says), "{url}: {error}");
            assert!(!error.contains("secret"), "{url}: {error}");
        }
        if cfg!(feature = "tls") {
            let error = parse("kafkas://a:9092?tls_cert_file=/c.pem")
                .expect_err("no key")
                .to_string();
            assert!(error.contains("go together"), "{error}");
            let error = parse("kafkas://a:9092?tls_ca_file=/nonexistent/ca.pem")
                .expect_err("no file")
                .to_string();
            assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        } else {
            for url in [
                "kafkas://a:9092",
                "kafka://u:p@a:9092?sasl_mechanism=SCRAM-SHA-256",
            ] {
                let error = parse(url).expect_err(url).to_string();
                assert!(error.contains("tls feature"), "{url}: {error}");
            }
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn kafkas_is_tls_with_a_private_ca_and_a_client_certificate() {
        let dir = std::env::temp_dir().join(format!("ruststream-kafka-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ca = dir.join("ca.pem");
        // Any well-formed certificate does: this is the file's reading, not a handshake.
        std::fs::write(&ca, TEST_CA).expect("ca");
        let url = parse(&format!(
            "kafkas://a:9093?tls_ca_file={}&tls_cert_file=/c.pem&tls_key_file=/k.pem",
            ca.display()
        ))
        .expect("read");
        let tls = url.cluster.tls.expect("tls");
        assert!(tls.ca_pem.expect("ca").contains("BEGIN CERTIFICATE"));
        assert_eq!(tls.client, Some(("/c.pem".into(), "/k.pem".into())));
        assert!(url.settings.is_empty());
        let plain_tls = parse("kafkas://a:9093").expect("system roots");
        assert_eq!(plain_tls.cluster.tls, Some(Default::default()));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A self-signed CA certificate (`openssl req -x509 -newkey ec`), test material.
    #[cfg(feature = "tls")]
    const TEST_CA: &str = include_str!("testdata/ca.pem");

    #[test]
    fn odd_urls_are_errors_or_read_never_a_panic() {
        for url in [
            "kafka://@",
            "kafka://:@h:1",
            "kafka://%ZZ:%@h:1",
            "kafka://u%FF%FE:p@h:1",
            "kafkas://u:p@",
            "kafka://,,",
            "kafka://h:1?tls_ca_file",
            "kafka://u@h:1?sasl_mechanism=",
            "kafka://u@h:1?sasl_mechanism=plain&sasl_mechanism=nope",
            "KAFKA://H:1",
            "kafka://h:1#frag?x=y",
            "kafka://ü@ß:1",
        ] {
            match parse(url) {
                Ok(read) => assert!(!read.cluster.servers().is_empty(), "{url}"),
                Err(error) => assert!(!error.to_string().is_empty(), "{url}"),
            }
        }
    }

    #[test]
    fn a_mount_cannot_set_the_connection_s_settings() {
        for key in super::URL_ONLY {
            let mut options = Options::default();
            options.configure(Setting::new(*key, "x", "env"));
            let error = group("t", &[], &options).expect_err(key).to_string();
            assert!(error.contains("broker url"), "{key}: {error}");
        }
    }

    #[test]
    fn the_typed_option_wins_over_the_mount_over_the_url() {
        let url = [Setting::new("group", "from-url", "url")];
        let mut options = Options::default();
        assert_eq!(group("t", &[], &options).expect("default"), "ruststream.t");
        assert_eq!(group("t", &url, &options).expect("url"), "from-url");
        options.configure(Setting::new("group", "from-mount", "env"));
        assert_eq!(group("t", &url, &options).expect("mount"), "from-mount");
        options.insert(Group::new("typed"));
        assert_eq!(group("t", &url, &options).expect("typed"), "typed");
        let error = group(
            "t",
            &[Setting::new("prefetch", "1", "url")],
            &Options::default(),
        )
        .expect_err("unknown");
        assert!(error.to_string().contains("group"), "{error}");
    }

    #[test]
    fn a_session_timeout_is_read_from_the_mount_over_the_url() {
        use std::time::Duration;
        let session = |url: &[Setting], options: &Options| {
            timeouts(url, options).map(|timeouts| timeouts.session)
        };
        let url = [Setting::new("session_timeout", "10s", "url")];
        let mut options = Options::default();
        assert_eq!(session(&[], &options).expect("none"), None);
        assert_eq!(
            session(&url, &options).expect("url"),
            Some(Duration::from_secs(10))
        );
        options.configure(Setting::new("session_timeout", "6s", "env"));
        assert_eq!(
            session(&url, &options).expect("mount"),
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            group("t", &url, &options).expect("not unknown"),
            "ruststream.t"
        );
        for bad in ["500ms", "2h", "soon"] {
            let error = timeouts(
                &[Setting::new("session_timeout", bad, "url")],
                &Options::default(),
            )
            .expect_err(bad);
            assert!(error.to_string().contains("session_timeout"), "{error}");
        }
    }

    #[test]
    fn a_max_poll_interval_is_at_least_the_session_and_reaches_librdkafka() {
        use std::time::Duration;
        let read = |settings: &[(&str, &str)]| {
            let url: Vec<Setting> = settings
                .iter()
                .map(|(key, value)| Setting::new(*key, *value, "url"))
                .collect();
            timeouts(&url, &Options::default())
        };
        // (settings, the max_poll_interval read, or None for an error)
        type Row = (
            &'static [(&'static str, &'static str)],
            Option<Option<Duration>>,
        );
        let table: &[Row] = &[
            (&[], Some(None)),
            (
                &[("max_poll_interval", "30m")],
                Some(Some(Duration::from_secs(1800))),
            ),
            // Below librdkafka's default session (45 s): refused.
            (&[("max_poll_interval", "30s")], None),
            // With a shorter session, 30 s is fine.
            (
                &[("session_timeout", "10s"), ("max_poll_interval", "30s")],
                Some(Some(Duration::from_secs(30))),
            ),
            (&[("max_poll_interval", "25h")], None),
            (&[("max_poll_interval", "later")], None),
        ];
        for (settings, expected) in table {
            match (read(settings), expected) {
                (Ok(got), Some(max_poll)) => assert_eq!(got.max_poll, *max_poll, "{settings:?}"),
                (Err(error), None) => {
                    assert!(error.to_string().contains("max_poll_interval"), "{error}");
                }
                (got, _) => panic!("{settings:?}: {got:?}"),
            }
        }
        let mut config = rdkafka::ClientConfig::new();
        Timeouts {
            session: Some(Duration::from_secs(10)),
            max_poll: Some(Duration::from_secs(1800)),
        }
        .apply(&mut config);
        assert_eq!(config.get("max.poll.interval.ms"), Some("1800000"));
        assert_eq!(config.get("session.timeout.ms"), Some("10000"));
        assert_eq!(config.get("heartbeat.interval.ms"), Some("3000"));
    }

    #[test]
    fn partitions_are_a_whole_number_the_mount_sets_over_the_url() {
        let url = [Setting::new("partitions", "3", "url")];
        let mut options = Options::default();
        assert_eq!(partitions(&[], &options).expect("none"), None);
        assert_eq!(partitions(&url, &options).expect("url"), Some(3));
        options.configure(Setting::new("partitions", "6", "env"));
        assert_eq!(partitions(&url, &options).expect("mount"), Some(6));
        for bad in ["0", "-1", "three", "10001"] {
            let error = partitions(
                &[Setting::new("partitions", bad, "url")],
                &Options::default(),
            )
            .expect_err(bad);
            assert!(error.to_string().contains("partitions"), "{bad}: {error}");
        }
        assert_eq!(
            group("t", &url, &Options::default()).expect("a key this broker reads"),
            "ruststream.t"
        );
    }

    #[test]
    fn key_order_is_off_unless_the_option_the_mount_or_the_url_sets_it() {
        let mut options = Options::default();
        assert!(!key_order(&[], &options).expect("default"));
        let url = [Setting::new("key_order", "true", "url")];
        assert!(key_order(&url, &options).expect("url"));
        options.configure(Setting::new("key_order", "off", "env"));
        assert!(!key_order(&url, &options).expect("the mount over the url"));
        options.insert(crate::KeyOrder);
        assert!(key_order(&url, &options).expect("the typed option"));
        let bad = [Setting::new("key_order", "sometimes", "url")];
        let error = key_order(&bad, &Options::default()).expect_err("not a flag");
        assert!(error.to_string().contains("key_order"), "{error}");
        assert_eq!(
            group("t", &url, &Options::default()).expect("a key this broker reads"),
            "ruststream.t"
        );
    }
}
