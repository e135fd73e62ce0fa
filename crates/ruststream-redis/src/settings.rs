//! A subscription's form from configuration: the broker URL's query and the mount's
//! settings (see the crate docs, "Settings from configuration").

use ruststream_core::{Options, Setting, SubscribeError};

use crate::options::{
    Claiming, DelayedRetry, Form, Group, GroupStart, List, Pattern, PubSub, ReliableList, Stream,
    form_of,
};

/// The keys the Redis broker reads.
pub(crate) const KEYS: &[&str] = &[
    "form",
    "group",
    "consumer",
    "start",
    "block",
    "count",
    "heartbeat",
    "min_idle",
    "delayed_retry",
];

const FORMS: &[&str] = &[
    "stream",
    "claiming",
    "reliable_list",
    "list",
    "pubsub",
    "pattern",
];

/// The form a subscription reads with: a typed form on the mount wins; otherwise the
/// form the settings make, the URL's first and the mount's after (a later key wins).
/// Every setting is read either way: an unknown key, a bad value or a key the form has
/// no use for is an error naming it.
pub(crate) fn form(options: &Options, url: &[Setting]) -> Result<Form, SubscribeError> {
    let settings: Vec<&Setting> = url.iter().chain(options.settings()).collect();
    let configured = configured(&settings)?;
    match form_of(options) {
        Some(typed) => {
            if !settings.is_empty() {
                tracing::debug!(
                    "redis: the mount's typed form wins over the settings from configuration"
                );
            }
            Ok(typed)
        }
        None => Ok(configured),
    }
}

/// The form the settings make, from the defaults.
fn configured(settings: &[&Setting]) -> Result<Form, SubscribeError> {
    for setting in settings {
        if !KEYS.contains(&setting.key.as_str()) {
            return Err(setting.unknown("redis", KEYS));
        }
    }
    let kind = match settings.iter().rev().find(|s| s.key == "form") {
        Some(setting) => setting.choice(FORMS)?,
        None => "stream",
    };
    let mut form = match kind {
        "claiming" => Form::Claiming(Claiming::default()),
        "reliable_list" => Form::ReliableList(ReliableList::new()),
        "list" => Form::List(List::new()),
        "pubsub" => Form::PubSub(PubSub::new()),
        "pattern" => Form::Pattern(Pattern::new()),
        _ => Form::Stream(Stream::new()),
    };
    for setting in settings.iter().filter(|s| s.key != "form") {
        apply(&mut form, setting, kind)?;
    }
    Ok(form)
}

fn apply(form: &mut Form, setting: &Setting, kind: &str) -> Result<(), SubscribeError> {
    let unfit = || setting.invalid(format_args!("does not apply to the {kind} form"));
    match form {
        Form::Stream(stream) => {
            if setting.key == "delayed_retry" {
                stream.delayed_retry = match setting.choice(&["in_process", "durable_zset"])? {
                    "durable_zset" => DelayedRetry::DurableZset,
                    _ => DelayedRetry::InProcess,
                };
                return Ok(());
            }
            group(&mut stream.group, setting)?.ok_or_else(unfit)
        }
        Form::Claiming(claiming) => {
            if setting.key == "min_idle" {
                let min_idle = setting.duration()?;
                if min_idle.is_zero() {
                    return Err(setting.invalid("must be above zero"));
                }
                claiming.min_idle = min_idle;
                return Ok(());
            }
            group(&mut claiming.group, setting)?.ok_or_else(unfit)
        }
        Form::ReliableList(list) => match setting.key.as_str() {
            "consumer" => {
                list.consumer = Some(setting.value.clone());
                Ok(())
            }
            "block" => {
                list.block = setting.duration()?;
                Ok(())
            }
            "heartbeat" => {
                list.heartbeat = setting
                    .duration()?
                    .max(std::time::Duration::from_millis(30));
                Ok(())
            }
            _ => Err(unfit()),
        },
        Form::List(list) if setting.key == "block" => {
            list.block = setting.duration()?;
            Ok(())
        }
        _ => Err(unfit()),
    }
}

/// Applies a consumer-group key; `None` when the key is not one.
fn group(group: &mut Group, setting: &Setting) -> Result<Option<()>, SubscribeError> {
    match setting.key.as_str() {
        "group" => group.group = setting.value.clone(),
        "consumer" => group.consumer = Some(setting.value.clone()),
        "start" => {
            group.start = match setting.value.trim() {
                "beginning" => GroupStart::Beginning,
                "end" => GroupStart::End,
                id if crate::reply::EntryId::parse(id.as_bytes()).is_some() => {
                    GroupStart::Id(id.to_owned())
                }
                _ => return Err(setting.invalid("expected beginning, end or an entry id")),
            }
        }
        "block" => group.block = setting.duration()?,
        "count" => group.count = Some(setting.number::<usize>()?.max(1)),
        "heartbeat" => {
            group.heartbeat = setting
                .duration()?
                .max(std::time::Duration::from_millis(30));
        }
        _ => return Ok(None),
    }
    Ok(Some(()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn url(pairs: &[(&str, &str)]) -> Vec<Setting> {
        pairs
            .iter()
            .map(|(k, v)| Setting::new(*k, *v, "url"))
            .collect()
    }

    #[test]
    fn the_url_chooses_the_form_and_the_mount_overrides_it() {
        let options = Options::default();
        let form = form(&options, &url(&[("form", "list"), ("block", "2s")])).expect("form");
        assert!(matches!(form, Form::List(ref l) if l.block == Duration::from_secs(2)));
        let mut options = Options::default();
        options.configure(Setting::new("form", "claiming", "env"));
        options.configure(Setting::new("min_idle", "5s", "env"));
        options.configure(Setting::new("group", "billing", "env"));
        let form = super::form(&options, &url(&[("form", "list")])).expect("form");
        let Form::Claiming(claiming) = form else {
            panic!("claiming: {form:?}")
        };
        assert_eq!(claiming.min_idle, Duration::from_secs(5));
        assert_eq!(claiming.group.group, "billing");
    }

    #[test]
    fn a_typed_form_wins_but_settings_are_still_checked() {
        let mut options = Options::default();
        options.insert(Stream::new());
        let form = form(&options, &url(&[("form", "list")])).expect("form");
        assert!(matches!(form, Form::Stream(_)));
        let error = super::form(&options, &url(&[("form", "lst")])).expect_err("bad value");
        assert!(error.to_string().contains("form=\"lst\""), "{error}");
    }

    #[test]
    fn bad_settings_are_named() {
        let options = Options::default();
        for (pairs, says) in [
            (&[("shape", "list")][..], "unknown key for the redis broker"),
            (
                &[("form", "list"), ("group", "g")][..],
                "does not apply to the list form",
            ),
            (
                &[("form", "claiming"), ("min_idle", "0s")][..],
                "above zero",
            ),
            (&[("block", "soon")][..], "duration"),
            (&[("count", "-1")][..], "whole number"),
            (&[("start", "middle")][..], "entry id"),
            (
                &[("delayed_retry", "later")][..],
                "in_process, durable_zset",
            ),
        ] {
            let error = form(&options, &url(pairs))
                .expect_err("refused")
                .to_string();
            assert!(error.contains(says), "{pairs:?}: {error}");
        }
    }
}
