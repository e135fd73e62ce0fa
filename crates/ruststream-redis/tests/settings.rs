//! Settings from configuration on a real Redis: the form chosen by the broker URL's
//! query alone, per-mount settings over it, typed options over both, and the errors
//! that name a bad setting.

mod support;

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use ruststream::{App, Mount, Publisher, RunError, Running, mount::mount_env_name};
use ruststream_redis::{RedisBroker, Settings, Stream};
use support::Ctx;
use tokio::sync::mpsc;

/// The test server's URL with `query` added.
fn url_with(query: &str) -> String {
    let url = support::url();
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}{query}")
}

async fn broker(ctx: &Ctx, query: &str) -> RedisBroker {
    let settings = Settings::default().key_prefix(ctx.prefix.clone());
    match RedisBroker::connect_with(&url_with(query), settings).await {
        Ok(broker) => broker,
        Err(error) => panic!("connect with ?{query}: {error}"),
    }
}

/// A service on `broker` whose one mount sends what it gets to the returned receiver.
async fn service(
    broker: RedisBroker,
    mount: Mount,
    vars: &[(String, String)],
) -> (Running, mpsc::UnboundedReceiver<u32>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let running = App::new(broker)
        .mount(mount, move |n: u32| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(n);
            }
        })
        .mount_settings(vars.to_vec())
        .start()
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    (running, rx)
}

/// Publishes `n` from the context's own connection (no routes declared on it).
async fn publish(ctx: &Ctx, address: &str, n: u32) {
    Publisher::new(ruststream_core::Broker::publisher(&ctx.broker))
        .publish(address, &n)
        .await
        .unwrap_or_else(|e| panic!("publish: {e}"));
}

async fn received(rx: &mut mpsc::UnboundedReceiver<u32>) -> u32 {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("nothing handled within 10 s"))
}

async fn kind_marker(ctx: &Ctx, address: &str) -> Option<String> {
    let key = format!("{{{}{address}}}:kind", ctx.prefix);
    ctx.admin.get(key).await.expect("get")
}

async fn key_type(ctx: &Ctx, address: &str) -> String {
    let value: fred::types::Value = ctx
        .admin
        .custom(
            fred::types::CustomCommand::new_static("TYPE", None, false),
            vec![format!("{}{address}", ctx.prefix)],
        )
        .await
        .expect("type");
    value.as_string().unwrap_or_default()
}

fn var(address: &str, key: &str, value: &str) -> (String, String) {
    (
        format!("RUSTSTREAM_MOUNT__{}__{key}", mount_env_name(address)),
        value.to_owned(),
    )
}

#[tokio::test]
async fn the_url_query_alone_chooses_the_form() {
    let ctx = support::ctx().await;
    let (running, mut rx) = service(broker(&ctx, "form=list").await, Mount::new("jobs"), &[]).await;
    // The list form leaves its kind marker: a producer elsewhere pushes to the list.
    assert_eq!(kind_marker(&ctx, "jobs").await.as_deref(), Some("list"));
    publish(&ctx, "jobs", 7).await;
    assert_eq!(received(&mut rx).await, 7);
    assert_ne!(
        key_type(&ctx, "jobs").await,
        "stream",
        "published to a list, not a stream"
    );
    running.stop().await.expect("stop");

    // Without the query the same mount is a stream read by the default group.
    let (running, mut rx) = service(broker(&ctx, "").await, Mount::new("events"), &[]).await;
    publish(&ctx, "events", 8).await;
    assert_eq!(received(&mut rx).await, 8);
    assert_eq!(key_type(&ctx, "events").await, "stream");
    assert!(ctx.consumers("events", "ruststream").await >= 1);
    running.stop().await.expect("stop");
}

#[tokio::test]
async fn mount_settings_win_over_the_url_and_typed_options_over_both() {
    let ctx = support::ctx().await;
    let vars = [
        var("billing", "FORM", "stream"),
        var("billing", "GROUP", "billing-service"),
        var("billing", "BLOCK", "200ms"),
    ];
    let (running, mut rx) = service(
        broker(&ctx, "form=list").await,
        Mount::new("billing"),
        &vars,
    )
    .await;
    publish(&ctx, "billing", 1).await;
    assert_eq!(received(&mut rx).await, 1);
    assert_eq!(key_type(&ctx, "billing").await, "stream");
    assert!(ctx.consumers("billing", "billing-service").await >= 1);
    running.stop().await.expect("stop");

    // The typed form wins over the URL's and the table's.
    let vars = [var("typed", "FORM", "reliable_list")];
    let mount = Mount::new("typed").option(Stream::new().group("from-code"));
    let (running, mut rx) = service(broker(&ctx, "form=list").await, mount, &vars).await;
    publish(&ctx, "typed", 2).await;
    assert_eq!(received(&mut rx).await, 2);
    assert_eq!(key_type(&ctx, "typed").await, "stream");
    assert!(ctx.consumers("typed", "from-code").await >= 1);
    running.stop().await.expect("stop");
}

#[tokio::test]
async fn bad_settings_are_start_up_errors_that_name_them() {
    let ctx = support::ctx().await;
    let settings = || Settings::default().key_prefix(ctx.prefix.clone());
    for (query, says) in [
        (
            "shape=list",
            "setting shape=\"list\" (url): unknown key for the redis broker",
        ),
        (
            "form=list&group=g",
            "setting group=\"g\" (url): does not apply to the list form",
        ),
        (
            "form=claiming&min_idle=soon",
            "setting min_idle=\"soon\" (url): expected a duration",
        ),
    ] {
        let error = RedisBroker::connect_with(&url_with(query), settings())
            .await
            .expect_err("refused");
        assert!(error.to_string().contains(says), "?{query}: {error}");
    }

    let broker: Arc<dyn ruststream_core::Broker> = Arc::new(broker(&ctx, "").await);
    let error = App::with_broker(broker)
        .mount("orders", |_: u32| async {})
        .mount_settings([var("orders", "FORM", "lst")])
        .start()
        .await
        .err()
        .expect("refused");
    assert!(matches!(error, RunError::Subscribe { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("setting form=\"lst\" (RUSTSTREAM_MOUNT__ORDERS__FORM): expected one of"),
        "{error}"
    );
}
