//! Persistent sessions on a real MQTT 5 broker (Mosquitto 2 on 127.0.0.1:1883,
//! `RUSTSTREAM_MQTT_URL`): what a subscription did not acknowledge comes back when its
//! session resumes, what is published while it is away waits in the session, and an
//! abandoned delivery comes back on a new connection the subscription makes itself.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Delivery, DeliveryStream, Message, Settlement, SubscribeSpec};

/// How long anything that must arrive may take.
const WAIT: Duration = Duration::from_secs(10);

async fn next(deliveries: &mut DeliveryStream) -> Delivery {
    loop {
        match tokio::time::timeout(WAIT, deliveries.next()).await {
            Ok(Some(Ok(delivery))) => return delivery,
            Ok(Some(Err(error))) => eprintln!("consume error: {error}"),
            Ok(None) => panic!("the subscription ended"),
            Err(_) => panic!("no delivery within {WAIT:?}"),
        }
    }
}

async fn nothing_for(deliveries: &mut DeliveryStream, quiet: Duration) {
    if let Ok(Some(item)) = tokio::time::timeout(quiet, deliveries.next()).await {
        panic!(
            "expected nothing, got {:?}",
            item.map(|d| d.payload().clone())
        );
    }
}

/// A subscription of `topic` holding up to 16 deliveries at once (the receive maximum).
fn spec(topic: &str) -> SubscribeSpec {
    let mut spec = SubscribeSpec::new(topic);
    spec.in_flight = 16;
    spec
}

fn text(delivery: &Delivery) -> String {
    String::from_utf8_lossy(delivery.payload()).into_owned()
}

