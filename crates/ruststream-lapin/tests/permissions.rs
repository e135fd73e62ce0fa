//! A user who may read a queue but not configure it cannot probe what the queue is: the
//! subscription still opens, with the defaults of a classic queue (or what the options
//! say), and consumes.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Settlement, SubscribeSpec};
use ruststream_lapin::{LapinBroker, QueueOptions, SubscribeOptions};
use support::{QueueSpec, Rabbit, broker, declare, unique};

async fn a_reader_without_configure_permission_consumes(rabbit: Rabbit) {
    let queue = unique("readonly");
    declare(rabbit, &[(queue.clone(), QueueSpec::quorum())]);
    let user = unique("reader");
    rabbit.ctl(&["add_user", &user, "secret"]);
    rabbit.ctl(&[
        "set_permissions",
        "-p",
        "/",
        &user,
        "^$",
        "^amq\\.default$",
        ".*",
    ]);
    let url = rabbit
        .url()
        .replace("guest:guest", &format!("{user}:secret"));
    let reader = LapinBroker::connect(&url)
        .await
        .expect("the reader connects");
    let sub = reader
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribes");
    assert!(!sub.capabilities.counts, "what the queue is stays unknown");
    drop(sub);
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.options
        .insert(SubscribeOptions::new().queue(QueueOptions::new().counts(true)));
    let mut sub = reader.subscribe(spec).await.expect("subscribes");
    assert!(sub.capabilities.counts, "the option says it");
    let owner = broker(rabbit).await;
    owner
        .publisher()
        .publish(queue.as_str().into(), Message::new("hi"))
        .await
        .expect("sent");
    let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
        .await
        .expect("a delivery")
        .expect("open")
        .expect("ok");
    assert_eq!(d.payload().as_ref(), b"hi");
    d.settle(Settlement::Accept).await.expect("acked");
    reader.close().await;
    owner.close().await;
    rabbit.ctl(&["delete_user", &user]);
}

#[tokio::test]
async fn a_reader_without_configure_permission_consumes_3() {
    a_reader_without_configure_permission_consumes(Rabbit::V3).await;
}

#[tokio::test]
async fn a_reader_without_configure_permission_consumes_4() {
    a_reader_without_configure_permission_consumes(Rabbit::V4).await;
}
