//! Which dead letters a `dead-letters` command acts on: by id, reason, original address
//! and age.

use std::time::Duration;

use ruststream_core::{DEAD_LETTER_AT, DEAD_LETTER_FROM, DEAD_LETTER_REASON, Waiting};

/// The filters of a `dead-letters` command; a message matches when it passes every one
/// given (and, within one that is given several times, any of its values).
///
/// ```
/// use std::time::Duration;
/// use ruststream::cli::Filter;
/// use ruststream::core::{DEAD_LETTER_REASON, Message, Waiting};
///
/// let filter = Filter { reasons: vec!["decode".into()], ..Filter::default() };
/// let dead = Waiting::new("1-0", Message::new("x").with_header(DEAD_LETTER_REASON, "decode"));
/// assert!(filter.matches(&dead, 0));
/// assert!(!Filter { older_than: Some(Duration::from_secs(60)), ..Filter::default() }.matches(&dead, 0));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Ids, as `list` shows them.
    pub ids: Vec<String>,
    /// Reasons (`x-ruststream-dead-letter-reason`: `retry`, `decode`, `panic`, `timeout`).
    pub reasons: Vec<String>,
    /// Original addresses (`x-ruststream-dead-letter-from`).
    pub from: Vec<String>,
    /// Dead-lettered at least this long ago (`x-ruststream-dead-letter-at`).
    pub older_than: Option<Duration>,
    /// Dead-lettered at most this long ago.
    pub newer_than: Option<Duration>,
}

impl Filter {
    /// Whether no filter is given (every message matches).
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Whether `waiting` passes, `now_ms` being the time in milliseconds since the Unix
    /// epoch. A message without a header a filter reads does not pass that filter.
    pub fn matches(&self, waiting: &Waiting, now_ms: u64) -> bool {
        let headers = &waiting.message.headers;
        let any = |wanted: &[String], value: Option<&str>| {
            wanted.is_empty() || value.is_some_and(|v| wanted.iter().any(|w| w == v))
        };
        if !self.ids.is_empty() && !self.ids.contains(&waiting.id) {
            return false;
        }
        if !any(&self.reasons, headers.get_str(DEAD_LETTER_REASON))
            || !any(&self.from, headers.get_str(DEAD_LETTER_FROM))
        {
            return false;
        }
        if self.older_than.is_none() && self.newer_than.is_none() {
            return true;
        }
        let Some(age) = age(waiting, now_ms) else {
            return false;
        };
        self.older_than.is_none_or(|d| age >= d) && self.newer_than.is_none_or(|d| age <= d)
    }
}

/// How long ago `waiting` was dead-lettered, from its `x-ruststream-dead-letter-at`.
pub(crate) fn age(waiting: &Waiting, now_ms: u64) -> Option<Duration> {
    let at: u64 = waiting
        .message
        .headers
        .get_str(DEAD_LETTER_AT)?
        .parse()
        .ok()?;
    Some(Duration::from_millis(now_ms.saturating_sub(at)))
}

/// Reads an age: a whole number and a unit, `500ms`, `30s`, `15m`, `2h`, `7d`.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(ruststream::cli::parse_age("15m"), Ok(Duration::from_secs(900)));
/// assert!(ruststream::cli::parse_age("15").is_err());
/// ```
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let how =
        || format!("bad age {text:?}: use a number and a unit, as in 500ms, 30s, 15m, 2h, 7d");
    let n: u64 = number.parse().map_err(|_| how())?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(how()),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(how)
}

/// An age as `list` shows it: the largest unit, whole (`42s`, `3m`, `5h`, `2d`).
pub(crate) fn show_age(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m", s / 60),
        3_600..86_400 => format!("{}h", s / 3_600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::Message;

    use super::*;

    const NOW: u64 = 1_000_000_000;

    fn dead(id: &str, reason: &str, from: &str, ago: Duration) -> Waiting {
        let at = NOW - u64::try_from(ago.as_millis()).expect("fits");
        Waiting::new(
            id,
            Message::new("x")
                .with_header(DEAD_LETTER_REASON, reason.to_owned())
                .with_header(DEAD_LETTER_FROM, from.to_owned())
                .with_header(DEAD_LETTER_AT, at.to_string()),
        )
    }

    fn ids(filter: &Filter, all: &[Waiting]) -> Vec<String> {
        all.iter()
            .filter(|w| filter.matches(w, NOW))
            .map(|w| w.id.clone())
            .collect()
    }

    fn all() -> Vec<Waiting> {
        vec![
            dead("a", "retry", "orders", Duration::from_secs(10)),
            dead("b", "decode", "orders", Duration::from_secs(7200)),
            dead("c", "panic", "billing", Duration::from_secs(90_000)),
            Waiting::new("d", Message::new("no headers")),
        ]
    }

    #[test]
    fn no_filter_takes_everything() {
        assert!(Filter::default().is_empty());
        assert_eq!(ids(&Filter::default(), &all()), ["a", "b", "c", "d"]);
    }

    #[test]
    fn each_filter_narrows_and_values_of_one_widen() {
        let by_id = Filter {
            ids: vec!["c".into(), "a".into()],
            ..Filter::default()
        };
        assert!(!by_id.is_empty());
        assert_eq!(ids(&by_id, &all()), ["a", "c"]);
        let reason = Filter {
            reasons: vec!["decode".into(), "panic".into()],
            ..Filter::default()
        };
        assert_eq!(ids(&reason, &all()), ["b", "c"]);
        let from = Filter {
            from: vec!["orders".into()],
            ..Filter::default()
        };
        assert_eq!(ids(&from, &all()), ["a", "b"]);
        let both = Filter {
            reasons: vec!["decode".into(), "panic".into()],
            from: vec!["orders".into()],
            ..Filter::default()
        };
        assert_eq!(ids(&both, &all()), ["b"]);
    }

    #[test]
    fn ages_compare_with_the_dead_letter_time() {
        let older = Filter {
            older_than: Some(Duration::from_secs(3600)),
            ..Filter::default()
        };
        assert_eq!(ids(&older, &all()), ["b", "c"], "d has no time: not taken");
        let newer = Filter {
            newer_than: Some(Duration::from_secs(3600)),
            ..Filter::default()
        };
        assert_eq!(ids(&newer, &all()), ["a"]);
        let between = Filter {
            older_than: Some(Duration::from_secs(60)),
            newer_than: Some(Duration::from_secs(86_400)),
            ..Filter::default()
        };
        assert_eq!(ids(&between, &all()), ["b"]);
        let mut garbled = dead("e", "retry", "orders", Duration::ZERO);
        garbled.message.headers.insert(DEAD_LETTER_AT, "yesterday");
        assert!(!older.matches(&garbled, NOW));
    }

    #[test]
    fn ages_parse_with_a_unit_only() {
        assert_eq!(parse_age("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_age("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_age("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "15", "m", "1.5h", "-1s", "3w", "99999999999999999999d"] {
            let error = parse_age(bad).expect_err(bad);
            assert!(error.contains("30s, 15m"), "{error}");
        }
    }

    #[test]
    fn ages_show_in_their_largest_unit() {
        assert_eq!(show_age(Duration::from_secs(42)), "42s");
        assert_eq!(show_age(Duration::from_secs(200)), "3m");
        assert_eq!(show_age(Duration::from_secs(18_000)), "5h");
        assert_eq!(show_age(Duration::from_secs(200_000)), "2d");
    }
}
