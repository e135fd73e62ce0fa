//! Topic names (what is published to) and filters (what is subscribed), as MQTT 5
//! §4.7 allows them.

/// Whether `text` has no control characters (MQTT forbids U+0000, and the rest are
/// surely mistakes in a name).
pub(crate) fn printable(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// Why `topic` cannot be published to, if it cannot.
pub(crate) fn name_problem(topic: &str) -> Option<&'static str> {
    if topic.is_empty() {
        Some("an empty topic")
    } else if topic.contains(['+', '#']) {
        Some("a topic to publish to has no '+' or '#'")
    } else if topic.starts_with('$') {
        Some("topics starting with '$' are the broker's")
    } else if !printable(topic) || topic.len() > usize::from(u16::MAX) {
        Some("not a topic name")
    } else {
        None
    }
}

/// Why `filter` cannot be subscribed, if it cannot.
pub(crate) fn filter_problem(filter: &str) -> Option<&'static str> {
    if filter.is_empty() {
        return Some("an empty topic filter");
    }
    if filter.starts_with('$') {
        return Some("filters starting with '$' are the broker's (use the group option to share)");
    }
    if !printable(filter) || filter.len() > 60_000 {
        return Some("not a topic filter");
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i + 1 != levels.len()) {
            return Some("'#' must be a whole level, and the last");
        }
        if level.contains('+') && *level != "+" {
            return Some("'+' must be a whole level");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{filter_problem, name_problem};

    #[test]
    fn filters_take_whole_level_wildcards() {
        for good in ["a", "a/b", "a/+", "+/b/#", "#", "a//b"] {
            assert_eq!(filter_problem(good), None, "{good}");
        }
        for bad in ["", "a#", "a/#/b", "a+/b", "$SYS/#", "a\0b"] {
            assert!(filter_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn names_take_no_wildcards() {
        assert_eq!(name_problem("orders/eu"), None);
        for bad in ["", "a/+", "a/#", "$share/g/a"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }
}
