//! A subscription's settings from configuration: the broker URL's query
//! (`nats://host:4222?confirm_acks=true`) and the mount's settings
//! (`RUSTSTREAM_MOUNT__<ADDRESS>__CONFIRM_ACKS=true`).

use ruststream_core::{Options, Setting, SubscribeError};

use crate::JetStream;

/// The keys this broker reads.
pub(crate) const KEYS: &[&str] = &["confirm_acks"];

/// What the settings say, the URL's first and the mount's after (a later key wins).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Configured {
    pub(crate) confirm_acks: Option<bool>,
}

/// Reads every setting: an unknown key or a bad value is an error naming it.
pub(crate) fn read(url: &[Setting], options: &Options) -> Result<Configured, SubscribeError> {
    let mut configured = Configured::default();
    for setting in url.iter().chain(options.settings()) {
        match setting.key.as_str() {
            "confirm_acks" => configured.confirm_acks = Some(setting.flag()?),
            _ => return Err(setting.unknown("nats", KEYS)),
        }
    }
    Ok(configured)
}

/// Whether a JetStream mount's settlements wait for the server's answer: the typed
/// option, else the settings, else no.
pub(crate) fn confirm_acks(js: &JetStream, configured: Configured) -> bool {
    js.confirm_acks.or(configured.confirm_acks).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_overrides_the_url_and_the_typed_option_wins() {
        let url = [Setting::new("confirm_acks", "true", "url")];
        let mut mount = Options::default();
        let read_both = |mount: &Options| read(&url, mount).expect("known");
        assert!(confirm_acks(&JetStream::new(), read_both(&mount)));
        mount.configure(Setting::new("confirm-acks", "no", "env"));
        assert!(!confirm_acks(&JetStream::new(), read_both(&mount)));
        let typed = JetStream::new().confirm_acks(true);
        assert!(confirm_acks(&typed, read_both(&mount)));
        assert!(!confirm_acks(&JetStream::new(), Configured::default()));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let error = read(&[Setting::new("prefetch", "8", "url")], &Options::default())
            .expect_err("unknown");
        assert!(error.to_string().contains("confirm_acks"), "{error}");
        let error = read(
            &[Setting::new("confirm_acks", "maybe", "url")],
            &Options::default(),
        )
        .expect_err("bad");
        assert!(error.to_string().contains("true or false"), "{error}");
    }
}
