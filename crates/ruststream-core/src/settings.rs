//! Settings from configuration: a subscription's options as text keys and values.
//!
//! Typed options ([`Options::insert`](crate::Options::insert)) are what a service's code
//! says; settings are what its configuration says (a broker URL's query, a per-mount
//! table in the environment). Each adapter reads the keys it knows from
//! [`Options::settings`](crate::Options::settings) and refuses, at subscribe, a key it
//! does not know or a value it cannot read, with an error that names the setting and
//! where it came from.

use std::fmt;
use std::time::Duration;

use crate::SubscribeError;

/// One configured setting: a key, its value, and where it came from.
///
/// ```
/// use std::time::Duration;
/// use ruststream_core::Setting;
///
/// let setting = Setting::new("min_idle", "30s", "RUSTSTREAM_MOUNT__ORDERS__MIN_IDLE");
/// assert_eq!(setting.duration().ok(), Some(Duration::from_secs(30)));
/// let bad = Setting::new("credit", "many", "url");
/// assert_eq!(
///     bad.number::<u32>().unwrap_err().to_string(),
///     "bad option: setting credit=\"many\" (url): expected a whole number"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The key, lower case, words joined by `_` (`form`, `min_idle`).
    pub key: String,
    /// The value as written.
    pub value: String,
    /// Where it came from, for errors: `url`, an environment variable's name.
    pub origin: String,
}

impl Setting {
    /// A setting; the key is lower-cased and `-` becomes `_`.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        origin: impl Into<String>,
    ) -> Self {
        Self {
            key: normalize(&key.into()),
            value: value.into(),
            origin: origin.into(),
        }
    }

    /// The error for this setting: its key, value and origin, and `why`.
    pub fn invalid(&self, why: impl fmt::Display) -> SubscribeError {
        SubscribeError::BadOption(format!("setting {self}: {why}"))
    }

    /// The error for a key the broker does not know; `known` lists the keys it does.
    pub fn unknown(&self, broker: &str, known: &[&str]) -> SubscribeError {
        if known.is_empty() {
            return self.invalid(format_args!(
                "unknown key for the {broker} broker (it reads no settings)"
            ));
        }
        self.invalid(format_args!(
            "unknown key for the {broker} broker (known: {})",
            known.join(", ")
        ))
    }

    /// The value as one of `choices`, compared in lower case with `-` read as `_`.
    pub fn choice<'a>(&self, choices: &[&'a str]) -> Result<&'a str, SubscribeError> {
        let value = normalize(&self.value);
        choices
            .iter()
            .find(|choice| **choice == value)
            .copied()
            .ok_or_else(|| self.invalid(format_args!("expected one of {}", choices.join(", "))))
    }

    /// The value as a whole number.
    pub fn number<T: std::str::FromStr>(&self) -> Result<T, SubscribeError> {
        self.value
            .trim()
            .parse()
            .map_err(|_| self.invalid("expected a whole number"))
    }

    /// The value as `true` or `false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    pub fn flag(&self) -> Result<bool, SubscribeError> {
        match normalize(&self.value).as_str() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(self.invalid("expected true or false")),
        }
    }

    /// The value as a duration: a whole number with a unit, `ms`, `s`, `m` or `h`
    /// (`500ms`, `30s`, `2m`).
    pub fn duration(&self) -> Result<Duration, SubscribeError> {
        let value = self.value.trim();
        let split = value
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(value.len());
        let (digits, unit) = value.split_at(split);
        let bad = || self.invalid("expected a duration with a unit: 500ms, 30s, 2m, 1h");
        let n: u64 = digits.parse().map_err(|_| bad())?;
        match unit.trim() {
            "ms" => Ok(Duration::from_millis(n)),
            "s" => Ok(Duration::from_secs(n)),
            "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
            "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?} ({})", self.key, self.value, self.origin)
    }
}

fn normalize(text: &str) -> String {
    text.trim().to_ascii_lowercase().replace('-', "_")
}

/// Splits a URL into the URL without the query keys `keep` refuses and those keys as
/// settings (origin `url`), percent-decoded. Keys `keep` accepts (a client's own, like
/// Redis cluster's `node`) stay in the URL.
///
/// ```
/// use ruststream_core::split_query;
///
/// let (url, settings) =
///     split_query("redis://h:6379/0?form=list&node=h:7002&block=2s", |key| key == "node");
/// assert_eq!(url, "redis://h:6379/0?node=h:7002");
/// assert_eq!(settings.len(), 2);
/// assert_eq!((settings[0].key.as_str(), settings[0].value.as_str()), ("form", "list"));
/// ```
pub fn split_query(url: &str, keep: impl Fn(&str) -> bool) -> (String, Vec<Setting>) {
    let (head, fragment) = match url.split_once('#') {
        Some((head, fragment)) => (head, Some(fragment)),
        None => (url, None),
    };
    let Some((base, query)) = head.split_once('?') else {
        return (url.to_owned(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut settings = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if keep(key) {
            kept.push(pair);
        } else {
            settings.push(Setting::new(
                percent_decode(key),
                percent_decode(value),
                "url",
            ));
        }
    }
    let mut out = base.to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    (out, settings)
}

/// Percent-decodes (and reads `+` as a space); an escape that is not one stays as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        let d = |v: &str| Setting::new("block", v, "t").duration().ok();
        assert_eq!(d("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(d("2m"), Some(Duration::from_secs(120)));
        assert_eq!(d("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "5", "s", "1.5s", "-1s", "3 days"] {
            assert!(d(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn choices_flags_and_keys_are_normalized() {
        let s = Setting::new("Min-Idle", "Reliable-List", "t");
        assert_eq!(s.key, "min_idle");
        assert_eq!(
            s.choice(&["list", "reliable_list"]).ok(),
            Some("reliable_list")
        );
        assert!(Setting::new("x", "maybe", "t").flag().is_err());
        assert_eq!(Setting::new("x", "Yes", "t").flag().ok(), Some(true));
    }

    #[test]
    fn queries_split_into_kept_keys_and_settings() {
        let (url, settings) = split_query("amqp://h/v?credit=64&declare=quorum#f", |_| false);
        assert_eq!(url, "amqp://h/v#f");
        assert_eq!(settings.len(), 2);
        let (url, settings) = split_query("redis://h?group=a%20b", |_| false);
        assert_eq!(url, "redis://h");
        assert_eq!(settings[0].value, "a b");
        let (url, settings) = split_query("memory://", |_| false);
        assert_eq!(url, "memory://");
        assert!(settings.is_empty());
    }

    #[test]
    fn errors_name_the_setting_and_its_origin() {
        let s = Setting::new("form", "lst", "RUSTSTREAM_MOUNT__ORDERS__FORM");
        let error = s
            .choice(&["list", "stream"])
            .expect_err("refused")
            .to_string();
        assert_eq!(
            error,
            "bad option: setting form=\"lst\" (RUSTSTREAM_MOUNT__ORDERS__FORM): expected one of list, stream"
        );
        let error = s.unknown("memory", &[]).to_string();
        assert!(
            error.contains("unknown key for the memory broker"),
            "{error}"
        );
    }
}
