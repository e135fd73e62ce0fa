//! Cut connections, through a TCP proxy (`ruststream_conformance::proxy`) in front of a real MQTT 5 broker (Mosquitto 2 on
//! 127.0.0.1:1883, `RUSTSTREAM_MQTT_URL`): a subscription detaches, reconnects with
//! back-off, resumes its session and gets again what it had not acknowledged; a
//! settlement of a delivery of the lost connection fails with `Disconnected`; publishing
//! goes on over the new connection.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_conformance::proxy::Proxy;
use ruststream_core::{
    AckError, Broker, Delivery, DeliveryStream, Message, Settlement, SubscribeSpec,
};

const WAIT: Duration = Duration::from_secs(15);

/// A proxy to the broker under test, and the URL through it.
async fn proxy() -> (Proxy, String) {
    support::require_broker();
    let proxy = Proxy::start(&support::host_port()).await;
    let through = format!("mqtt://127.0.0.1:{}", proxy.port());
    (proxy, through)
}

async fn next(deliveries: &mut DeliveryStream) -> Delivery {
    loop {
        match tokio::time::timeout(WAIT, deliveries.next()).await {
            Ok(Some(Ok(delivery))) => return delivery,
            Ok(Some(Err(error))) => eprintln!("consume error (expected once): {error}"),
            Ok(None) => panic!("the subscription ended"),
            Err(_) => panic!("no delivery within {WAIT:?}"),
        }
    }
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_connection_is_resumed_and_what_was_unacknowledged_comes_again() {
    let (proxy, through) = proxy().await;
    let topic = support::unique("reconnect");
    let broker = support::connect_to(&through).await;
    let mut spec = SubscribeSpec::new(topic.as_str());
    spec.in_flight = 16;
    let mut subscription = broker.subscribe(spec).await.expect("subscribed");
    let direct = support::connect().await;
    let publish = |payload: &'static str| {
        let publisher = direct.publisher();
        let topic = topic.clone();
        async move {
            publisher
                .publish(topic.as_str().into(), Message::new(payload))
                .await
                .expect("published");
        }
    };
    publish("before").await;
    let before = next(&mut subscription.deliveries).await;
    assert_eq!(before.payload().as_ref(), b"before");

    proxy.cut();
    let attached = subscription.attached.clone();
    until("detached", || !attached.is_attached()).await;
    assert_eq!(
        before.settle(Settlement::Accept).await,
        Err(AckError::Disconnected),
        "the PUBACK of a lost connection cannot be written"
    );
    until("attached again", || attached.is_attached()).await;
    assert!(attached.reconnects() >= 1, "counted as a reconnect");

    let again = next(&mut subscription.deliveries).await;
    assert_eq!(
        again.payload().as_ref(),
        b"before",
        "sent again on the resumed session"
    );
    again.settle(Settlement::Accept).await.expect("acked");
    publish("after").await;
    let after = next(&mut subscription.deliveries).await;
    assert_eq!(after.payload().as_ref(), b"after");
    after.settle(Settlement::Accept).await.expect("acked");

    // The broker's own publisher reconnected too.
    broker
        .publisher()
        .publish(topic.as_str().into(), Message::new("through the proxy"))
        .await
        .expect("published after the cut");
    let last = next(&mut subscription.deliveries).await;
    assert_eq!(last.payload().as_ref(), b"through the proxy");
    last.settle(Settlement::Accept).await.expect("acked");
    broker.close().await;
    direct.close().await;
}

/// An outage is said once, not once per failed try: while the broker is away the client
/// tries again with back-off (several tries in 5 s), and the subscription hands the
/// runtime one error for the whole outage (the runtime logs each as a WARN). It handed
/// one over for each failed try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_one_error_not_one_per_try() {
    let (proxy, through) = proxy().await;
    let topic = support::unique("outage");
    let broker = support::connect_to(&through).await;
    let subscription = broker
        .subscribe(SubscribeSpec::new(topic.as_str()))
        .await
        .expect("subscribed");
    let attached = subscription.attached.clone();
    let mut deliveries = subscription.deliveries;
    let errors = tokio::spawn(async move {
        let mut errors = 0;
        while let Some(item) = deliveries.next().await {
            errors += usize::from(item.is_err());
        }
        errors
    });
    proxy.down();
    until("detached", || !attached.is_attached()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.up();
    until("attached again", || attached.is_attached()).await;
    broker.close().await;
    let errors = errors.await.expect("counted");
    assert_eq!(errors, 1, "errors handed over for one outage");
}
