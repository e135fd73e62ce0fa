//! The stream of a subscription's deliveries.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use ruststream_core::{ConsumeError, Delivery};
use tokio::sync::mpsc;

use crate::acker::ChannelAcker;

/// What the consumer task sends on: a delivery with the epoch of the channel it came on.
pub(crate) type Item = Result<(u64, Delivery), ConsumeError>;

/// The deliveries the consumer task sends on. Dropping it first tells the acker to give
/// nothing back itself (the consumer is still consuming: RabbitMQ would hand a message
/// given back now straight back to it and count it again); the task then cancels the
/// consumer and closes the channel, which returns what was not settled.
///
/// A delivery of a channel that is gone (the connection dropped while it waited here) is
/// not handed out: it cannot be settled, RabbitMQ has put it back already, and a handler
/// running it would only make a duplicate.
pub(crate) struct Deliveries {
    rx: mpsc::Receiver<Item>,
    acker: Arc<ChannelAcker>,
}

impl Deliveries {
    pub(crate) fn new(rx: mpsc::Receiver<Item>, acker: Arc<ChannelAcker>) -> Self {
        Self { rx, acker }
    }
}

impl Stream for Deliveries {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Ok((epoch, delivery)))) => {
                    if !self.acker.is_current(epoch) {
                        // Dropped: abandoning it does nothing, its channel is gone.
                        drop(delivery);
                        continue;
                    }
                    Poll::Ready(Some(Ok(delivery)))
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl Drop for Deliveries {
    fn drop(&mut self) {
        // Before `rx` drops the deliveries it still buffers (each one abandoned).
        self.acker.hold_back();
    }
}
