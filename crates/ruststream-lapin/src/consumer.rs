//! A subscription: a consumer on a channel of its own, consumed again on a new channel
//! (and connection) when it is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Consumer};
use ruststream_core::{
    Address, Attached, Capabilities, ConsumeError, Delivery, RETRY_COUNT, SubscribeError,
    Subscription, Tag,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::acker::ChannelAcker;
use crate::connection::Connector;
use crate::message;

/// What a subscription consumes.
#[derive(Clone, Debug)]
pub(crate) struct ConsumeSpec {
    pub(crate) address: Address,
    pub(crate) queue: String,
    pub(crate) prefetch: u16,
    /// The queue counts deliveries in `x-delivery-count`.
    pub(crate) counts: bool,
    /// Where `RequeueAfter` parks copies, if the subscription delays natively.
    pub(crate) delayed: Option<crate::acker::Delayed>,
}

static CONSUMERS: AtomicU64 = AtomicU64::new(0);

/// Opens the subscription: the first consumer is opened here, so that a queue that
/// cannot be consumed is an error of `subscribe`.
pub(crate) async fn subscribe(
    connector: Arc<Connector>,
    spec: ConsumeSpec,
    capabilities: Capabilities,
) -> Result<(Subscription, JoinHandle<()>), SubscribeError> {
    let first = open(&connector, &spec).await.map_err(|e| match e {
        Open::Connection(why) => SubscribeError::Disconnected(why),
        Open::Refused(why) => SubscribeError::Refused(format!("consuming {}: {why}", spec.queue)),
    })?;
    let (tx, mut rx) = mpsc::channel(usize::from(spec.prefetch).clamp(1, 1024));
    let attached = Attached::new();
    let acker = Arc::new(ChannelAcker::new(spec.delayed.clone()));
    let task = tokio::spawn(run(connector, spec, acker, first, tx, attached.clone()));
    let deliveries = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Ok((
        Subscription {
            deliveries: Box::pin(deliveries),
            capabilities,
            attached,
        },
        task,
    ))
}

enum Open {
    Connection(String),
    Refused(String),
}

async fn open(connector: &Connector, spec: &ConsumeSpec) -> Result<(Channel, Consumer), Open> {
    let connection = connector.connection().await.map_err(Open::Connection)?;
    let failed = |e: lapin::Error| {
        if crate::probe::reply_code(&e).is_some() && connection.status().connected() {
            Open::Refused(e.to_string())
        } else {
            Open::Connection(e.to_string())
        }
    };
    let channel = connection.create_channel().await.map_err(failed)?;
    channel
        .basic_qos(spec.prefetch, BasicQosOptions::default())
        .await
        .map_err(failed)?;
    let tag = format!(
        "ruststream-{}-{}",
        std::process::id(),
        CONSUMERS.fetch_add(1, Ordering::Relaxed)
    );
    let consumer = channel
        .basic_consume(
            spec.queue.as_str().into(),
            tag.into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(failed)?;
    Ok((channel, consumer))
}

type Sender = mpsc::Sender<Result<Delivery, ConsumeError>>;

async fn run(
    connector: Arc<Connector>,
    spec: ConsumeSpec,
    acker: Arc<ChannelAcker>,
    first: (Channel, Consumer),
    tx: Sender,
    attached: Attached,
) {
    let mut backoff = connector.backoff();
    let mut next = Some(first);
    let mut epoch = 0_u64;
    loop {
        let (channel, mut consumer) = match next.take() {
            Some(open) => open,
            None => {
                tokio::select! {
                    () = connector.closing() => return,
                    () = tx.closed() => return,
                    () = tokio::time::sleep(backoff.next_delay()) => {}
                }
                match open(&connector, &spec).await {
                    Ok(open) => open,
                    Err(Open::Connection(why) | Open::Refused(why)) => {
                        tracing::warn!(queue = %spec.queue, error = %why, "lapin: cannot consume yet; trying again");
                        continue;
                    }
                }
            }
        };
        epoch += 1;
        acker.attach(epoch, channel.clone());
        attached.attach();
        backoff.reset();
        let acker_dyn: Arc<dyn ruststream_core::Acker> = acker.clone();
        // Made once per channel, not per delivery.
        let closing = connector.closing();
        let dropped = tx.closed();
        tokio::pin!(closing, dropped);
        let why = loop {
            tokio::select! {
                () = &mut closing => {
                    // No more deliveries. Closing the channel (close-ok comes back once
                    // RabbitMQ's channel has handled every earlier frame) before the
                    // connection gives the acks written so far their best chance; a
                    // settlement after it is `Disconnected`.
                    let _ = channel.basic_cancel(consumer.tag(), Default::default()).await;
                    acker.detach();
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        channel.close(200, "closing".into()),
                    )
                    .await;
                    return;
                }
                () = &mut dropped => {
                    // The subscription was dropped: its unsettled deliveries go back.
                    acker.detach();
                    let _ = channel.close(200, "subscription dropped".into()).await;
                    return;
                }
                item = consumer.next() => match item {
                    Some(Ok(d)) => {
                        let delivery = delivery(&spec, epoch, d, &acker_dyn);
                        if tx.send(Ok(delivery)).await.is_err() {
                            acker.detach();
                            let _ = channel.close(200, "subscription dropped".into()).await;
                            return;
                        }
                    }
                    Some(Err(e)) => break e.to_string(),
                    None => break "the broker cancelled the consumer".to_owned(),
                }
            }
        };
        acker.detach();
        attached.detach();
        if connector.is_closed() {
            return;
        }
        tracing::warn!(queue = %spec.queue, error = %why, "lapin: subscription lost; consuming again");
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            channel.close(200, "consuming again".into()),
        )
        .await;
        let report = ConsumeError(format!(
            "lapin: lost the subscription to {}: {why}; consuming again",
            spec.queue
        ));
        if tx.send(Err(report)).await.is_err() {
            return;
        }
    }
}

fn delivery(
    spec: &ConsumeSpec,
    epoch: u64,
    d: lapin::message::Delivery,
    acker: &Arc<dyn ruststream_core::Acker>,
) -> Delivery {
    let (headers, count) = message::headers(&d.properties);
    // A copy the runtime published is counted by its own header alone.
    let copy = headers.get(RETRY_COUNT).is_some();
    let delivery = Delivery::new(
        Bytes::from(d.data),
        headers,
        spec.address.clone(),
        Tag::Pair(epoch, d.delivery_tag),
        acker.clone(),
    );
    if spec.counts && !copy {
        // Quorum queues: no header on the first delivery; `n` after n returns.
        let attempt = count
            .and_then(|n| u32::try_from(n).ok())
            .map_or(1, |n| n.saturating_add(1));
        delivery.with_broker_attempt(attempt)
    } else {
        delivery
    }
}
