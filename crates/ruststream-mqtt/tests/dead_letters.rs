//! A mount's dead letter whose topic nobody subscribes to yet, with default options: the
//! copy is kept in the session a default mount on that topic would have, the original is
//! acknowledged (so its subscription goes on), and a consumer started later gets it; a
//! consumer that subscribes within a few seconds gets it whatever its client id.
//! Needs an MQTT 5 broker (Mosquitto 2 on 127.0.0.1:1883; `RUSTSTREAM_MQTT_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream::{App, Mount, Settled, retry};
use ruststream_core::{Broker, Message, SubscribeSpec};
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_nobody_subscribes_to_is_kept_for_its_consumer() {
    let topic = support::unique("kept");
    let dead = format!("{topic}/dead");
    let (settled, mut settlements) = mpsc::unbounded_channel();
    let running = App::new(support::connect().await)
        .mount(
            Mount::new(topic.as_str())
                .max_attempts(1)
                .dead_letter(dead.as_str()),
            |_: String| async { retry() },
        )
        .after_settle(move |s: &Settled| {
            let _ = settled.send((s.is_ok(), s.error().map(ToString::to_string)));
        })
        .start()
        .await
        .expect("starts");
    let publisher = support::connect().await;
    for n in 0..2 {
        publisher
            .publisher()
            .publish(
                topic.as_str().into(),
                Message::new(format!("\"spent {n}\"")),
            )
            .await
            .expect("published");
    }
    // Both spent originals are settled: the dead letters were taken, not owed.
    for n in 0..2 {
        let (ok, error) = tokio::time::timeout(Duration::from_secs(20), settlements.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("original {n} not settled within 20 s: its dead letter is owed")
            })
            .expect("running");
        assert!(ok, "original {n}: {error:?}");
    }
    running.stop().await.expect("a clean stop");

    // The consumer a default mount on the dead-letter topic is gets both.
    let later = support::connect().await;
    let mut letters = later
        .subscribe(SubscribeSpec::new(dead.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let mut got = Vec::new();
    for _ in 0..2 {
        let letter = tokio::time::timeout(Duration::from_secs(10), letters.next())
            .await
            .expect("a kept dead letter within 10 s")
            .expect("open")
            .expect("a delivery");
        got.push(String::from_utf8_lossy(letter.payload()).into_owned());
        letter
            .settle(ruststream_core::Settlement::Accept)
            .await
            .expect("acked");
    }
    got.sort();
    assert_eq!(got, ["\"spent 0\"", "\"spent 1\""]);
    later.close().await;
    publisher.close().await;
}

/// The dead-letter consumer is away for a moment when the dead letter is sent: Mosquitto
/// forgets every shared subscription when it restarts (2.0.11 does not persist them), so
/// until the consumer has connected again and subscribed, its topic has no subscription.
/// It names itself (its own `client_id`, as replicas do), so the session the adapter
/// would keep for the topic, named from the service's URL, is not its own: a copy kept
/// there is never read, and that session, a member of the group from then on, takes its
/// share of every later dead letter. The copy must wait for the consumer instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_reaches_its_consumer_subscribing_soon_after_under_its_own_id() {
    let topic = support::unique("away");
    let dead = format!("{topic}/dead");
    let running = App::new(support::connect_to(&support::url_with("client_id=service")).await)
        .mount(
            Mount::new(topic.as_str())
                .max_attempts(1)
                .dead_letter(dead.as_str()),
            |_: String| async { retry() },
        )
        .start()
        .await
        .expect("starts");
    let publisher = support::connect().await;
    publisher
        .publisher()
        .publish(topic.as_str().into(), Message::new("\"spent\""))
        .await
        .expect("published");
    // The dead letter is under way while its consumer is away.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let consumer = support::connect_to(&support::url_with("client_id=auditor")).await;
    let mut letters = consumer
        .subscribe(SubscribeSpec::new(dead.as_str()))
        .await
        .expect("subscribed")
        .deliveries;
    let letter = tokio::time::timeout(Duration::from_secs(15), letters.next())
        .await
        .expect("the dead letter within 15 s, not kept in a session of another name")
        .expect("open")
        .expect("a delivery");
    assert_eq!(letter.payload().as_ref(), b"\"spent\"");
    letter
        .settle(ruststream_core::Settlement::Accept)
        .await
        .expect("acked");
    running.stop().await.expect("a clean stop");
    consumer.close().await;
    publisher.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_a_topic_no_mount_sends_to_still_fails_unrouted() {
    let broker = support::connect().await;
    let error = broker
        .publisher()
        .publish(support::unique("nobody").into(), Message::new("x"))
        .await
        .expect_err("nobody subscribes");
    assert!(
        error.to_string().contains("no subscription matches"),
        "{error}"
    );
    broker.close().await;
}

/// A dead letter (or `retry_to`) that is no topic name (a filter with `+`, a `$SYS`
/// topic): every copy to it would fail and be owed for ever, the service never ready.
/// The start stops instead, naming the mount and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_that_is_no_topic_name_stops_the_start() {
    let topic = support::unique("badtarget");
    for (mount, says) in [
        (
            Mount::new(topic.as_str()).dead_letter("dead/+/letters"),
            "dead letter dead/+/letters",
        ),
        (
            Mount::new(topic.as_str()).retry_to("$SYS/retries"),
            "retry_to $SYS/retries",
        ),
    ] {
        let started = App::new(support::connect().await)
            .mount(mount, |_: String| async { retry() })
            .start()
            .await;
        let error = match started {
            Ok(_) => panic!("started with {says}"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(says), "{error}");
        assert!(error.contains("is not a topic name"), "{error}");
    }
}
