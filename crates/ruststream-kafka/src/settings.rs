//! The broker URL (`kafka://host:9092,host2:9092?group=billing`) and a subscription's
//! settings from configuration (the URL's query, then the mount's).

use std::time::Duration;

use ruststream_core::{Options, Setting, SubscribeError, split_query};

use crate::Group;
use crate::error::ConnectError;

/// The keys this broker reads.
pub(crate) const KEYS: &[&str] = &[
    "group",
    "session_timeout",
    "max_poll_interval",
    "partitions",
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

/// A broker URL read: the bootstrap servers and the query's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    /// `host:port`, comma-separated, as librdkafka's `bootstrap.servers`.
    pub(crate) servers: String,
    pub(crate) settings: Vec<Setting>,
}

/// Reads `kafka://host:port[,host:port…][?key=value…]`; `kafka://` may be left out of
/// the servers after the first.
pub(crate) fn parse(url: &str) -> Result<Url, ConnectError> {
    let (url, settings) = split_query(url, |_| false);
    let rest = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("kafka") => rest,
        _ => return Err(ConnectError::Url(format!("{url}: not kafka://"))),
    };
    let servers: Vec<&str> = rest
        .split(',')
        .map(|one| {
            let one = one.trim();
            let one = one.split_once("://").map_or(one, |(_, host)| host);
            one.trim_end_matches('/')
        })
        .collect();
    if servers
        .iter()
        .any(|one| one.is_empty() || one.contains(['/', '@']))
    {
        return Err(ConnectError::Url(format!(
            "{url}: want kafka://host:port[,host:port]"
        )));
    }
    Ok(Url {
        servers: servers.join(","),
        settings,
    })
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
            "session_timeout" | "max_poll_interval" | "partitions" => {}
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

    use super::{Timeouts, group, parse, partitions, timeouts};
    use crate::Group;

    #[test]
    fn a_url_lists_servers_and_settings() {
        let url = parse("kafka://a:9092,kafka://b:9093?group=billing").expect("read");
        assert_eq!(url.servers, "a:9092,b:9093");
        assert_eq!(url.settings[0].value, "billing");
        assert_eq!(parse("kafka://a:9092/").expect("read").servers, "a:9092");
        assert!(parse("redis://a:1").is_err());
        assert!(parse("kafka://").is_err());
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
}
