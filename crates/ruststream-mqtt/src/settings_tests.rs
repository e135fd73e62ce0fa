use std::time::Duration;

use ruststream_core::{Options, Setting};

use super::{DEFAULT_SESSION_EXPIRY, mounted, parse};
use crate::{Group, SessionExpiry};

#[test]
fn a_url_names_host_port_login_and_settings() {
    let url = parse("mqtt://u:p@broker:1884?session_expiry=2h").expect("read");
    assert_eq!((url.host.as_str(), url.port), ("broker", 1884));
    assert_eq!(url.login, Some(("u".into(), "p".into())));
    assert_eq!(url.settings[0].key, "session_expiry");
    assert_eq!(parse("mqtt://h").expect("read").port, 1883);
    assert!(!parse("mqtt://h").expect("read").accept_unrouted);
    assert!(
        parse("mqtt://h?unrouted=accept")
            .expect("read")
            .accept_unrouted
    );
}

#[test]
fn bad_urls_and_values_are_errors_naming_them() {
    let cases = [
        ("kafka://h:1", "not mqtt:// or mqtts://"),
        ("mqtt://h?tls_ca_file=/ca.pem", "only with mqtts://"),
        ("mqtt://", "want mqtt://host"),
        ("mqtt://h:port", "not a port number"),
        ("mqtt://h?session_expiry=soon", "session_expiry"),
        ("mqtt://h?session_expiry=0s", "at least 1s"),
        ("mqtt://h?client_id=a/b", "client_id"),
        ("mqtt://h?group=a/b", "group"),
        ("mqtt://h?shared=maybe", "true or false"),
        ("mqtt://h?keep_alive=0s", "keep_alive"),
        ("mqtt://h?unrouted=drop", "error, accept"),
        ("mqtt://h?prefetch=1", "known: client_id"),
    ];
    for (url, expected) in cases {
        let error = parse(url).expect_err(url).to_string();
        assert!(error.contains(expected), "{url}: {error}");
    }
}

#[test]
fn a_mount_shares_its_filter_in_the_default_group_with_a_stable_client_id() {
    let m = mounted("orders/+", &[], &Options::default()).expect("default");
    assert_eq!(m.filter("orders/+"), "$share/ruststream/orders/+");
    assert_eq!(m.session_expiry, DEFAULT_SESSION_EXPIRY);
    let again = mounted("orders/+", &[], &Options::default()).expect("default");
    assert_eq!(
        m.client_id, again.client_id,
        "the same mount, the same session"
    );
    let other = mounted("audit", &[], &Options::default()).expect("default");
    assert_ne!(m.client_id, other.client_id, "a session per mount");
}

#[test]
fn the_mount_wins_over_the_url_and_typed_options_over_both() {
    let url = [
        Setting::new("client_id", "billing", "url"),
        Setting::new("group", "from-url", "url"),
    ];
    let mut options = Options::default();
    let m = mounted("t", &url, &options).expect("url");
    assert!(m.client_id.starts_with("billing-"), "{}", m.client_id);
    assert_eq!(m.group.as_deref(), Some("from-url"));
    options.configure(Setting::new("client_id", "billing-1", "env"));
    options.configure(Setting::new("shared", "false", "env"));
    let m = mounted("t", &url, &options).expect("mount");
    assert_eq!((m.client_id.as_str(), m.group), ("billing-1", None));
    options.insert(Group::new("typed"));
    options.insert(SessionExpiry(Duration::from_secs(60)));
    let m = mounted("t", &url, &options).expect("typed");
    assert_eq!(m.group.as_deref(), Some("typed"));
    assert_eq!(m.session_expiry, Duration::from_secs(60));
}

#[test]
fn a_mount_may_not_set_what_belongs_to_the_url() {
    let mut options = Options::default();
    options.configure(Setting::new("keep_alive", "10s", "env"));
    let error = mounted("t", &[], &options).expect_err("url only");
    assert!(error.to_string().contains("broker url"), "{error}");
}

#[cfg(feature = "tls")]
#[test]
fn mqtts_is_tls_on_8883() {
    let url = parse("mqtts://h").expect("read");
    assert_eq!((url.tls, url.port), (true, 8883));
    let error = parse("mqtts://h?tls_ca_file=/nonexistent/ca.pem").expect_err("no file");
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
}

#[cfg(not(feature = "tls"))]
#[test]
fn mqtts_needs_the_tls_feature() {
    let error = parse("mqtts://h").expect_err("no tls");
    assert!(error.to_string().contains("tls feature"), "{error}");
}
