//! Bad input is a clear error, never a panic: URLs, credentials, unreachable brokers,
//! settings, addresses, queues that are missing or disagree with the mount.

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{
    Address, Broker, Message, Setting, Settlement, SubscribeError, SubscribeSpec,
};
use ruststream_lapin::{ConnectError, LapinBroker, QueueType, SubscribeOptions};
use support::{QueueSpec, Rabbit, broker, declare, unique, waiting};

#[tokio::test]
async fn bad_urls_are_errors() {
    for (url, says) in [
        ("127.0.0.1:5672", "not a URL"),
        ("redis://127.0.0.1:6379", "not amqp"),
        #[cfg(not(feature = "tls"))]
        ("amqps://127.0.0.1:5671/%2f", "`tls` feature"),
        ("amqp://guest:guest@/%2f", "no host"),
        ("amqp://127.0.0.1:notaport/%2f", "notaport"),
        ("amqp://127.0.0.1:5672/%2f?prefetch=0", "at least 1"),
        ("amqp://127.0.0.1:5672/%2f?credit=5", "unknown key"),
    ] {
        match LapinBroker::connect(url).await {
            Err(ConnectError::BadUrl(why)) => assert!(why.contains(says), "{url}: {why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn unreachable_brokers_and_bad_credentials_are_errors() {
    let error = LapinBroker::connect("amqp://guest:guest@127.0.0.1:1/%2f")
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(error, ConnectError::Connect { .. }), "{error}");
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
    let url = Rabbit::V3.url().replace("guest:guest", "guest:wrong");
    let error = LapinBroker::connect(&url).await.expect_err("bad password");
    assert!(matches!(error, ConnectError::Connect { .. }), "{error}");
    assert!(
        !error.to_string().contains("wrong"),
        "no password in errors: {error}"
    );
    let url = Rabbit::V4.url().replace("%2f", "no-such-vhost");
    let error = LapinBroker::connect(&url).await.expect_err("no vhost");
    assert!(matches!(error, ConnectError::Connect { .. }), "{error}");
}

async fn subscribe_refusals(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let missing = unique("nothing-here");
    let mut never = SubscribeSpec::new(missing.as_str());
    never
        .options
        .configure(Setting::new("declare", "never", "url"));
    match broker.subscribe(never).await {
        Err(SubscribeError::BadAddress(why)) => {
            assert!(
                why.contains(&missing) && why.contains("declare=never"),
                "{why}"
            );
        }
        other => panic!("missing queue: {other:?}"),
    }
    match broker
        .subscribe(SubscribeSpec::new("/exchanges/amq.direct/k"))
        .await
    {
        Err(SubscribeError::BadAddress(why)) => assert!(why.contains("not a queue"), "{why}"),
        other => panic!("exchange address: {other:?}"),
    }
    let mut spec = SubscribeSpec::new(missing.as_str());
    spec.options.configure(Setting::new(
        "prefetch",
        "many",
        "RUSTSTREAM_MOUNT__X__PREFETCH",
    ));
    match broker.subscribe(spec).await {
        Err(SubscribeError::BadOption(why)) => {
            assert!(why.contains("RUSTSTREAM_MOUNT__X__PREFETCH"), "{why}");
        }
        other => panic!("bad setting: {other:?}"),
    }
    // A queue of another type than declared.
    let classic = unique("classic");
    declare(rabbit, &[(classic.clone(), QueueSpec::classic())]);
    let mut spec = SubscribeSpec::new(classic.as_str());
    spec.options
        .insert(SubscribeOptions::new().declare(QueueType::Quorum));
    match broker.subscribe(spec).await {
        Err(SubscribeError::BadOption(why)) => {
            assert!(why.contains("is a classic queue, declared quorum"), "{why}");
        }
        other => panic!("declared another type: {other:?}"),
    }
    // The connection is still good after the refusals.
    let _ok = broker
        .subscribe(SubscribeSpec::new(classic.as_str()))
        .await
        .expect("subscribes");
    broker.close().await;
}

async fn declare_makes_a_queue_that_dead_letters_itself(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let (queue, dead) = (unique("declared"), unique("declared-dead"));
    declare(rabbit, &[(dead.clone(), QueueSpec::classic())]);
    let spec = || {
        let mut spec = SubscribeSpec::new(queue.as_str());
        spec.declaration.max_attempts = NonZeroU32::new(4);
        spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
        spec.options
            .insert(SubscribeOptions::new().declare(QueueType::Quorum));
        spec
    };
    let sub = broker.subscribe(spec()).await.expect("declared");
    assert!(sub.capabilities.counts && sub.capabilities.dead_letters);
    drop(sub);
    // Found again as it was made.
    let mut found = SubscribeSpec::new(queue.as_str());
    found.declaration = spec().declaration;
    let sub = broker.subscribe(found).await.expect("found");
    assert!(sub.capabilities.dead_letters);
    // A mount that disagrees with the declared queue is refused.
    let mut gone = SubscribeSpec::new(queue.as_str());
    gone.declaration.max_attempts = NonZeroU32::new(9);
    assert!(matches!(
        broker.subscribe(gone).await,
        Err(SubscribeError::BadOption(_))
    ));
    broker.close().await;
    support::delete(rabbit, &queue).await;
}

/// A queue whose name and dead letter are long is found out again: RabbitMQ cuts the
/// refusal that names its dead-letter key (255 bytes at most), and the probe takes the
/// value from the mount's dead letter, which RabbitMQ then confirms.
async fn a_long_named_queue_is_found_out_again(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let long = "x".repeat(100);
    let (queue, dead) = (unique(&format!("q{long}")), unique(&format!("d{long}")));
    declare(rabbit, &[(dead.clone(), QueueSpec::classic())]);
    let spec = |declare: bool| {
        let mut spec = SubscribeSpec::new(queue.as_str());
        spec.declaration.max_attempts = NonZeroU32::new(4);
        spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
        if declare {
            spec.options
                .insert(SubscribeOptions::new().declare(QueueType::Quorum));
        }
        spec
    };
    let sub = broker.subscribe(spec(true)).await.expect("declared");
    assert!(sub.capabilities.dead_letters);
    drop(sub);
    // Found out again, by a mount that does not declare it.
    let sub = broker
        .subscribe(spec(false))
        .await
        .unwrap_or_else(|e| panic!("{rabbit:?}: found again: {e}"));
    assert!(sub.capabilities.dead_letters && sub.capabilities.counts);
    drop(sub);
    broker.close().await;
    support::delete(rabbit, &queue).await;
}

/// A declared quorum queue that dead-letters into a missing queue makes that queue too:
/// RabbitMQ would otherwise have nowhere to put what reaches the cap.
async fn declare_makes_the_dead_letter_queue_too(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let (queue, dead) = (unique("declared-dl"), unique("declared-dl-dead"));
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.declaration.max_attempts = NonZeroU32::new(2);
    spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
    spec.options
        .insert(SubscribeOptions::new().declare(QueueType::Quorum));
    let mut sub = broker.subscribe(spec).await.expect("declared");
    assert!(sub.capabilities.dead_letters);
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("spent"))
        .await
        .expect("sent");
    for _ in 0..2 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .expect("a delivery within 10 s")
            .expect("open")
            .expect("ok");
        d.settle(Settlement::Requeue).await.expect("requeued");
    }
    let mut waiting_dead = 0;
    for _ in 0..50 {
        waiting_dead = waiting(rabbit, &dead).await;
        if waiting_dead == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting_dead, 1, "{rabbit:?}: the dead-letter queue has it");
    broker.close().await;
    support::delete(rabbit, &queue).await;
    support::delete(rabbit, &dead).await;
}

