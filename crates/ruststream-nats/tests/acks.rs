//! Settlements are plain acknowledgements by default (published, no reply subject: no
//! round trip per delivery), and confirmed ones (a request, JetStream's "double ack")
//! where `JetStream::confirm_acks(true)` or the setting `confirm_acks=true` says so. A
//! plain client subscribed to the stream's acknowledgement subjects sees which: a
//! request carries the inbox its answer goes to.
//! Needs NATS with JetStream (`RUSTSTREAM_NATS_URL`).

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_core::{Broker, Message, Setting, Settlement, SubscribeSpec};
use ruststream_nats::{JetStream, NatsBroker};
use support::{broker, next, publish, try_next, unique};

const WAIT: Duration = Duration::from_secs(10);

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::delete_streams(&self.0);
    }
}

/// Subscribes to `subject` with `spec`'s options, settles one delivery with `Accept`,
/// and returns whether its acknowledgement, as the server saw it, asked for an answer.
async fn acknowledged_with_reply(broker: &NatsBroker, subject: &str, spec: SubscribeSpec) -> bool {
    let mut sub = broker.subscribe(spec).await.expect("subscribe");
    let watcher = support::client().await;
    let mut acks = watcher
        .subscribe(format!("$JS.ACK.{}.>", subject.replace('.', "_")))
        .await
        .expect("watch the acknowledgements");
    // The server takes a connection's operations in order: once it answered a request
    // on this connection, it has the subscription. (`flush` only writes it out: under
    // load the acknowledgement could reach the server first, unseen.)
    watcher
        .request("$JS.API.INFO", bytes::Bytes::new())
        .await
        .expect("a round trip after the subscription");
    publish(broker, subject, Message::new("one")).await;
    let delivery = next(&mut sub, WAIT).await;
    delivery.settle(Settlement::Accept).await.expect("settled");
    let ack = tokio::time::timeout(WAIT, acks.next())
        .await
        .expect("the acknowledgement within the wait")
        .expect("a message");
    assert_eq!(ack.payload.as_ref(), b"+ACK");
    assert!(
        try_next(&mut sub, Duration::from_secs(1)).await.is_none(),
        "acknowledged: not delivered again"
    );
    ack.reply.is_some()
}

#[tokio::test]
async fn the_default_acknowledgement_is_plain() {
    let subject = unique("plainack");
    let _cleanup = Cleanup(subject.clone());
    let broker = broker().await;
    let spec = SubscribeSpec::new(subject.as_str());
    assert!(
        !acknowledged_with_reply(&broker, &subject, spec).await,
        "the default waits for no answer"
    );
}

#[tokio::test]
async fn confirm_acks_sends_requests() {
    let subject = unique("confirmack");
    let _cleanup = Cleanup(subject.clone());
    let broker = broker().await;
    let mut spec = SubscribeSpec::new(subject.as_str());
    spec.options.insert(JetStream::new().confirm_acks(true));
    assert!(acknowledged_with_reply(&broker, &subject, spec).await);
}

/// The setting, from the URL's query and from the mount; the mount's comes after the
/// URL's and wins; an unknown key is an error naming the known one.
#[tokio::test]
async fn the_confirm_acks_setting_from_the_url_and_the_mount() {
    let subject = unique("confirmurl");
    let _cleanup = Cleanup(subject.clone());
    let url = format!("{}?confirm_acks=true", support::url());
    let broker = NatsBroker::connect(&url).await.expect("connect");
    let spec = SubscribeSpec::new(subject.as_str());
    assert!(acknowledged_with_reply(&broker, &subject, spec).await);

    let subject = unique("confirmmount");
    let _cleanup = Cleanup(subject.clone());
    let mut spec = SubscribeSpec::new(subject.as_str());
    spec.options.configure(Setting::new(
        "confirm_acks",
        "false",
        "RUSTSTREAM_MOUNT__X__CONFIRM_ACKS",
    ));
    assert!(!acknowledged_with_reply(&broker, &subject, spec).await);

    let error = NatsBroker::connect(&format!("{}?prefetch=8", support::url()))
        .await
        .expect_err("an unknown key");
    assert!(error.to_string().contains("known: confirm_acks"), "{error}");
    let mut spec = SubscribeSpec::new(unique("badsetting"));
    spec.options
        .configure(Setting::new("confirm_acks", "sometimes", "env"));
    let error = broker.subscribe(spec).await.expect_err("a bad value");
    assert!(error.to_string().contains("confirm_acks"), "{error}");
}
