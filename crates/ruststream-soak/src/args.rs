//! A command line of `--name value` pairs and bare `--flag`s.

use std::collections::HashMap;
use std::str::FromStr;

/// A malformed command line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgsError {
    #[error("unexpected argument {0}")]
    Unexpected(String),
    #[error("missing --{0}")]
    Missing(&'static str),
    #[error("bad value for --{0}: {1}")]
    Bad(&'static str, String),
}

/// Parsed `--name value` pairs; a `--name` followed by another `--` or by nothing is a
/// flag.
#[derive(Debug, Default)]
pub(crate) struct Args {
    values: HashMap<String, String>,
}

impl Args {
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, ArgsError> {
        let mut values = HashMap::new();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(ArgsError::Unexpected(arg));
            };
            let value = match args.peek() {
                Some(next) if !next.starts_with("--") => args.next().unwrap_or_default(),
                _ => String::new(),
            };
            values.insert(name.to_owned(), value);
        }
        Ok(Self { values })
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    pub(crate) fn string(&self, name: &'static str) -> Result<String, ArgsError> {
        self.values
            .get(name)
            .cloned()
            .ok_or(ArgsError::Missing(name))
    }

    pub(crate) fn get<T: FromStr>(&self, name: &'static str) -> Result<T, ArgsError> {
        let raw = self.string(name)?;
        raw.parse().map_err(|_| ArgsError::Bad(name, raw))
    }

    pub(crate) fn get_or<T: FromStr>(
        &self,
        name: &'static str,
        default: T,
    ) -> Result<T, ArgsError> {
        if self.values.contains_key(name) {
            self.get(name)
        } else {
            Ok(default)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_flags() {
        let args = Args::parse(["--n", "5", "--short", "--form", "redis-stream"].map(String::from))
            .expect("parses");
        assert_eq!(args.get::<u64>("n").expect("n"), 5);
        assert!(args.flag("short"));
        assert_eq!(args.string("form").expect("form"), "redis-stream");
        assert!(matches!(
            args.get::<u64>("rate"),
            Err(ArgsError::Missing("rate"))
        ));
        assert!(Args::parse(["bare".to_owned()]).is_err());
    }
}
