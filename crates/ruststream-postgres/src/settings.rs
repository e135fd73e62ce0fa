//! The adapter's settings: the broker URL's query (`postgres://h/db?schema=jobs&lease=30s`)
//! and a mount's settings (`RUSTSTREAM_MOUNT__<ADDRESS>__LEASE=1m`).

use std::time::Duration;

use ruststream_core::{Options, Setting, SubscribeError};

/// The keys of the connection, read from the URL only.
const BROKER_KEYS: &[&str] = &["schema", "max_connections"];

/// The keys of a subscription, from the URL (every mount) or a mount's settings.
const MOUNT_KEYS: &[&str] = &["lease", "batch", "poll", "archive"];

/// Every key the adapter reads.
const KEYS: &[&str] = &[
    "schema",
    "max_connections",
    "lease",
    "batch",
    "poll",
    "archive",
];

/// The query keys the PostgreSQL client reads itself; they stay in the URL.
pub(crate) fn client_key(key: &str) -> bool {
    matches!(
        key,
        "sslmode"
            | "sslrootcert"
            | "sslcert"
            | "sslkey"
            | "host"
            | "hostaddr"
            | "port"
            | "dbname"
            | "user"
            | "password"
            | "application_name"
            | "options"
    )
}

/// What a connection's settings say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Connection {
    /// The schema holding the adapter's tables.
    pub(crate) schema: String,
    /// The pool's size.
    pub(crate) max_connections: u32,
    /// The subscriptions' settings the URL gives.
    pub(crate) claim: Claim,
}

/// How a subscription claims its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    /// How long a claimed row stays invisible to other consumers unless extended.
    pub(crate) lease: Duration,
    /// The most rows one claim takes (`None`: the mount's in-flight count).
    pub(crate) batch: Option<usize>,
    /// How often a consumer looks without a notification (the fallback).
    pub(crate) poll: Duration,
    /// Settled rows are moved to the archive table instead of deleted.
    pub(crate) archive: bool,
}

impl Default for Claim {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            batch: None,
            poll: DEFAULT_POLL,
            archive: false,
        }
    }
}

/// How long a claimed row stays hidden from other consumers unless its consumer extends
/// it (`lease=`): how long the rows of a killed consumer wait before another takes them.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a consumer looks for rows without a notification (`poll=`): a row whose
/// lease ran out is seen at the next look.
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);

/// The schema of the adapter's tables when the URL names none (`schema=`).
pub const DEFAULT_SCHEMA: &str = "ruststream";

/// Reads the URL's settings: an unknown key or a bad value is an error naming it.
pub(crate) fn connection(settings: &[Setting]) -> Result<Connection, SubscribeError> {
    let mut connection = Connection {
        schema: DEFAULT_SCHEMA.to_owned(),
        max_connections: 10,
        claim: Claim::default(),
    };
    for setting in settings {
        match setting.key.as_str() {
            "schema" => connection.schema = schema(setting)?,
            "max_connections" => match setting.number()? {
                0 => return Err(setting.invalid("expected at least 1")),
                n => connection.max_connections = n,
            },
            key if MOUNT_KEYS.contains(&key) => claim_one(&mut connection.claim, setting)?,
            _ => return Err(setting.unknown("postgres", KEYS)),
        }
    }
    Ok(connection)
}

/// A subscription's claim: the URL's, then the mount's settings (a later key wins).
pub(crate) fn claim(base: Claim, options: &Options) -> Result<Claim, SubscribeError> {
    let mut claim = base;
    for setting in options.settings() {
        if BROKER_KEYS.contains(&setting.key.as_str()) {
            return Err(setting.invalid("a setting of the connection: give it in the url"));
        }
        if !MOUNT_KEYS.contains(&setting.key.as_str()) {
            return Err(setting.unknown("postgres", MOUNT_KEYS));
        }
        claim_one(&mut claim, setting)?;
    }
    Ok(claim)
}

fn claim_one(claim: &mut Claim, setting: &Setting) -> Result<(), SubscribeError> {
    match setting.key.as_str() {
        "lease" => match setting.duration()? {
            lease if lease < Duration::from_secs(1) => {
                return Err(setting.invalid("a lease is at least 1s"));
            }
            lease => claim.lease = lease,
        },
        "batch" => match setting.number()? {
            0 => return Err(setting.invalid("expected at least 1")),
            n => claim.batch = Some(n),
        },
        "poll" => match setting.duration()? {
            poll if poll < Duration::from_millis(10) => {
                return Err(setting.invalid("a poll is at least 10ms"));
            }
            poll => claim.poll = poll,
        },
        "archive" => claim.archive = setting.flag()?,
        _ => return Err(setting.unknown("postgres", MOUNT_KEYS)),
    }
    Ok(())
}

/// A schema name: lower-case letters, digits and `_`, not starting with a digit, at most
/// 48 characters (it also names the notification channel).
fn schema(setting: &Setting) -> Result<String, SubscribeError> {
    let name = setting.value.as_str();
    if schema_fits(name) {
        Ok(name.to_owned())
    } else {
        Err(setting.invalid(SCHEMA_RULE))
    }
}

/// What a schema name must be, for errors.
pub(crate) const SCHEMA_RULE: &str = "expected lower-case letters, digits and _ (at most 48)";

/// Whether `name` may name the adapter's schema (see [`schema`]).
pub(crate) fn schema_fits(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(pairs: &[(&str, &str)]) -> Vec<Setting> {
        pairs
            .iter()
            .map(|(k, v)| Setting::new(*k, *v, "url"))
            .collect()
    }

    #[test]
    fn the_defaults_and_the_url_and_the_mount() {
        let base = connection(&[]).expect("defaults");
        assert_eq!(base.schema, "ruststream");
        assert_eq!(base.claim, Claim::default());
        let set =
            connection(&url(&[("schema", "jobs"), ("lease", "2m"), ("batch", "8")])).expect("read");
        assert_eq!(set.schema, "jobs");
        assert_eq!(set.claim.lease, Duration::from_secs(120));
        let mut mount = Options::default();
        mount.configure(Setting::new("lease", "5s", "env"));
        let claimed = claim(set.claim, &mount).expect("mount");
        assert_eq!(
            (claimed.lease, claimed.batch),
            (Duration::from_secs(5), Some(8))
        );
        assert!(!claimed.archive, "rows are deleted by default");
        mount.configure(Setting::new("archive", "true", "env"));
        assert!(claim(set.claim, &mount).expect("mount").archive);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let error = connection(&url(&[("prefetch", "8")])).expect_err("unknown");
        assert!(error.to_string().contains("known: schema"), "{error}");
        for (key, value) in [
            ("schema", "Jobs; drop"),
            ("lease", "10ms"),
            ("batch", "0"),
            ("archive", "perhaps"),
        ] {
            assert!(connection(&url(&[(key, value)])).is_err(), "{key}={value}");
        }
        let mut mount = Options::default();
        mount.configure(Setting::new("schema", "x", "env"));
        let error = claim(Claim::default(), &mount).expect_err("broker key");
        assert!(error.to_string().contains("url"), "{error}");
    }
}
