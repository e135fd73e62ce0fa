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
    Address, Attached, Capabilities, ConsumeError, Delivery, Drain, RETRY_COUNT, SubscribeError,
    Subscription, Tag,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::acker::ChannelAcker;
use crate::connection::Connector;
use crate::message;
use crate::stream::Deliveries;

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
/// cannot be consumed is an error of `subscribe`. The subscription accepts `drain`.
pub(crate) async fn subscribe(
    connector: Arc<Connector>,
    spec: ConsumeSpec,
    capabilities: Capabilities,
    drain: Drain,
) -> Result<(Subscription, JoinHandle<()>), SubscribeError> {
    let first = open(&connector, &spec).await.map_err(|e| match e {
        Open::Connection(why) => SubscribeError::Disconnected(why),
        Open::Refused(why) => SubscribeError::Refused(format!("consuming {}: {why}", spec.queue)),
    })?;
    let (tx, rx) = mpsc::channel(usize::from(spec.prefetch).clamp(1, 1024));
    let attached = Attached::new();
    let acker = Arc::new(ChannelAcker::new(spec.delayed.clone()));
    drain.accept();
    let task = tokio::spawn(run(
        connector,
        spec,
        acker.clone(),
        first,
        tx,
        attached.clone(),
        drain,
    ));
    Ok((
        Subscription {
            deliveries: Box::pin(Deliveries::new(rx, acker)),
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

pub(crate) type Sender = mpsc::Sender<Result<Delivery, ConsumeError>>;

/// How consuming on one channel ended.
enum End {
    /// The broker is closing.
    Closing,
    /// The subscription was dropped.
    Dropped,
    /// A drain was requested: the consumer is cancelled and every delivery it had
    /// received was sent on.
    Drained,
    /// The channel or the consumer was lost.
    Lost(String),
}

async fn run(
    connector: Arc<Connector>,
    spec: ConsumeSpec,
    acker: Arc<ChannelAcker>,
    first: (Channel, Consumer),
    tx: Sender,
    attached: Attached,
    drain: Drain,
) {
    let mut backoff = connector.backoff();
    let mut next = Some(first);
    let mut epoch = 0_u64;
    loop {
        let (channel, consumer) = match next.take() {
            Some(open) => open,
            None => {
                tokio::select! {
                    () = connector.closing() => return,
                    () = tx.closed() => return,
                    // Nothing received on a lost channel is left: the stream ends.
                    () = drain.requested() => return,
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
        let end = consume(
            &connector, &spec, epoch, &channel, consumer, &tx, &acker, &drain,
        )
        .await;
        let why = match end {
            End::Closing => {
                // Closing the channel (close-ok comes back once RabbitMQ's channel has
                // handled every earlier frame) before the connection gives the acks
                // written so far their best chance; a settlement after it is
                // `Disconnected`.
                acker.detach();
                close(&channel, "closing").await;
                return;
            }
            End::Dropped => {
                // The consumer is cancelled already: what the channel holds goes back
                // to the queue, not to this consumer again.
                acker.detach();
                close(&channel, "subscription dropped").await;
                return;
            }
            End::Drained => {
                // The stream ends; the channel stays open for the settlements of what
                // it yielded, until the broker closes.
                drop(tx);
                connector.closing().await;
                acker.detach();
                close(&channel, "closing").await;
                return;
            }
            End::Lost(why) => why,
        };
        acker.detach();
        attached.detach();
        if connector.is_closed() || drain.is_requested() {
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

/// Closes `channel`, waiting at most 5 s for close-ok.
async fn close(channel: &Channel, why: &str) {
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        channel.close(200, why.into()),
    )
    .await;
}

/// Sends on the deliveries of one channel until it ends.
#[allow(clippy::too_many_arguments)]
async fn consume(
    connector: &Connector,
    spec: &ConsumeSpec,
    epoch: u64,
    channel: &Channel,
    mut consumer: Consumer,
    tx: &Sender,
    acker: &Arc<ChannelAcker>,
    drain: &Drain,
) -> End {
    let acker_dyn: Arc<dyn ruststream_core::Acker> = acker.clone();
    // Made once per channel, not per delivery.
    let closing = connector.closing();
    let dropped = tx.closed();
    let requested = drain.requested();
    tokio::pin!(closing, dropped, requested);
    loop {
        tokio::select! {
            () = &mut closing => {
                let _ = channel.basic_cancel(consumer.tag(), Default::default()).await;
                return End::Closing;
            }
            () = &mut dropped => {
                cancel(channel, &consumer).await;
                return End::Dropped;
            }
            () = &mut requested => {
                return drained(spec, epoch, channel, consumer, tx, &acker_dyn, &mut closing).await;
            }
            item = consumer.next() => match item {
                Some(Ok(d)) => {
                    let delivery = delivery(spec, epoch, d, &acker_dyn);
                    if tx.send(Ok(delivery)).await.is_err() {
                        cancel(channel, &consumer).await;
                        return End::Dropped;
                    }
                }
                Some(Err(e)) => return End::Lost(e.to_string()),
                None => return End::Lost("the broker cancelled the consumer".to_owned()),
            }
        }
    }
}

/// `basic.cancel`, waiting at most 5 s for cancel-ok.
async fn cancel(channel: &Channel, consumer: &Consumer) {
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        channel.basic_cancel(consumer.tag(), Default::default()),
    )
    .await;
}

/// The drain: `basic.cancel`, then every delivery received before cancel-ok is sent on
/// (lapin ends the consumer's stream after them).
async fn drained(
    spec: &ConsumeSpec,
    epoch: u64,
    channel: &Channel,
    mut consumer: Consumer,
    tx: &Sender,
    acker: &Arc<dyn ruststream_core::Acker>,
    closing: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> End {
    tracing::debug!(queue = %spec.queue, "lapin: draining: cancelling the consumer");
    if let Err(e) = channel
        .basic_cancel(consumer.tag(), Default::default())
        .await
    {
        // The channel is gone: the broker has put back what it held.
        tracing::debug!(queue = %spec.queue, error = %e, "lapin: draining: cancel failed");
    }
    let mut sent = 0_usize;
    loop {
        tokio::select! {
            () = &mut *closing => return End::Closing,
            item = consumer.next() => match item {
                Some(Ok(d)) => {
                    if tx.send(Ok(delivery(spec, epoch, d, acker))).await.is_err() {
                        return End::Dropped;
                    }
                    sent += 1;
                }
                Some(Err(_)) | None => break,
            }
        }
    }
    tracing::debug!(queue = %spec.queue, buffered = sent, "lapin: drained");
    End::Drained
}

fn delivery(
    spec: &ConsumeSpec,
    epoch: u64,
    d: lapin::message::Delivery,
    acker: &Arc<dyn ruststream_core::Acker>,
) -> Delivery {
    let (mut headers, mut count) = message::headers(&d.properties);
    if !d.redelivered {
        // RabbitMQ writes `x-delivery-count` on a redelivery only (its count is 0
        // before): on a first delivery the header is a producer's, never the broker's.
        headers.remove(message::DELIVERY_COUNT);
        count = None;
    }
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
