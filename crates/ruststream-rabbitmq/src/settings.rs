//! A subscription's options from configuration, the same way on both adapters: the
//! broker URL's query and the mount's settings, the keys of [`QueueOptions`] read here.

use std::any::Any;

use ruststream_core::{Options, Setting, SubscribeError};

use crate::QueueOptions;

/// The keys [`apply`] reads.
pub const KEYS: [&str; 3] = ["counts", "dead_letters", "delivery_limit"];

/// The options of type `T` a subscription opens with: a typed `T` on the mount wins over
/// every key; otherwise `apply` makes them from `start` with the settings, the URL's
/// first and the mount's after (a later key wins). Every setting is read either way: an
/// unknown key or a bad value is an error naming it.
pub fn configured<T: Copy + Any + Send + Sync>(
    options: &Options,
    url: &[Setting],
    start: T,
    apply: impl Fn(T, &Setting) -> Result<T, SubscribeError>,
) -> Result<T, SubscribeError> {
    let mut configured = start;
    for setting in url.iter().chain(options.settings()) {
        configured = apply(configured, setting)?;
    }
    Ok(options.get::<T>().copied().unwrap_or(configured))
}

/// `options` with `setting` read, where it is one of [`KEYS`]; `None` for another key.
pub fn apply(
    options: QueueOptions,
    setting: &Setting,
) -> Option<Result<QueueOptions, SubscribeError>> {
    let read = || {
        Ok(match setting.key.as_str() {
            "counts" => options.counts(setting.flag()?),
            "dead_letters" => options.dead_letters(setting.flag()?),
            _ => options.delivery_limit(
                setting
                    .number()
                    .map_err(|_| setting.invalid("expected a whole number (negative: none)"))?,
            ),
        })
    };
    KEYS.contains(&setting.key.as_str()).then(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(key: &str, value: &str) -> Option<Result<QueueOptions, SubscribeError>> {
        apply(QueueOptions::new(), &Setting::new(key, value, "url"))
    }

    #[test]
    fn the_queue_keys_are_read_and_others_left() {
        assert_eq!(
            read("counts", "true").and_then(Result::ok),
            Some(QueueOptions::new().counts(true))
        );
        assert_eq!(
            read("delivery_limit", "-1").and_then(Result::ok),
            Some(QueueOptions::new().delivery_limit(-1))
        );
        assert!(read("prefetch", "5").is_none());
        for (key, says) in [
            ("dead_letters", "true or false"),
            ("delivery_limit", "whole number"),
        ] {
            let error = read(key, "many").and_then(Result::err).expect("refused");
            assert!(error.to_string().contains(says), "{key}: {error}");
        }
    }

    #[test]
    fn a_later_setting_wins() {
        let mut mount = Options::default();
        mount.configure(Setting::new("delivery_limit", "8", "env"));
        let url = [Setting::new("delivery_limit", "3", "url")];
        let apply = |o, s: &Setting| apply(o, s).unwrap_or_else(|| Err(s.unknown("test", &KEYS)));
        let got = configured(&mount, &url, QueueOptions::new(), apply).expect("ok");
        assert_eq!(got, QueueOptions::new().delivery_limit(8));
    }
}
