//! SPEC §3, credit: a slow consumer never holds more than its credit; a long run never
//! stalls; settling from other tasks while receiving. Needs RabbitMQ 4.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use ruststream_amqp::SubscribeOptions;
use ruststream_core::Broker;
use ruststream_core::{Declaration, Settlement, Subscription};
use support::*;

fn topology(q: &mut Queues) {
    q.quorum("slow");
    q.classic("slow-classic");
    q.quorum("slow-default");
    q.quorum("long");
    q.classic("long-classic");
    q.quorum("amo");
}

fn q(role: &str) -> String {
    name(topology, role)
}

/// Takes every delivery that arrives within `millis` without settling it; `Err`: the
/// subscription reported its link lost.
async fn take_all(
    sub: &mut Subscription,
    held: &mut Vec<ruststream_core::Delivery>,
    millis: u64,
) -> Result<(), String> {
    while let Ok(Some(item)) =
        tokio::time::timeout(Duration::from_millis(millis), sub.deliveries.next()).await
    {
        held.push(item.map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// Whether the broker sends a quorum queue's consumer more than its credit once the
/// credit runs out behind a backlog: RabbitMQ 4.3 does (the crate docs' known limits),
/// and fe2o3 then loses the link. There the tests below check that it still does, so
/// that the day it no longer does they fail and the caveat goes.
fn over_sends_credit(quorum: bool) -> bool {
    quorum && release() >= (4, 3)
}

/// `lost` is RabbitMQ 4.3's over-sending, where it is expected.
fn known_over_send(quorum: bool, lost: &str) {
    assert!(
        over_sends_credit(quorum) && lost.contains("more message transfers than currently allowed"),
        "link lost on RabbitMQ {:?}: {lost}",
        release()
    );
}

/// The broker kept to the credit: where RabbitMQ 4.3 did not, it now does.
fn kept_to_credit(quorum: bool) {
    assert!(
        !over_sends_credit(quorum),
        "RabbitMQ {:?} now keeps to a quorum queue's credit: drop the known limit from the \
         crate docs and this check",
        release()
    );
}

/// A backlog of five credits' worth, taken by a consumer that settles half of what it
/// holds at a time: it never holds more than its `credit` (`None`: the default).
async fn never_more_than_the_credit(role: &str, quorum: bool, credit: Option<u32>) {
    let broker = broker().await;
    let queue = q(role);
    let options = match credit {
        Some(credit) => SubscribeOptions::new().credit(credit),
        None => SubscribeOptions::new(),
    };
    let credit = credit.unwrap_or(ruststream_amqp::DEFAULT_CREDIT);
    let messages = 5 * credit as usize;
    publish_n(&broker, &queue, messages, "m").await;
    let mut sub = subscribe(&broker, spec(&queue, options, Declaration::default())).await;
    let mut held = Vec::new();
    let mut total = 0;
    while total < messages {
        if let Err(lost) = take_all(&mut sub, &mut held, 400).await {
            known_over_send(quorum, &lost);
            return;
        }
        assert!(
            held.len() <= credit as usize,
            "holding {} > credit {credit}",
            held.len()
        );
        assert!(!held.is_empty(), "stalled after {total}");
        // A slow consumer: settle only half of what it holds, oldest first.
        let k = held.len().div_ceil(2);
        for d in held.drain(..k) {
            d.settle(Settlement::Accept).await.expect("accept");
            total += 1;
        }
    }
    for d in held.drain(..) {
        d.settle(Settlement::Accept).await.expect("accept");
    }
    broker.close().await;
    kept_to_credit(quorum);
}

#[tokio::test]
async fn a_slow_consumer_never_holds_more_than_its_credit_quorum_credit_8() {
    never_more_than_the_credit("slow", true, Some(8)).await;
}

#[tokio::test]
async fn a_slow_consumer_never_holds_more_than_its_credit_classic_credit_8() {
    never_more_than_the_credit("slow-classic", false, Some(8)).await;
}

#[tokio::test]
async fn a_slow_consumer_never_holds_more_than_its_credit_quorum() {
    never_more_than_the_credit("slow-default", true, None).await;
}

async fn long_run(role: &str, credit: u32, n: usize) {
    let broker = broker().await;
    let queue = q(role);
    let publisher = broker.amqp_publisher().clone();
    let address: ruststream_core::Address = queue.as_str().into();
    // Publish concurrently with consuming.
    let producer = tokio::spawn(async move {
        for i in 0..n {
            publisher
                .send(&address, ruststream_core::Message::new(format!("{i}")))
                .await
                .expect("publish");
        }
    });
    let options = SubscribeOptions::new().credit(credit);
    let mut sub = subscribe(&broker, spec(&queue, options, Declaration::default())).await;
    // Settle from other tasks, so settling never runs on the receiving task.
    let mut settles = Vec::new();
    for i in 0..n {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .unwrap_or_else(|_| panic!("stalled after {i} of {n}"))
            .expect("stream")
            .expect("delivery");
        settles.push(tokio::spawn(
            async move { d.settle(Settlement::Accept).await },
        ));
    }
    for s in settles {
        s.await.expect("join").expect("accept");
    }
    producer.await.expect("producer");
    nothing_for(&mut sub, 300).await;
    broker.close().await;
}

#[tokio::test]
async fn a_long_run_never_stalls_quorum() {
    long_run("long", 16, 3000).await;
}

#[tokio::test]
async fn a_long_run_never_stalls_classic() {
    long_run("long-classic", 1, 300).await;
}

#[tokio::test]
async fn at_most_once_credit_follows_what_the_stream_hands_out() {
    let broker = broker().await;
    let queue = q("amo");
    publish_n(&broker, &queue, 30, "m").await;
    let options = at_most_once().credit(4);
    let mut sub = subscribe(&broker, spec(&queue, options, Declaration::default())).await;
    for i in 0..30 {
        let d = tokio::time::timeout(Duration::from_secs(10), sub.deliveries.next())
            .await
            .unwrap_or_else(|_| panic!("stalled after {i}"));
        if let Err(lost) = d.expect("stream") {
            known_over_send(true, &lost.to_string());
            return;
        }
    }
    broker.close().await;
    kept_to_credit(true);
}
