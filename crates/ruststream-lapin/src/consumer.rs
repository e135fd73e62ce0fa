//! A subscription: a consumer on a channel of its own, consumed again on a new channel
//! (and connection) when it is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
use crate::gate::Gate;
use crate::message;
use crate::stream::{Deliveries, Item};

/// What a subscription consumes.
#[derive(Clone, Debug)]
pub(crate) struct ConsumeSpec {
    pub(crate) address: Address,
    pub(crate) queue: String,
    pub(crate) prefetch: u16,
    /// How many deliveries the runtime holds at once.
    pub(crate) in_flight: usize,
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
    let acker = Arc::new(ChannelAcker::new(
        spec.delayed.clone(),
        spec.in_flight,
        spec.prefetch,
    ));
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

pub(crate) type Sender = mpsc::Sender<Item>;

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
        acker.lose();
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
    // Deliveries received on this channel: what a drain weighs against the prefetch.
    let mut received = 0_u64;
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
                let gate = acker.gate(epoch);
                let held = Held { gate: gate.as_deref(), received };
                return drained(spec, epoch, channel, consumer, tx, &acker_dyn, held, &mut closing).await;
            }
            item = consumer.next() => match item {
                Some(Ok(d)) => {
                    received += 1;
                    let delivery = delivery(spec, epoch, d, &acker_dyn);
                    if tx.send(Ok((epoch, delivery))).await.is_err() {
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

/// How long a drain waits for another delivery before it takes the window as closed
/// (the queue has nothing more to send).
const QUIET: Duration = Duration::from_millis(200);
/// How long a drain holds settlements back at most.
const HOLD_AT_MOST: Duration = Duration::from_secs(2);

/// What a drain weighs: the channel's settlement gate and the deliveries it received.
struct Held<'a> {
    gate: Option<&'a Gate>,
    received: u64,
}

/// How the wait for a full prefetch window ended.
enum Window {
    /// Nothing can be in flight (or nothing more is coming): `basic.cancel` may go out.
    /// A delivery the stream had no room for is carried.
    Closed(Option<Item>),
    /// The consumer's stream ended: the channel or the consumer is gone.
    Ended,
    /// The drain was overtaken.
    End(End),
}

/// The drain: settlements are held back until the prefetch window is full (or the queue
/// stays quiet), so that no delivery is in flight when `basic.cancel` goes out (see
/// [`Gate`]); then every delivery received before cancel-ok is sent on (lapin ends the
/// consumer's stream after them) and the held settlements go out.
#[allow(clippy::too_many_arguments)]
async fn drained(
    spec: &ConsumeSpec,
    epoch: u64,
    channel: &Channel,
    mut consumer: Consumer,
    tx: &Sender,
    acker: &Arc<dyn ruststream_core::Acker>,
    held: Held<'_>,
    closing: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> End {
    let window = match held.gate {
        Some(gate) => {
            gate.hold();
            let window = close_window(spec, epoch, &mut consumer, tx, acker, &held, closing).await;
            if !matches!(window, Window::Closed(_)) {
                gate.release();
            }
            window
        }
        None => Window::Closed(None),
    };
    let carried = match window {
        Window::Closed(carried) => carried,
        Window::Ended => return End::Drained,
        Window::End(end) => return end,
    };
    tracing::debug!(queue = %spec.queue, "lapin: draining: cancelling the consumer");
    if let Err(e) = channel
        .basic_cancel(consumer.tag(), Default::default())
        .await
    {
        // The channel is gone: the broker has put back what it held.
        tracing::debug!(queue = %spec.queue, error = %e, "lapin: draining: cancel failed");
    }
    // After cancel-ok: the prefetch slots the held settlements free go to no consumer.
    if let Some(gate) = held.gate {
        gate.release();
    }
    if let Some(d) = carried
        && tx.send(d).await.is_err()
    {
        return End::Dropped;
    }
    let mut sent = 0_usize;
    loop {
        tokio::select! {
            () = &mut *closing => return End::Closing,
            item = consumer.next() => match item {
                Some(Ok(d)) => {
                    if tx.send(Ok((epoch, delivery(spec, epoch, d, acker)))).await.is_err() {
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

/// With settlements held, sends on what arrives until RabbitMQ can send no more: once
/// `prefetch` deliveries are out (received − settlements let out), none is in flight. A
/// prefetch of 0 has no limit: only the quiet or the time limit ends the wait.
async fn close_window(
    spec: &ConsumeSpec,
    epoch: u64,
    consumer: &mut Consumer,
    tx: &Sender,
    acker: &Arc<dyn ruststream_core::Acker>,
    held: &Held<'_>,
    closing: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Window {
    let Some(gate) = held.gate else {
        return Window::Closed(None);
    };
    let window = u64::from(spec.prefetch);
    let mut received = held.received;
    let until = tokio::time::Instant::now() + HOLD_AT_MOST;
    while window == 0 || received.saturating_sub(gate.passed()) < window {
        let quiet = (tokio::time::Instant::now() + QUIET).min(until);
        tokio::select! {
            () = &mut *closing => return Window::End(End::Closing),
            () = tokio::time::sleep_until(quiet) => break,
            item = consumer.next() => match item {
                Some(Ok(d)) => {
                    received += 1;
                    match tx.try_send(Ok((epoch, delivery(spec, epoch, d, acker)))) {
                        Ok(()) => {}
                        // No room: no wait here while settlements are held; it is sent
                        // after the cancel.
                        Err(mpsc::error::TrySendError::Full(d)) => return Window::Closed(Some(d)),
                        Err(mpsc::error::TrySendError::Closed(_)) => return Window::End(End::Dropped),
                    }
                }
                Some(Err(_)) | None => return Window::Ended,
            }
        }
    }
    tracing::debug!(queue = %spec.queue, received, passed = gate.passed(), "lapin: draining: window closed");
    Window::Closed(None)
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
