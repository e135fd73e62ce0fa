//! The plain list form: at most once, settlement unsupported, retries are runtime copies.

mod support;

use std::time::Duration;

use ruststream_core::{AckError, Broker, Capabilities, Declaration, Verdict};
use ruststream_redis::{List, RedisBroker, Settings};
use support::{assert_unsupported, complete, copy_after, ctx, msg, n_of, next, next_within};

fn list() -> List {
    List::new().block(Duration::from_millis(100))
}

#[tokio::test]
async fn every_settlement_is_unsupported() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("plain", list(), 8).await;
    assert_eq!(sub.capabilities, Capabilities::NONE);
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    for n in 0..3 {
        ctx.publish("plain", msg(n)).await;
    }
    let a = next(&mut sub).await;
    let b = next(&mut sub).await;
    let c = next(&mut sub).await;
    assert_eq!([n_of(&a), n_of(&b), n_of(&c)], [0, 1, 2]);
    assert_eq!(ctx.llen(&ctx.key("plain")).await, 0, "popped on receipt");
    let none = Declaration::default();
    for (d, verdict) in [(a, Verdict::Ack), (b, Verdict::Drop), (c, Verdict::Retry)] {
        let err = complete(d, caps, verdict, &none, &*publisher)
            .await
            .expect_err("unsupported");
        assert!(matches!(err, AckError::Unsupported), "{verdict:?}");
    }
    assert_eq!(
        ctx.llen(&ctx.key("plain")).await,
        0,
        "retry without a declaration: nothing"
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_after_is_a_copy_back_to_the_list() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("plain", list(), 8).await;
    let publisher = ctx.broker.publisher();
    ctx.publish("plain", msg(5)).await;
    let d = next(&mut sub).await;
    let delay = Duration::from_millis(50);
    let copy = copy_after(&mut sub, d, delay, &Declaration::default(), &*publisher).await;
    assert_eq!(n_of(&copy), 5);
    assert_eq!(copy.redelivery_count(), 2);
    assert_unsupported(copy).await;
    ctx.cleanup().await;
}

/// The numbers of the entries left on `address`, in the order they will be read.
async fn left_in_order(ctx: &support::Ctx, address: &str) -> Vec<usize> {
    let broker = RedisBroker::connect_with(
        &support::url(),
        Settings::default().key_prefix(ctx.prefix.clone()),
    )
    .await
    .expect("connect");
    let mut options = ruststream_core::Options::default();
    options.insert(List::new());
    let mut spec = ruststream_core::SubscribeSpec::new(address);
    spec.options = options;
    spec.in_flight = 1;
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let mut left = Vec::new();
    while let Some(d) = next_within(&mut sub, Duration::from_millis(300)).await {
        left.push(n_of(&d));
    }
    left
}

#[tokio::test]
async fn a_graceful_stop_pushes_back_what_no_handler_took() {
    let ctx = ctx().await;
    for n in 0..100 {
        ctx.publish_list("plain", n).await;
    }
    // The runtime's default prefetch: 65 popped at once.
    let mut sub = ctx.subscribe("plain", List::new(), 65).await;
    for n in 0..3 {
        assert_eq!(n_of(&next(&mut sub).await), n);
    }
    // A stop: the subscription is dropped, then the broker closed.
    drop(sub);
    ctx.broker.close().await;
    assert_eq!(ctx.llen(&ctx.key("plain")).await, 97, "none lost");
    assert_eq!(
        left_in_order(&ctx, "plain").await,
        (3..100).collect::<Vec<_>>()
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn an_entry_popped_by_a_wait_cut_short_by_a_stop_is_pushed_back() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("plain", List::new(), 65).await;
    // The reader now waits (`BRPOP`, 1 s) on the empty list.
    assert!(
        next_within(&mut sub, Duration::from_millis(200))
            .await
            .is_none()
    );
    drop(sub);
    // It arrives while the server still has the wait: the wait pops it.
    ctx.publish_list("plain", 1).await;
    ctx.broker.close().await;
    assert_eq!(left_in_order(&ctx, "plain").await, [1]);
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_graceful_stop_of_a_plain_list_mount_loses_nothing() {
    use ruststream_conformance::ruststream::{App, Mount, Raw, ack};
    let ctx = ctx().await;
    for n in 0..100 {
        ctx.publish_list("plain", n).await;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |Raw(body): Raw| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(body);
            tokio::time::sleep(Duration::from_millis(20)).await;
            ack()
        }
    };
    // Default options: the runtime's prefetch, the form's defaults.
    let running = App::new(ctx.broker.clone())
        .mount(Mount::new("plain").option(List::new()), handler)
        .start()
        .await
        .expect("start");
    for _ in 0..3 {
        rx.recv().await.expect("handled");
    }
    running.stop().await.expect("a graceful stop");
    let mut handled = 3;
    while rx.try_recv().is_ok() {
        handled += 1;
    }
    let left = ctx.llen(&ctx.key("plain")).await;
    assert_eq!(
        handled + left,
        100,
        "{handled} handled, {left} left: none lost"
    );
    ctx.cleanup().await;
}
