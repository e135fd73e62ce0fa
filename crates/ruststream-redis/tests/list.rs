//! The plain list form: at most once, settlement unsupported, retries are runtime copies.

mod support;

use std::time::Duration;

use ruststream_core::{AckError, Broker, Capabilities, Declaration, Verdict};
use ruststream_redis::List;
use support::{assert_unsupported, complete, copy_after, ctx, msg, n_of, next};

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