async fn publish(broker: &impl Broker, topic: &str, payload: &str) {
    broker
        .publisher()
        .publish(topic.into(), Message::new(payload.to_owned()))
        .await
        .expect("published");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_deliveries_and_those_sent_meanwhile_come_back_when_the_session_resumes() {
    let topic = support::unique("session");
    let first = support::connect().await;
    let mut subscription = first.subscribe(spec(&topic)).await.expect("subscribed");
    for payload in ["one", "two", "three"] {
        publish(&first, &topic, payload).await;
    }
    let one = next(&mut subscription.deliveries).await;
    let two = next(&mut subscription.deliveries).await;
    let three = next(&mut subscription.deliveries).await;
    assert_eq!(
        [text(&one), text(&two), text(&three)],
        ["one", "two", "three"]
    );
    one.settle(Settlement::Accept).await.expect("acked");
    first.close().await;
    drop((two, three));

    // Published while the session has no connection: the broker keeps it for the session.
    let other = support::connect().await;
    publish(&other, &topic, "four").await;

    let second = support::connect().await;
    let mut again = second
        .subscribe(spec(&topic))
        .await
        .expect("subscribed again");
    let mut back = Vec::new();
    for _ in 0..3 {
        let delivery = next(&mut again.deliveries).await;
        back.push(text(&delivery));
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    back.sort();
    assert_eq!(
        back,
        ["four", "three", "two"],
        "the unacked and the one sent meanwhile"
    );
    nothing_for(&mut again.deliveries, Duration::from_secs(1)).await;
    second.close().await;
    other.close().await;

    // All acknowledged: a third connection of the session gets nothing.
    let third = support::connect().await;
    let mut last = third
        .subscribe(spec(&topic))
        .await
        .expect("subscribed a third time");
    nothing_for(&mut last.deliveries, Duration::from_secs(1)).await;
    third.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_delivery_comes_back_without_holding_later_ones() {
    let topic = support::unique("abandon");
    let broker = support::connect().await;
    let mut subscription = broker.subscribe(spec(&topic)).await.expect("subscribed");
    publish(&broker, &topic, "given back").await;
    publish(&broker, &topic, "acked").await;
    let given_back = next(&mut subscription.deliveries).await;
    let acked = next(&mut subscription.deliveries).await;
    assert_eq!(text(&acked), "acked");
    drop(given_back);
    // The later delivery's PUBACK is not held behind the abandoned one.
    tokio::time::timeout(WAIT, acked.settle(Settlement::Accept))
        .await
        .expect("settled in time")
        .expect("acked");
    let back = next(&mut subscription.deliveries).await;
    assert_eq!(text(&back), "given back");
    back.settle(Settlement::Accept).await.expect("acked");
    nothing_for(&mut subscription.deliveries, Duration::from_secs(1)).await;
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_is_not_supported_and_bad_addresses_are_refused() {
    let broker = support::connect().await;
    for bad in ["a/#/b", "a+", "", "$SYS/#"] {
        let error = broker
            .subscribe(SubscribeSpec::new(bad))
            .await
            .expect_err(bad);
        assert!(
            error.to_string().contains("bad address"),
            "{bad:?}: {error}"
        );
    }
    let error = broker
        .publisher()
        .publish("a/+".into(), Message::new("x"))
        .await
        .expect_err("a filter is no topic");
    assert!(error.to_string().contains("bad address"), "{error}");
    let topic = support::unique("requeue");
    let mut subscription = broker.subscribe(spec(&topic)).await.expect("subscribed");
    publish(&broker, &topic, "x").await;
    let delivery = next(&mut subscription.deliveries).await;
    let refused = delivery.settle(Settlement::Requeue).await;
    assert_eq!(refused, Err(ruststream_core::AckError::Unsupported));
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_broker_fails_connect_with_where() {
    let error = ruststream_mqtt::MqttBroker::connect("mqtt://127.0.0.1:1")
        .await
        .err()
        .expect("nothing listens on port 1");
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
}

/// What a killed process leaves: connections closed by the system, no DISCONNECT, no
/// PUBACK. Its runtime is shut down under the subscription; the session's next
/// connection gets what it held.
#[test]
fn a_connection_cut_without_disconnect_gives_back_what_it_held() {
    let topic = support::unique("cut");
    let runtime = |name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let doomed = runtime("doomed");
    let held = doomed.block_on(async {
        let broker = support::connect().await;
        let mut subscription = broker.subscribe(spec(&topic)).await.expect("subscribed");
        for payload in ["held one", "held two"] {
            publish(&broker, &topic, payload).await;
        }
        let one = next(&mut subscription.deliveries).await;
        let two = next(&mut subscription.deliveries).await;
        (broker, subscription, one, two)
    });
    // The "kill": every task of the runtime goes, its sockets closed, nothing sent.
    doomed.shutdown_background();
    drop(held);
    runtime("after").block_on(async {
        let broker = support::connect().await;
        let mut subscription = broker.subscribe(spec(&topic)).await.expect("subscribed");
        let mut back = Vec::new();
        for _ in 0..2 {
            let delivery = next(&mut subscription.deliveries).await;
            back.push(text(&delivery));
            delivery.settle(Settlement::Accept).await.expect("acked");
        }
        back.sort();
        assert_eq!(back, ["held one", "held two"]);
        broker.close().await;
    });
}

/// Two members of one group, one away: Mosquitto 2.0 still hands the away session its
/// share; it gets it when it connects again. Nothing is lost or handed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_away_member_of_a_group_gets_its_share_when_it_comes_back() {
    const N: usize = 10;
    let topic = support::unique("away");
    async fn member(id: &str) -> ruststream_mqtt::MqttBroker {
        support::connect_to(&support::url_with(&format!("client_id={id}"))).await
    }
    let away_id = format!("away-{}", std::process::id());
    let here_id = format!("here-{}", std::process::id());
    let away = member(&away_id).await;
    drop(away.subscribe(spec(&topic)).await.expect("subscribed"));
    away.close().await;
    let here = member(&here_id).await;
    let mut subscription = here.subscribe(spec(&topic)).await.expect("subscribed");
    for n in 0..N {
        publish(&here, &topic, &n.to_string()).await;
    }
    let mut got = Vec::new();
    while let Ok(Some(Ok(delivery))) =
        tokio::time::timeout(Duration::from_secs(1), subscription.deliveries.next()).await
    {
        got.push(text(&delivery));
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    let connected = got.len();
    here.close().await;
    let back = member(&away_id).await;
    let mut subscription = back.subscribe(spec(&topic)).await.expect("subscribed");
    while let Ok(Some(Ok(delivery))) =
        tokio::time::timeout(Duration::from_secs(1), subscription.deliveries.next()).await
    {
        got.push(text(&delivery));
        delivery.settle(Settlement::Accept).await.expect("acked");
    }
    back.close().await;
    eprintln!(
        "the connected member got {connected} of {N}, the away one {}",
        got.len() - connected
    );
    got.sort_by_key(|n| n.parse::<usize>().unwrap_or(usize::MAX));
    let expected: Vec<String> = (0..N).map(|n| n.to_string()).collect();
    assert_eq!(got, expected, "each message once, across both members");
}
