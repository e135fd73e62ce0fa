//! The stream of a subscription's deliveries.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use ruststream_core::{ConsumeError, Delivery};
use tokio::sync::mpsc;

use crate::acker::ChannelAcker;

/// The deliveries the consumer task sends on. Dropping it first tells the acker to give
/// nothing back itself (the consumer is still consuming: RabbitMQ would hand a message
/// given back now straight back to it and count it again); the task then cancels the
/// consumer and closes the channel, which returns what was not settled.
pub(crate) struct Deliveries {
    rx: mpsc::Receiver<Result<Delivery, ConsumeError>>,
    acker: Arc<ChannelAcker>,
}

impl Deliveries {
    pub(crate) fn new(
        rx: mpsc::Receiver<Result<Delivery, ConsumeError>>,
        acker: Arc<ChannelAcker>,
    ) -> Self {
        Self { rx, acker }
    }
}

impl Stream for Deliveries {
    type Item = Result<Delivery, ConsumeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Deliveries {
    fn drop(&mut self) {
        // Before `rx` drops the deliveries it still buffers (each one abandoned).
        self.acker.hold_back();
    }
}
