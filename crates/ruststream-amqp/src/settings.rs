//! A subscription's options from configuration: the broker URL's query and the mount's
//! settings (see the crate docs, "Settings from configuration").

use ruststream_core::{Options, Setting, SubscribeError};
use ruststream_rabbitmq::settings::configured;

use crate::options::{Settle, SubscribeOptions};
use crate::queue::QueueType;

/// The keys the AMQP broker reads.
pub(crate) const KEYS: &[&str] = &[
    "credit",
    "settle",
    "declare",
    "counts",
    "dead_letters",
    "delivery_limit",
];

/// The options a subscription opens with: typed [`SubscribeOptions`] on the mount win
/// over every key; a typed [`Settle`] wins over `settle`. Otherwise the settings make
/// them, the URL's first and the mount's after (a later key wins). Every setting is read
/// either way: an unknown key or a bad value is an error naming it.
pub(crate) fn options(
    options: &Options,
    url: &[Setting],
) -> Result<SubscribeOptions, SubscribeError> {
    let chosen = configured(
        options,
        url,
        SubscribeOptions::new(),
        |o| &mut o.queue,
        apply,
    )?;
    Ok(match options.get::<Settle>() {
        Some(settle) => chosen.settle(*settle),
        None => chosen,
    })
}

/// `options` with `setting` read, one of this adapter's own keys (the queue's are read by
/// [`configured`]).
fn apply(options: SubscribeOptions, setting: &Setting) -> Result<SubscribeOptions, SubscribeError> {
    Ok(match setting.key.as_str() {
        "credit" => {
            let credit: u32 = setting.number()?;
            if credit == 0 {
                return Err(setting.invalid("must be at least 1"));
            }
            options.credit(credit)
        }
        "settle" => match setting.choice(&["at_least_once", "at_most_once"])? {
            "at_most_once" => options.settle(Settle::AtMostOnce),
            _ => options.settle(Settle::AtLeastOnce),
        },
        "declare" => match setting.choice(&["classic", "quorum", "stream"])? {
            "quorum" => options.declare(QueueType::Quorum),
            "stream" => options.declare(QueueType::Stream),
            _ => options.declare(QueueType::Classic),
        },
        _ => return Err(setting.unknown("amqp", KEYS)),
    })
}

#[cfg(test)]
mod tests {
    use ruststream_core::split_query;
    use ruststream_rabbitmq::QueueOptions;

    use super::*;

    /// The settings of `url`'s query.
    fn query(url: &str) -> Vec<Setting> {
        split_query(url, |_| false).1
    }

    #[test]
    fn its_keys_and_the_queues_are_read_and_a_typed_settle_wins() {
        let url = query("amqp://h?credit=64&declare=quorum&counts=true");
        let got = options(&Options::default(), &url).expect("ok");
        let want = SubscribeOptions::new()
            .credit(64)
            .declare(QueueType::Quorum)
            .queue(QueueOptions::new().counts(true));
        assert_eq!(got, want);
        let mut mount = Options::default();
        mount.insert(SubscribeOptions::new().credit(2));
        mount.insert(Settle::AtMostOnce);
        let got = options(&mount, &query("amqp://h?settle=at-least-once")).expect("ok");
        assert_eq!(
            got,
            SubscribeOptions::new().credit(2).settle(Settle::AtMostOnce)
        );
    }

    #[test]
    fn bad_settings_are_named() {
        for (url, says) in [
            ("amqp://h?prefetch=5", "unknown key for the amqp broker"),
            ("amqp://h?credit=0", "at least 1"),
            ("amqp://h?credit=lots", "whole number"),
            ("amqp://h?declare=lazy", "classic, quorum, stream"),
            ("amqp://h?counts=perhaps", "true or false"),
        ] {
            let refused = options(&Options::default(), &query(url)).expect_err(url);
            assert!(refused.to_string().contains(says), "{url}: {refused}");
        }
    }
}