/// A declared classic queue gets no dead-letter exchange: the runtime dead-letters for it
/// (at the cap), and an exchange would also take what a handler drops (`Reject`).
async fn a_declared_classic_queue_has_no_dead_letter_exchange(rabbit: Rabbit) {
    let broker = broker(rabbit).await;
    let (queue, dead) = (unique("declared-classic"), unique("declared-classic-dead"));
    declare(rabbit, &[(dead.clone(), QueueSpec::classic())]);
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.declaration.max_attempts = NonZeroU32::new(4);
    spec.declaration.dead_letter = Some(Address::from(dead.as_str()));
    spec.options
        .insert(SubscribeOptions::new().declare(QueueType::Classic));
    let mut sub = broker.subscribe(spec).await.expect("declared");
    assert!(!sub.capabilities.dead_letters && !sub.capabilities.counts);
    broker
        .publisher()
        .publish(queue.as_str().into(), Message::new("dropped"))
        .await
        .expect("sent");
    let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("a delivery within 10 s")
        .expect("open")
        .expect("ok");
    d.settle(Settlement::Reject).await.expect("rejected");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        waiting(rabbit, &dead).await,
        0,
        "{rabbit:?}: a dropped message was dead-lettered"
    );
    assert_eq!(waiting(rabbit, &queue).await, 0);
    broker.close().await;
    support::delete(rabbit, &queue).await;
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod rabbitmq3 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V3).await; })*
        }
        mod rabbitmq4 {
            $(#[tokio::test] async fn $name() { super::$name(super::Rabbit::V4).await; })*
        }
    };
}

on_both!(
    subscribe_refusals,
    declare_makes_a_queue_that_dead_letters_itself,
    a_declared_classic_queue_has_no_dead_letter_exchange,
    a_long_named_queue_is_found_out_again,
    declare_makes_the_dead_letter_queue_too
);

#[tokio::test]
async fn failover_addresses_are_checked_and_used() {
    use ruststream_lapin::ConnectOptions;
    let options = ConnectOptions::new().failover("rabbit:5672");
    match LapinBroker::connect_with(&Rabbit::V3.url(), options).await {
        Err(ConnectError::BadUrl(why)) => assert!(why.contains("not a URL"), "{why}"),
        other => panic!("bad failover address: {other:?}"),
    }
    // Nothing listens at the URL's own address: the failover address is used.
    let options = ConnectOptions::new().failover(Rabbit::V3.url());
    let broker = LapinBroker::connect_with("amqp://guest:guest@127.0.0.1:1/%2f", options)
        .await
        .expect("connected through the failover address");
    let queue = unique("failover");
    declare(Rabbit::V3, &[(queue.clone(), QueueSpec::classic())]);
    broker
        .publisher()
        .publish(queue.as_str().into(), ruststream_core::Message::new("x"))
        .await
        .expect("published");
    broker.close().await;
    // Neither answers: both are named in the error.
    let options = ConnectOptions::new().failover("amqp://127.0.0.1:2/%2f");
    let error = LapinBroker::connect_with("amqp://127.0.0.1:1/%2f", options)
        .await
        .expect_err("nothing listens");
    let text = error.to_string();
    assert!(
        text.contains("127.0.0.1:1/") && text.contains("127.0.0.1:2/"),
        "{text}"
    );
}
