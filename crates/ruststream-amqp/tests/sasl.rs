//! SASL against RabbitMQ 4: PLAIN with the URL's credentials, ANONYMOUS without any
//! (RabbitMQ 4 lets an anonymous client in as its `anonymous_login_user`, `guest` by
//! default), and a wrong password refused with an error, not a hang.

mod support;

use std::time::Duration;

use ruststream_amqp::{AmqpBroker, ConnectError, ConnectOptions, SubscribeOptions};
use ruststream_core::{Broker, Declaration, Message, Settlement};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("sasl-plain");
    q.quorum("sasl-anonymous");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// `url()` with its user information replaced by `userinfo` (`""`: none).
fn with_userinfo(userinfo: &str) -> String {
    let url = url();
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{userinfo}{host}")
}

/// Publishes, consumes and settles one message on `queue` through `broker`.
async fn round_trip(broker: &AmqpBroker, queue: &str) {
    broker
        .publisher()
        .publish(queue.into(), Message::new("{\"n\":1}"))
        .await
        .expect("publish");
    let mut sub = subscribe(
        broker,
        spec(queue, SubscribeOptions::new(), Declaration::default()),
    )
    .await;
    let d = next(&mut sub, 10).await;
    assert_eq!(d.payload().as_ref(), b"{\"n\":1}");
    d.settle(Settlement::Accept).await.expect("accepted");
}

#[tokio::test]
async fn plain_with_the_urls_credentials() {
    let broker = broker_at(&with_userinfo("guest:guest@"), ConnectOptions::new()).await;
    round_trip(&broker, &q("sasl-plain")).await;
    broker.close().await;
}

#[tokio::test]
async fn anonymous_without_credentials() {
    let broker = broker_at(&with_userinfo(""), ConnectOptions::new()).await;
    round_trip(&broker, &q("sasl-anonymous")).await;
    broker.close().await;
}

#[tokio::test]
async fn a_wrong_password_is_refused() {
    let url = with_userinfo("guest:wrong@");
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        AmqpBroker::connect_with(&url, ConnectOptions::new()),
    )
    .await
    .expect("refused in time, not hanging");
    match result {
        Err(ConnectError::Open(reason)) => assert!(reason.contains("SASL"), "{reason}"),
        Err(other) => panic!("refused, but not by SASL: {other}"),
        Ok(_) => panic!("a wrong password connected"),
    }
}
