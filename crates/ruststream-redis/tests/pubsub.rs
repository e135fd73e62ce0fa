//! Pub/Sub channels and patterns: at most once, settlement unsupported.

mod support;

use std::time::Duration;

use ruststream_core::{
    AckError, Address, Broker, Capabilities, Declaration, Message, Options, PublishErrorKind,
    SubscribeError, SubscribeSpec, Verdict,
};
use ruststream_redis::{Pattern, PubSub};
use support::{complete, copy_after, ctx, msg, n_of, next, next_within};

#[tokio::test]
async fn channel_messages_arrive_and_settling_is_unsupported() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    assert_eq!(sub.capabilities, Capabilities::NONE);
    let caps = sub.capabilities;
    let publisher = ctx.broker.publisher();
    ctx.publish("news", msg(1).with_header("tenant", "acme"))
        .await;
    let d = next(&mut sub).await;
    assert_eq!(n_of(&d), 1);
    assert_eq!(d.headers().get_str("tenant"), Some("acme"));
    assert_eq!(d.address().as_str(), "news");
    let err = complete(d, caps, Verdict::Ack, &Declaration::default(), &*publisher)
        .await
        .expect_err("unsupported");
    assert!(matches!(err, AckError::Unsupported));
    ctx.cleanup().await;
}

#[tokio::test]
async fn retry_after_copies_back_to_the_channel() {
    let ctx = ctx().await;
    let mut sub = ctx.subscribe("news", PubSub::new(), 8).await;
    let publisher = ctx.broker.publisher();
    ctx.publish("news", msg(2)).await;
    let d = next(&mut sub).await;
    let delay = Duration::from_millis(20);
    let copy = copy_after(&mut sub, d, delay, &Declaration::default(), &*publisher).await;
    assert_eq!(copy.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn pattern_matches_channels_and_copies_go_to_the_declared_address() {
    let ctx = ctx().await;
    let mut options = Options::default();
    options.insert(Pattern::new());
    let declaration = Declaration {
        retry_to: Some(Address::new("news.retry")),
        ..Declaration::default()
    };
    let spec = SubscribeSpec {
        address: Address::new("news.*"),
        declaration: declaration.clone(),
        in_flight: 8,
        options,
        drain: Default::default(),
    };
    let mut sub = ctx.broker.subscribe(spec).await.expect("subscribe");
    let publisher = ctx.broker.publisher();
    // Channels are published to as channels once a Pub/Sub subscription declared them.
    ctx.broker
        .route("news.sport", ruststream_redis::Target::Channel);
    ctx.publish("news.sport", msg(3)).await;
    let d = next(&mut sub).await;
    assert_eq!(d.address().as_str(), "news.sport", "the channel it came on");
    // Publishing to the pattern itself is refused.
    let err = publisher
        .publish(Address::new("news.*"), Message::new("x"))
        .await
        .expect_err("a pattern");
    assert!(matches!(err.kind, PublishErrorKind::BadAddress(_)));
    // The copy goes to the declared retry address, a channel the pattern matches.
    let delay = Duration::from_millis(10);
    let copy = copy_after(&mut sub, d, delay, &declaration, &*publisher).await;
    assert_eq!(copy.address().as_str(), "news.retry");
    assert_eq!(copy.redelivery_count(), 2);
    ctx.cleanup().await;
}

#[tokio::test]
async fn only_messages_published_while_subscribed_arrive() {
    let ctx = ctx().await;
    ctx.broker.route("quiet", ruststream_redis::Target::Channel);
    ctx.publish("quiet", msg(0)).await;
    let mut sub = ctx.subscribe("quiet", PubSub::new(), 8).await;
    assert!(
        next_within(&mut sub, Duration::from_millis(300))
            .await
            .is_none()
    );
    ctx.cleanup().await;
}

#[tokio::test]
async fn a_pattern_without_a_retry_address_is_refused() {
    let ctx = ctx().await;
    let mut options = Options::default();
    options.insert(Pattern::new());
    let spec = SubscribeSpec {
        address: Address::new("news.*"),
        declaration: Declaration::default(),
        in_flight: 8,
        options,
        drain: Default::default(),
    };
    let err = ctx
        .broker
        .subscribe(spec)
        .await
        .expect_err("retry copies would go to a stream nobody reads");
    assert!(
        matches!(&err, SubscribeError::BadOption(m) if m.contains("retry_to")),
        "{err}"
    );
    ctx.cleanup().await;
}

/// A subscription is in place on the server when `subscribe` returns: a publish made
/// right after, on another connection, reaches it. (fred resolves `SUBSCRIBE` when it is
/// sent; without the adapter's round trip after it, about one run of 1,000 subscriptions
/// in three saw a publish find no subscriber; 500 are tried here.)
#[tokio::test]
async fn a_publish_right_after_subscribe_is_received() {
    use fred::interfaces::PubsubInterface;

    let ctx = ctx().await;
    for round in 0..25 {
        let opened = futures_util::future::join_all((0..20).map(|i| {
            let ctx = &ctx;
            async move {
                let address = format!("ready.{round}.{i}");
                let sub = ctx.subscribe(&address, PubSub::new(), 8).await;
                let receivers: i64 = ctx
                    .admin
                    .publish(ctx.key(&address), "probe")
                    .await
                    .expect("publish");
                (address, receivers, sub)
            }
        }))
        .await;
        for (address, receivers, _sub) in &opened {
            assert_eq!(
                *receivers, 1,
                "{address}: no subscriber when subscribe returned"
            );
        }
    }
    ctx.cleanup().await;
}
