//! Names the adapter makes up: streams and consumers named after a subject.

/// `subject` as a stream or consumer name: every character a name cannot hold (`.`,
/// `*`, `>`, white space, path separators, anything not ASCII) becomes `_`.
pub(crate) fn from_subject(subject: &str) -> String {
    subject
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect()
}

/// Why `subject` cannot be consumed or published to, if it cannot.
pub(crate) fn check_subject(subject: &str, wildcards: bool) -> Result<(), String> {
    if subject.is_empty() {
        return Err("empty subject".into());
    }
    if subject.chars().any(char::is_whitespace) {
        return Err(format!("subject {subject:?} holds white space"));
    }
    if subject.split('.').any(str::is_empty) {
        return Err(format!("subject {subject:?} has an empty token"));
    }
    if !wildcards && subject.split('.').any(|t| t == "*" || t == ">") {
        return Err(format!(
            "subject {subject:?} is a wildcard: it cannot be published to"
        ));
    }
    Ok(())
}

/// Whether `subject` holds a wildcard token.
pub(crate) fn is_wildcard(subject: &str) -> bool {
    subject.split('.').any(|t| t == "*" || t == ">")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_subjects() {
        assert_eq!(from_subject("orders.eu"), "orders_eu");
        assert_eq!(from_subject("a.*.>"), "a____");
        assert_eq!(from_subject("ok-name_1"), "ok-name_1");
    }

    #[test]
    fn subjects_checked() {
        assert!(check_subject("a.b", false).is_ok());
        assert!(check_subject("a.*", true).is_ok());
        assert!(check_subject("a.*", false).is_err());
        assert!(check_subject("a..b", true).is_err());
        assert!(check_subject("", true).is_err());
        assert!(check_subject("a b", true).is_err());
        assert!(is_wildcard("a.>") && !is_wildcard("a.b"));
    }
}
