//! A subscription's options from configuration, the same way on both adapters: the
//! broker URL's query and the mount's settings, the keys of [`QueueOptions`] read here.

use std::any::Any;

use ruststream_core::{Options, Setting, SubscribeError};

use crate::QueueOptions;

/// The keys [`configured`] reads into the queue's options.
pub const KEYS: [&str; 3] = ["counts", "dead_letters", "delivery_limit"];

/// The options of type `T` a subscription opens with: a typed `T` on the mount wins over
/// every key.
///
/// Otherwise they are made from `start` with the settings, the URL's first and the
/// mount's after (a later key wins): a key of [`KEYS`] goes to the [`QueueOptions`] that
/// `queue` picks out of them, any other key to `other`, the adapter's own. Every setting
/// is read either way: an unknown key or a bad value is an error naming it.
pub fn configured<T: Copy + Any + Send + Sync>(
    options: &Options,
    url: &[Setting],
    start: T,
    queue: impl Fn(&mut T) -> &mut QueueOptions,
    other: impl Fn(T, &Setting) -> Result<T, SubscribeError>,
) -> Result<T, SubscribeError> {
    let mut configured = start;
    for setting in url.iter().chain(options.settings()) {
        match apply(*queue(&mut configured), setting) {
            Some(read) => *queue(&mut configured) = read?,
            None => configured = other(configured, setting)?,
        }
    }
    Ok(options.get::<T>().copied().unwrap_or(configured))
}

/// `options` with `setting` read, where it is one of [`KEYS`]; `None` for another key.
fn apply(options: QueueOptions, setting: &Setting) -> Option<Result<QueueOptions, SubscribeError>> {
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

    /// Options of a made-up adapter: its own key `credit`, and the queue's.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Subscribe {
        credit: u32,
        queue: QueueOptions,
    }

    impl ruststream_core::BrokerOption for Subscribe {
        const BROKER: &'static str = "test";
    }

    const START: Subscribe = Subscribe {
        credit: 1,
        queue: QueueOptions::new(),
    };

    fn subscribe(mount: &Options, url: &[Setting]) -> Result<Subscribe, SubscribeError> {
        let other = |o: Subscribe, s: &Setting| match s.key.as_str() {
            "credit" => Ok(Subscribe {
                credit: s.number()?,
                ..o
            }),
            _ => Err(s.unknown("test", &["credit"])),
        };
        configured(mount, url, START, |o| &mut o.queue, other)
    }

    #[test]
    fn the_mount_overrides_the_url() {
        let mut mount = Options::default();
        mount.configure(Setting::new("delivery_limit", "8", "env"));
        mount.configure(Setting::new("credit", "5", "env"));
        let url = [
            Setting::new("delivery_limit", "3", "url"),
            Setting::new("counts", "true", "url"),
            Setting::new("credit", "64", "url"),
        ];
        let got = subscribe(&mount, &url).expect("ok");
        let queue = QueueOptions::new().delivery_limit(8).counts(true);
        assert_eq!(got, Subscribe { credit: 5, queue });
    }

    #[test]
    fn typed_options_win_and_every_setting_is_read() {
        let mut mount = Options::default();
        let typed = Subscribe { credit: 2, ..START };
        mount.insert(typed);
        let url = [Setting::new("counts", "true", "url")];
        assert_eq!(subscribe(&mount, &url).expect("ok"), typed);
        for (key, says) in [
            ("prefetch", "unknown key"),
            ("dead_letters", "true or false"),
        ] {
            let url = [Setting::new(key, "many", "url")];
            let error = subscribe(&mount, &url).expect_err("refused");
            assert!(error.to_string().contains(says), "{key}: {error}");
        }
    }
}
