//! The drain of a subscription at a graceful stop: the consumer is cancelled and what
//! RabbitMQ had already sent is yielded before the stream ends.

use std::sync::Arc;

use futures_util::StreamExt;
use lapin::{Channel, Consumer};

use crate::acker::ChannelAcker;
use crate::consumer::{ConsumeSpec, End, Sender, delivery};

/// A drain cancels the consumer once no delivery arrived for this long.
pub(crate) const QUIET: std::time::Duration = std::time::Duration::from_millis(30);

/// The longest a drain waits for the deliveries under way before it cancels.
pub(crate) const QUIET_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// The drain: `basic.cancel` (acks held until cancel-ok), then every delivery received
/// before cancel-ok is sent on (lapin ends the consumer's stream after them).
pub(crate) async fn drained(
    spec: &ConsumeSpec,
    epoch: u64,
    channel: &Channel,
    mut consumer: Consumer,
    tx: &Sender,
    acker: &Arc<ChannelAcker>,
    closing: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> End {
    // Acks are held: RabbitMQ has no credit for more. What it already sent arrives
    // while the consumer is still registered (a delivery arriving after cancel-ok is
    // dropped by lapin and comes back counted when the channel closes): wait until
    // nothing arrives for `QUIET` (at most `QUIET_MAX`) before cancelling.
    let mut early = Vec::new();
    let until = tokio::time::Instant::now() + QUIET_MAX;
    while tokio::time::Instant::now() < until {
        match tokio::time::timeout(QUIET, consumer.next()).await {
            Ok(Some(Ok(d))) => early.push(d),
            Ok(Some(Err(_)) | None) | Err(_) => break,
        }
    }
    tracing::debug!(queue = %spec.queue, "lapin: draining: cancelling the consumer");
    if let Err(e) = channel
        .basic_cancel(consumer.tag(), Default::default())
        .await
    {
        // The channel is gone: the broker has put back what it held.
        tracing::debug!(queue = %spec.queue, error = %e, "lapin: draining: cancel failed");
    }
    acker.release_acks();
    let acker: Arc<dyn ruststream_core::Acker> = acker.clone();
    let acker = &acker;
    let mut sent = 0_usize;
    for d in early {
        if tx.send(Ok(delivery(spec, epoch, d, acker))).await.is_err() {
            return End::Dropped;
        }
        sent += 1;
    }
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
