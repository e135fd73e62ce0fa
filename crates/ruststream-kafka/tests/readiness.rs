//! Readiness follows the cluster: a subscription is detached while its broker is gone
//! or cut off and attached again once it answers, whether or not a record arrives: a
//! restart that loses the group (a new assignment attaches it) and a network blip the
//! group outlives (no new assignment: the subscription asks the cluster).
//! Runs a nisshi of its own (`scripts/kafka.sh install` builds it).

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ruststream_conformance::proxy::Proxy;
use ruststream_core::{Attached, Broker, SubscribeSpec};
use ruststream_kafka::KafkaBroker;

async fn create(own: &support::OwnBroker, topic: &str) {
    support::create_topic_on(own.config(), topic, 1).await;
}

async fn until(attached: &Attached, want: bool, within: Duration) -> Duration {
    let started = Instant::now();
    while attached.is_attached() != want {
        assert!(
            started.elapsed() < within,
            "still {} after {within:?}",
            if want { "detached" } else { "attached" }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

/// A subscription to a new topic on `own`, its stream taken as the runtime would
/// (errors while the broker is gone): its attachment, and how many errors it handed over
/// once the broker closes.
async fn subscribed(
    own: &support::OwnBroker,
    prefix: &str,
) -> (
    KafkaBroker,
    String,
    Attached,
    tokio::task::JoinHandle<usize>,
) {
    let topic = support::unique(prefix);
    create(own, &topic).await;
    let broker = KafkaBroker::connect(&own.url()).await.expect("connects");
    let subscription = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed");
    let mut deliveries = subscription.deliveries;
    let errors = tokio::spawn(async move {
        let mut errors = 0;
        while let Some(item) = deliveries.next().await {
            errors += usize::from(item.is_err());
        }
        errors
    });
    (broker, topic, subscription.attached, errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_subscription_follows_its_broker() {
    let mut own = support::OwnBroker::start();
    let (broker, topic, attached, errors) = subscribed(&own, "ready").await;
    let took = until(&attached, true, Duration::from_secs(20)).await;
    eprintln!("attached after {took:?}");

    own.kill();
    let took = until(&attached, false, Duration::from_secs(30)).await;
    eprintln!("detached {took:?} after the kill");

    own.resume();
    create(&own, &topic).await;
    let took = until(&attached, true, Duration::from_secs(60)).await;
    eprintln!("attached again {took:?} after the restart, no record sent");
    broker.close().await;
    let errors = errors.await.expect("taken");
    eprintln!("{errors} consume errors reported");
    assert!(errors > 0, "the loss of the broker is reported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blip_the_group_outlives_attaches_again_without_a_record() {
    // The proxy binds a port of its own (no window in which another test takes it), and
    // the broker, started after it, advertises that port.
    let port = support::free_port();
    let proxy = Proxy::start(&format!("127.0.0.1:{port}")).await;
    let own = support::OwnBroker::advertising(port, proxy.port());
    let (broker, _, attached, errors) = subscribed(&own, "blip").await;
    until(&attached, true, Duration::from_secs(20)).await;

    // Shorter than the session timeout (45 s): the group keeps the member.
    proxy.down();
    let took = until(&attached, false, Duration::from_secs(30)).await;
    eprintln!("detached {took:?} after the cut");
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.up();
    let took = until(&attached, true, Duration::from_secs(20)).await;
    eprintln!("attached again {took:?} after the blip, no record sent");
    broker.close().await;
    assert!(errors.await.expect("taken") > 0, "the blip is reported");
}

/// An outage is reported once, not once per failed try: the subscription hands the
/// runtime one error for it (the runtime logs each as a WARN), librdkafka's failed tries
/// are logged at debug, and each client says once that the cluster does not answer.
/// Before, a 12-second outage of a service with two mounts logged 74 ERROR and 34 WARN
/// lines; this subscription handed over an error every 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_reported_once_not_per_try() {
    let lines = ruststream_conformance::logs::logs();
    let mut own = support::OwnBroker::start();
    let (broker, topic, attached, errors) = subscribed(&own, "outage").await;
    until(&attached, true, Duration::from_secs(20)).await;
    own.kill();
    until(&attached, false, Duration::from_secs(30)).await;
    // librdkafka tries again many times meanwhile.
    tokio::time::sleep(Duration::from_secs(8)).await;
    own.resume();
    create(&own, &topic).await;
    until(&attached, true, Duration::from_secs(60)).await;
    broker.close().await;
    let errors = errors.await.expect("taken");
    assert!(
        (1..=2).contains(&errors),
        "{errors} consume errors handed over"
    );
    let text = lines.text();
    let said = text
        .lines()
        .filter(|l| l.contains("the cluster does not answer"))
        .count();
    // Once for the consumer and once for the producer at most (the other tests of this
    // binary log into the same capture, each with its own clients).
    assert!(said >= 1, "the outage is said: {text}");
    assert!(
        !text
            .lines()
            .any(|l| l.contains(" ERROR ") && l.contains("kafka")),
        "{text}"
    );
}
