//! Coalesced acks never cover a delivery still in hand, nor end on one the broker no
//! longer holds: with acks of a channel going out together (`basic.ack multiple=true`),
//! a delivery held unsettled in the middle of the acked ones, one requeued and one
//! rejected, are each what they were settled as, and the channel stays open.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::join_all;
use ruststream_core::{Broker, Delivery, Message, Settlement, SubscribeSpec};
use support::{QueueSpec, Rabbit, broker, declare, next, unique, waiting};

const MESSAGES: usize = 40;

async fn a_gap_is_never_acked(rabbit: Rabbit, spec: QueueSpec) {
    let queue = unique("coalesced");
    declare(rabbit, &[(queue.clone(), spec)]);
    let lapin = broker(rabbit).await;
    for i in 0..MESSAGES {
        lapin
            .publisher()
            .publish(queue.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("sent");
    }
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.in_flight = MESSAGES;
    let mut sub = lapin.subscribe(spec).await.expect("subscribe");
    let mut held = Vec::new();
    let mut settling = Vec::new();
    for i in 0..MESSAGES {
        let d = next(&mut sub).await;
        assert_eq!(d.payload().as_ref(), format!("m{i}").as_bytes());
        match i {
            3 | 17 => held.push(d),
            9 => settling.push(d.settle(Settlement::Requeue)),
            25 => settling.push(d.settle(Settlement::Reject)),
            _ => settling.push(d.settle(Settlement::Accept)),
        }
    }
    for result in join_all(settling).await {
        result.expect("settled");
    }
    // The requeued one comes back; then the held ones are given back by closing.
    let again = next(&mut sub).await;
    assert_eq!(again.payload().as_ref(), b"m9", "{rabbit:?}");
    again.settle(Settlement::Accept).await.expect("acked");
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(held);
    drop(sub);
    lapin.close().await;
    // m3 and m17 wait in the queue (m25 was rejected: no dead-letter exchange, dropped).
    assert_eq!(waiting(rabbit, &queue).await, 2, "{rabbit:?}");
    let lapin = broker(rabbit).await;
    let mut sub = lapin
        .subscribe(SubscribeSpec::new(queue.as_str()))
        .await
        .expect("subscribe");
    let mut back = Vec::new();
    for _ in 0..2 {
        let d = next(&mut sub).await;
        back.push(String::from_utf8_lossy(d.payload()).into_owned());
        d.settle(Settlement::Accept).await.expect("acked");
    }
    // In either order (RabbitMQ 4's quorum queue returns them as it likes).
    back.sort();
    assert_eq!(back, ["m17", "m3"], "{rabbit:?}");
    lapin.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0);
}

/// m1 is requeued (its `basic.nack` written); then m0 and m5 are acked together while
/// m2–m4 are in hand. The run of m0 must end on m0's tag: a `multiple=true` ack ending
/// on m1's tag (already settled) is of a tag RabbitMQ no longer holds, it closes the
/// channel, and every delivery in hand comes back (a duplicate for each).
async fn a_run_never_ends_on_a_settled_tag(rabbit: Rabbit, spec: QueueSpec) {
    let queue = unique("coalesced-edge");
    declare(rabbit, &[(queue.clone(), spec)]);
    let lapin = broker(rabbit).await;
    for i in 0..6 {
        lapin
            .publisher()
            .publish(queue.as_str().into(), Message::new(format!("m{i}")))
            .await
            .expect("sent");
    }
    let mut spec = SubscribeSpec::new(queue.as_str());
    spec.in_flight = 6;
    let mut sub = lapin.subscribe(spec).await.expect("subscribe");
    let mut d: Vec<Delivery> = Vec::new();
    for _ in 0..6 {
        d.push(next(&mut sub).await);
    }
    let mut d = d.into_iter().map(Some).collect::<Vec<_>>();
    let mut take = |i: usize| d[i].take().expect("not settled yet");
    take(1).settle(Settlement::Requeue).await.expect("requeued");
    let (m0, m5) = (take(0), take(5));
    let (a, b) = tokio::join!(m0.settle(Settlement::Accept), m5.settle(Settlement::Accept));
    a.expect("m0 acked");
    b.expect("m5 acked");
    // m1 comes back: the channel is still open.
    let again = next(&mut sub).await;
    assert_eq!(again.payload().as_ref(), b"m1", "{rabbit:?}");
    for i in 2..5 {
        take(i)
            .settle(Settlement::Accept)
            .await
            .expect("acked in hand");
    }
    again.settle(Settlement::Accept).await.expect("m1 acked");
    // Nothing else comes back (no channel error returned what was in hand).
    let more = tokio::time::timeout(Duration::from_millis(500), sub.deliveries.next()).await;
    assert!(
        more.is_err(),
        "{rabbit:?}: nothing more is delivered, got {more:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(sub);
    lapin.close().await;
    assert_eq!(waiting(rabbit, &queue).await, 0, "{rabbit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_never_ends_on_a_settled_tag_quorum_3() {
    a_run_never_ends_on_a_settled_tag(Rabbit::V3, QueueSpec::quorum()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_never_ends_on_a_settled_tag_classic_4() {
    a_run_never_ends_on_a_settled_tag(Rabbit::V4, QueueSpec::classic()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_is_never_acked_quorum_3() {
    a_gap_is_never_acked(Rabbit::V3, QueueSpec::quorum()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_is_never_acked_classic_3() {
    a_gap_is_never_acked(Rabbit::V3, QueueSpec::classic()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_is_never_acked_quorum_4() {
    a_gap_is_never_acked(Rabbit::V4, QueueSpec::quorum()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_is_never_acked_classic_4() {
    a_gap_is_never_acked(Rabbit::V4, QueueSpec::classic()).await;
}
