//! Publisher confirms: a publish resolves when the broker has the message; one the
//! broker cannot take comes back in the error.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_conformance::proxy::Proxy;
use ruststream_core::{Broker, Message, PublishErrorKind, Settlement, SubscribeSpec};
use ruststream_lapin::{ConnectOptions, LapinBroker};
use support::{QueueSpec, Rabbit, broker, declare, delete, unique, waiting};

async fn confirmed_publish_is_in_the_queue(rabbit: Rabbit) {
    let queue = unique("confirmed");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let broker = broker(rabbit).await;
    let publisher = broker.publisher();
    for i in 0..20 {
        publisher
            .publish(queue.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("confirmed");
    }
    // Confirmed means stored: all of them are counted right away.
    assert_eq!(waiting(rabbit, &queue).await, 20);
    let mut sub = broker
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    let d = tokio::time::timeout(Duration::from_secs(5), sub.deliveries.next())
        .await
        .expect("a delivery")
        .expect("open")
        .expect("ok");
    assert_eq!(d.payload().as_ref(), b"m0");
    d.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
}

async fn unroutable_and_missing_exchange_hand_the_message_back(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let publisher = broker.publisher();
    // No queue of that name: the mandatory message is returned.
    let missing = unique("missing");
    let error = publisher
        .publish(
            missing.as_str().into(),
            Message::new("lost?").with_header("x-k", "v"),
        )
        .await
        .expect_err("returned");
    assert!(
        matches!(&error.kind, PublishErrorKind::Refused(why) if why.contains("NO_ROUTE")),
        "{error}"
    );
    assert_eq!(error.message.payload.as_ref(), b"lost?");
    assert_eq!(error.message.headers.get_str("x-k"), Some("v"));
    assert_eq!(error.address, missing);

    // No such exchange.
    let to = format!("/exchanges/{}/key", unique("no-exchange"));
    let error = publisher
        .publish(to.as_str().into(), Message::new("nowhere"))
        .await
        .expect_err("no exchange");
    assert!(
        matches!(&error.kind, PublishErrorKind::Refused(why) if why.contains("no exchange")),
        "{error}"
    );
    assert_eq!(error.message.payload.as_ref(), b"nowhere");

    // An exchange with nothing bound for the key: returned as well.
    let error = publisher
        .publish(
            "/exchanges/amq.direct/nobody-binds-this".into(),
            Message::new("x"),
        )
        .await
        .expect_err("unroutable");
    assert!(
        matches!(error.kind, PublishErrorKind::Refused(_)),
        "{error}"
    );

    // A bad address never reaches the broker.
    let error = publisher
        .publish("/topics/x".into(), Message::new("x"))
        .await
        .expect_err("bad address");
    assert!(
        matches!(
            error.kind,
            PublishErrorKind::Refused(_) | PublishErrorKind::BadAddress(_)
        ),
        "{error}"
    );

    // Publishing goes on after the refusals, on the same connection.
    let queue = unique("after");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    publisher
        .publish(queue.as_str().into(), Message::new("fine"))
        .await
        .expect("confirmed");
    broker.close().await;
    let error = publisher
        .publish(queue.as_str().into(), Message::new("late"))
        .await
        .expect_err("closed");
    assert!(matches!(error.kind, PublishErrorKind::Closed), "{error}");
}

async fn concurrent_publishes_each_get_their_own_answer(rabbit: Rabbit) {
    // Returns and confirms of many publishes in flight at once must not be mixed up:
    // every publish to the missing queue fails, every other one succeeds.
    let broker = broker(rabbit).await;
    let publisher = broker.publisher();
    let queue = unique("mixed");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let missing = unique("mixed-missing");
    let sends = (0..200).map(|i| {
        let publisher = publisher.clone();
        let to = if i % 3 == 0 {
            missing.clone()
        } else {
            queue.clone()
        };
        async move {
            (
                i,
                publisher
                    .publish(to.as_str().into(), Message::new(format!("{i}")))
                    .await,
            )
        }
    });
    let results = futures_util::future::join_all(sends).await;
    for (i, result) in results {
        assert_eq!(result.is_err(), i % 3 == 0, "publish {i}: {result:?}");
    }
    assert_eq!(waiting(rabbit, &queue).await, 133);
    broker.close().await;
}

#[tokio::test]
async fn confirmed_publish_is_in_the_queue_3() {
    confirmed_publish_is_in_the_queue(Rabbit::V3).await;
}

#[tokio::test]
async fn confirmed_publish_is_in_the_queue_4() {
    confirmed_publish_is_in_the_queue(Rabbit::V4).await;
}

#[tokio::test]
async fn unroutable_and_missing_exchange_hand_the_message_back_3() {
    unroutable_and_missing_exchange_hand_the_message_back(Rabbit::V3).await;
}

#[tokio::test]
async fn unroutable_and_missing_exchange_hand_the_message_back_4() {
    unroutable_and_missing_exchange_hand_the_message_back(Rabbit::V4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_each_get_their_own_answer_3() {
    concurrent_publishes_each_get_their_own_answer(Rabbit::V3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_each_get_their_own_answer_4() {
    concurrent_publishes_each_get_their_own_answer(Rabbit::V4).await;
}

/// RabbitMQ's `max_message_size` (16 MiB by default on RabbitMQ 4, 128 MiB on 3.x), as
/// the node has it.
fn max_message_size(rabbit: Rabbit) -> usize {
    let said = rabbit.ctl(&[
        "-q",
        "eval",
        "application:get_env(rabbit, max_message_size).",
    ]);
    said.trim()
        .strip_prefix("{ok,")
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no max_message_size in the node's settings: {said}"))
}

/// A message over the broker's `max_message_size`: AMQP 0-9-1 announces no limit, so
/// the broker closes the channel over it, naming its limit. That is `TooLarge` with the
/// broker's limit (a copy refused so is not tried again for ever), the message comes
/// back, the next publishes go on, and `Publish::check` knows the limit from then on.
#[tokio::test]
async fn a_message_over_max_message_size_is_too_large_naming_the_limit_4() {
    let rabbit = Rabbit::V4;
    let limit = max_message_size(rabbit);
    let queue = unique("large");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let broker = broker(rabbit).await;
    let publisher = broker.publisher();
    let large = Message::new(vec![b'x'; limit + 1]);
    assert_eq!(
        publisher.check(&queue.as_str().into(), &large),
        Ok(()),
        "nothing known before the broker said it"
    );
    let error = publisher
        .publish(queue.as_str().into(), large.clone())
        .await
        .expect_err("over the limit");
    assert_eq!(
        error.kind,
        PublishErrorKind::TooLarge {
            size: limit + 1,
            limit
        },
        "{error}"
    );
    assert_eq!(
        error.message.payload, large.payload,
        "the message comes back"
    );
    assert_eq!(
        publisher.check(&queue.as_str().into(), &large),
        Err(PublishErrorKind::TooLarge {
            size: limit + 1,
            limit
        })
    );
    publisher
        .publish(queue.as_str().into(), Message::new("small"))
        .await
        .expect("the next publish goes on");
    assert_eq!(waiting(rabbit, &queue).await, 1);
    broker.close().await;
}

/// `publish_timeout` bounds the wait for the broker's confirm, not only for a
/// connection: on a network that drops everything (nothing closed), the message comes
/// back as `Disconnected` after the timeout. Before, the publish waited until the
/// connection's heartbeat gave up, a minute or more (and a delayed copy parked that way
/// held its original's settlement as long).
async fn a_publish_never_confirmed_comes_back_after_the_publish_timeout(rabbit: Rabbit) {
    let queue = unique("stalled");
    declare(rabbit, &[(queue.clone(), QueueSpec::classic())]);
    let proxy = Proxy::to_url(&rabbit.url()).await;
    let options = ConnectOptions::new().publish_timeout(Duration::from_secs(1));
    let lapin = LapinBroker::connect_with(&proxy.through(&rabbit.url()), options)
        .await
        .expect("connected through the proxy");
    let publisher = lapin.publisher();
    publisher
        .publish(queue.as_str().into(), Message::new("first"))
        .await
        .expect("confirmed before the stall");
    proxy.stall();
    let started = std::time::Instant::now();
    let publish = publisher.publish(queue.as_str().into(), Message::new("stalled"));
    let e = tokio::time::timeout(Duration::from_secs(20), publish)
        .await
        .expect("handed back at the publish timeout, not the heartbeat's")
        .expect_err("never confirmed");
    assert!(
        matches!(e.kind, PublishErrorKind::Disconnected),
        "{rabbit:?}: {e:?}"
    );
    assert_eq!(e.message.payload.as_ref(), b"stalled");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    proxy.resume();
    lapin.close().await;
    delete(rabbit, &queue).await;
}

#[tokio::test]
async fn a_publish_never_confirmed_comes_back_after_the_publish_timeout_3() {
    a_publish_never_confirmed_comes_back_after_the_publish_timeout(Rabbit::V3).await;
}

#[tokio::test]
async fn a_publish_never_confirmed_comes_back_after_the_publish_timeout_4() {
    a_publish_never_confirmed_comes_back_after_the_publish_timeout(Rabbit::V4).await;
}
