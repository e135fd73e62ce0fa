//! A subscription's options from configuration: the broker URL's query and the mount's
//! settings (see the crate docs, "Settings from configuration").

use ruststream_core::{Options, Setting, SubscribeError};
use ruststream_rabbitmq::settings::configured;

use crate::options::SubscribeOptions;
use crate::queue::QueueType;

/// The keys this broker reads.
pub(crate) const KEYS: &[&str] = &[
    "prefetch",
    "declare",
    "counts",
    "dead_letters",
    "delivery_limit",
];

/// Query keys of the URL that lapin itself reads (they stay in the URL).
pub(crate) const CLIENT_KEYS: &[&str] = &[
    "frame_max",
    "channel_max",
    "heartbeat",
    "connection_timeout",
    "auth_mechanism",
];

/// The options a subscription opens with: typed [`SubscribeOptions`] on the mount win
/// over every key; otherwise the settings make them, the URL's first and the mount's
/// after (a later key wins). Every setting is read either way: an unknown key or a bad
/// value is an error naming it.
pub(crate) fn options(
    options: &Options,
    url: &[Setting],
) -> Result<SubscribeOptions, SubscribeError> {
    configured(
        options,
        url,
        SubscribeOptions::new(),
        |o| &mut o.queue,
        apply,
    )
}

/// `options` with `setting` read, one of this adapter's own keys (the queue's are read by
/// [`configured`]).
fn apply(options: SubscribeOptions, setting: &Setting) -> Result<SubscribeOptions, SubscribeError> {
    Ok(match setting.key.as_str() {
        "prefetch" => {
            let prefetch: u16 = setting
                .number()
                .map_err(|_| setting.invalid("expected a whole number from 1 to 65535"))?;
            if prefetch == 0 {
                return Err(setting.invalid("must be at least 1"));
            }
            options.prefetch(prefetch)
        }
        "declare" => match setting.choice(&["classic", "quorum", "never"])? {
            "quorum" => options.declare(QueueType::Quorum),
            "never" => options.never_declare(),
            _ => options.declare(QueueType::Classic),
        },
        _ => return Err(setting.unknown("lapin", KEYS)),
    })
}

#[cfg(test)]
mod tests {
    use ruststream_core::split_query;
    use ruststream_rabbitmq::QueueOptions;

    use super::*;

    #[test]
    fn its_keys_and_the_queues_are_read() {
        let (_, url) = split_query(
            "amqp091://h?prefetch=64&declare=never&dead_letters=true",
            |_| false,
        );
        let got = options(&Options::default(), &url).expect("ok");
        let queue = QueueOptions::new().dead_letters(true);
        let want = SubscribeOptions::new().prefetch(64).never_declare();
        assert_eq!(got, want.queue(queue));
    }

    #[test]
    fn bad_settings_are_named() {
        let refusals = [
            ("credit=5", "unknown key for the lapin broker"),
            ("prefetch=0", "at least 1"),
            ("prefetch=70000", "1 to 65535"),
            ("declare=lazy", "classic, quorum, never"),
            ("delivery_limit=many", "whole number"),
        ];
        for (setting, says) in refusals {
            let (_, url) = split_query(&format!("amqp091://h?{setting}"), |_| false);
            let error = options(&Options::default(), &url).map(|_| ()).unwrap_err();
            assert!(error.to_string().contains(says), "{setting}: {error}");
        }
    }
}
